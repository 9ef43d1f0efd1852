"""The kernels built into the library."""

from ._args import U32_MAX, _int_arg
from ._lib import lib

def kernel_names():
    """Names Queue.dispatch accepts."""
    return [lib.hl_dispatch_kernel_name(i).decode()
            for i in range(lib.hl_dispatch_kernel_count())]


def pattern_value(seed, index):
    """Word |index| of the fill_pattern sequence of |seed|."""
    return lib.hl_pattern_value(_int_arg(seed, "seed", 0, U32_MAX),
                                _int_arg(index, "index"))

