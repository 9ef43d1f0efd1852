# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The kernels built into the library."""

from __future__ import annotations

from typing import List

from ._args import U32_MAX, _int_arg
from ._lib import lib

__all__ = ["kernel_names", "pattern_value"]


def kernel_names() -> List[str]:
    """The built-in kernels Queue.dispatch accepts, in kernel-table order."""
    return [lib.hl_dispatch_kernel_name(i).decode()
            for i in range(lib.hl_dispatch_kernel_count())]


def pattern_value(seed: int, index: int) -> int:
    """Word |index| of the fill_pattern sequence of |seed|."""
    return int(lib.hl_pattern_value(_int_arg(seed, "seed", 0, U32_MAX),
                                    _int_arg(index, "index")))

