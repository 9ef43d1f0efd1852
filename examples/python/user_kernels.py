# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
# Your own kernels from Python: load an executable from the code objects a
# build produced (one AMDGPU object per GPU target, plus the host shared
# object for the host backend), run a kernel inside an invocation whose
# result is allocated and freed in queue order, and check the sums.
#
#   LIBHIPLINE=build/lib/libhipline.so PYTHONPATH=runtime/bindings/python \
#       python3 examples/python/user_kernels.py DIR TARGETS HOST_SO
#
# DIR holds user_kernels_<target>.co (tests/executable.cmake builds them
# with clang-19), TARGETS is "gfx90a,gfx1100", HOST_SO is
# user_kernels_host.so. See docs/executables.md.
import array
import asyncio
import os
import sys
from typing import Dict, Optional, Union

import hipline
from hipline import BufferArg, Scalar

N = 1024


def load(directory: str, targets: str, host_so: str) -> hipline.Executable:
    # Keyed by target; a value is a path or the object's bytes.
    objects: Dict[Optional[str], Union[str, bytes]] = {}
    for target in filter(None, targets.split(",")):
        path = os.path.join(directory, "user_kernels_%s.co" % target)
        with open(path, "rb") as f:
            objects[target] = f.read()
    objects["host"] = host_so
    return hipline.Executable(objects)


async def main(directory, targets, host_so):
    with load(directory, targets, host_so) as exe, \
            hipline.Device() as dev, dev.create_queue() as q:
        print("device %s runs the %r object" % (dev, exe.select(dev)))

        # c = a + b into a fresh buffer allocated on the invocation's queue.
        def add_vectors(queue, args, wait, signal):
            c = queue.alloca(4 * N, wait=wait)
            queue.dispatch("vector_add",
                           [BufferArg(args[0], "r"), BufferArg(args[1], "r"),
                            BufferArg(c, "w"), Scalar.u32(N)],
                           grid=(N // 256,), block=(256,), wait=c.ready,
                           signal=signal, executable=exe)
            return c

        fn = hipline.Function("example.add_vectors", add_vectors,
                              args=("r", "r"), results=1)
        a = array.array("f", (float(i) for i in range(N)))
        b = array.array("f", (0.5 * i for i in range(N)))
        ba, bb = q.alloca(4 * N), q.alloca(4 * N)
        q.write(ba, a)
        written = q.write(bb, b)
        inv = hipline.ProgramInvocation(fn, q, [ba, bb])
        inv.add_wait(written)
        (c,) = await inv
        data = array.array("f", await q.read_bytes(c))
        for buf in (c, ba, bb):
            q.dealloca(buf)  # In queue order, after every use above.
        await q.idle()
        bad = [i for i in range(N) if data[i] != a[i] + b[i]]
        if bad:
            sys.exit("c[%d] = %g, not %g" % (bad[0], data[bad[0]],
                                              a[bad[0]] + b[bad[0]]))
        imported = dev.invocation_stats().async_imports
        print("vector_add: %d sums correct; the result was imported %s "
              "and freed in queue order" % (N, "async" if imported else
                                            "sync"))


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: %s DIR TARGETS HOST_SO" % sys.argv[0])
    asyncio.run(main(*sys.argv[1:]))
