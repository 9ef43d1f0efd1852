# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# hipline from asyncio: allocate, fill, invoke a function, read the result.
# Every queue operation returns a fence that can be awaited; awaiting never
# blocks the event loop and starts no thread (see docs/python.md).
#
#   LIBHIPLINE=build/lib/libhipline.so PYTHONPATH=runtime/bindings/python \
#       python3 examples/python/asyncio_clone.py
import asyncio
import struct
import sys

import hipline


async def main():
    with hipline.Device("host") as dev, dev.create_queue() as q:
        x = q.alloca(1 << 20)                        # returns at once; x.ready is its fence
        await q.fill(x, 0x3F800000, wait=x.ready)    # every queue op returns an awaitable fence
        inv = hipline.ProgramInvocation(hipline.Function.lookup("hipline.clone"), q, [x])
        inv.assume_no_alias = False                  # shortfin's spelling, per invocation
        (y,) = await inv                             # invoke, await, take the results
        data = await q.read_bytes(y)
        if set(struct.unpack(f"<{len(data) // 4}I", data)) != {0x3F800000}:
            sys.exit("the clone does not hold what was filled")
        print(inv.effective_assume_no_alias, data[:4].hex())


asyncio.run(main())
