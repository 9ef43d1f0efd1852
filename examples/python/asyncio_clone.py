"""hipline from asyncio: allocate, fill, invoke a function, read the result.

Every queue operation returns a fence that can be awaited; awaiting never
blocks the event loop and starts no thread (see docs/python.md).

    LIBHIPLINE=build/lib/libhipline.so PYTHONPATH=runtime/bindings/python \\
        python3 examples/python/asyncio_clone.py
"""
import asyncio
import struct
import sys

import hipline

ONE = 0x3F800000  # The bits of 1.0f.


async def main():
    with hipline.Device("host") as dev, dev.create_queue() as q:
        x = q.alloca(1 << 20)  # Returns at once; x.ready is its fence.
        await q.fill(x, ONE, wait=x.ready)
        clone = hipline.Function.lookup("hipline.clone")
        inv = hipline.ProgramInvocation(clone, q, [x])
        inv.assume_no_alias = False  # shortfin's spelling, per invocation.
        (y,) = await inv  # Invoke, await, take the results.
        data = await q.read_bytes(y)
        words = struct.unpack(f"<{len(data) // 4}I", data)
        if len(data) != 1 << 20 or any(w != ONE for w in words):
            sys.exit("the clone does not hold the filled words")
        print(inv.effective_assume_no_alias, hex(words[0]))


asyncio.run(main())
