# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""User executables from Python: hipline.Executable from files and bytes
keyed by target, Queue.dispatch(..., executable=...); and
Queue.native_call.

The user kernel set is tests/user_kernels/ (vector_add, row_softmax,
add_u64), built by tests/executable.cmake: HL_USER_KERNELS_DIR holds
user_kernels_<target>.co for each GPU target in HL_USER_KERNEL_TARGETS,
HL_USER_KERNELS_HOST is the host twin. HIPLINE_TEST_BACKEND picks the
device's backend ("host" by default; "hip" on the hip test runtime, which
runs the host twin for the GPU objects).
"""

import array
import gc
import math
import os
import unittest

import hipline
from hipline import BufferArg, Scalar

N = 1024


def _kernel_files():
    directory = os.environ.get("HL_USER_KERNELS_DIR")
    host = os.environ.get("HL_USER_KERNELS_HOST")
    if not directory or not host:
        raise unittest.SkipTest("HL_USER_KERNELS_DIR / HL_USER_KERNELS_HOST "
                                "are not set (run through ctest)")
    targets = [t for t in os.environ.get("HL_USER_KERNEL_TARGETS",
                                         "").split(",") if t]
    files = {t: os.path.join(directory, "user_kernels_%s.co" %
                             t.replace(":", "_"))
             for t in targets}
    files["host"] = host
    return files


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def _floats(values):
    return array.array("f", values)


class ExecutableTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.files = _kernel_files()
        cls.backend = os.environ.get("HIPLINE_TEST_BACKEND", "host")

    def setUp(self):
        self.baseline = hipline.live_device_count()
        self.device = hipline.Device(self.backend)
        self.queue = self.device.create_queue()

    def tearDown(self):
        self.queue.wait_idle(60)
        self.queue.close()
        self.device.close()
        gc.collect()
        self.assertEqual(hipline.live_device_count(), self.baseline)

    def _vector_add(self, exe):
        """c = a + b with |exe|; returns c as floats."""
        q = self.queue
        a = _floats(float(i) for i in range(N))
        b = _floats(0.5 * i for i in range(N))
        ba, bb, bc = q.alloca(4 * N), q.alloca(4 * N), q.alloca(4 * N)
        q.write(ba, a)
        q.write(bb, b)
        q.dispatch("vector_add",
                   [BufferArg(ba, "r"), BufferArg(bb, "r"),
                    BufferArg(bc, "w"), Scalar.u32(N)],
                   grid=(N // 256,), block=(256,), executable=exe)
        c = _floats([0.0] * N)
        q.read(bc, c).wait(60)
        for buf in (ba, bb, bc):
            q.dealloca(buf)
            buf.close()
        for i in range(N):
            self.assertEqual(c[i], a[i] + b[i], "c[%d]" % i)
        return c

    def test_from_files(self):
        with hipline.Executable(self.files) as exe:
            self.assertEqual(exe.targets, list(self.files))
            self.assertEqual(repr(exe), "<hipline.Executable %d objects: %s>"
                             % (len(self.files), ", ".join(self.files)))
            self.assertEqual(len(exe), len(self.files))
            expected = self.device.properties.target
            chosen = exe.select(self.device)
            if self.backend == "host":
                self.assertEqual(chosen, "host")
            else:
                self.assertTrue(expected.startswith(chosen.split(":")[0]),
                                (chosen, expected))
            self.assertEqual(exe.kernel_arg_count("vector_add", self.device),
                             4)
            self._vector_add(exe)
        self.assertEqual(repr(exe), "<hipline.Executable closed>")

    def test_from_bytes(self):
        data = {t: _read(p) for t, p in self.files.items()}
        data["host"] = bytearray(data["host"])  # Any buffer-protocol object.
        with hipline.Executable(data) as exe:
            self.assertEqual(exe.targets, list(self.files))
            self._vector_add(exe)

    def test_path_objects_and_host_only(self):
        import pathlib
        with hipline.Executable(
                {"host": pathlib.Path(self.files["host"])}) as exe:
            if self.backend == "host":
                self._vector_add(exe)
            else:
                with self.assertRaises(hipline.NotFoundError) as cm:
                    exe.select(self.device)
                self.assertIn("host", str(cm.exception))

    def test_offload_bundle_without_a_target(self):
        """A bundle keyed None contributes every AMDGPU entry, each with its
        own target (hipcc's bundle, where hipcc built one)."""
        bundle = os.environ.get("HL_USER_KERNELS_BUNDLE")
        if not bundle:
            self.skipTest("no hipcc offload bundle was built")
        for source in (bundle, _read(bundle)):
            with hipline.Executable({None: source,
                                     "host": self.files["host"]}) as exe:
                targets = exe.targets
                self.assertEqual(targets[-1], "host")
                self.assertTrue(targets[:-1], targets)
                for t in targets[:-1]:
                    self.assertTrue(t.startswith("gfx90a"), targets)
                self._vector_add(exe)

    def test_row_softmax_and_u64_scalars(self):
        q = self.queue
        rows, cols = 8, 16
        x = _floats((r * cols + c) % 7 - 3.0 for r in range(rows)
                    for c in range(cols))
        with hipline.Executable(self.files) as exe:
            bx, by = q.alloca(4 * rows * cols), q.alloca(4 * rows * cols)
            q.write(bx, x)
            q.dispatch("row_softmax",
                       [BufferArg(bx, "r"), BufferArg(by, "w"),
                        Scalar.u32(rows), Scalar.u32(cols)],
                       grid=(1,), block=(rows,), executable=exe)
            y = _floats([0.0] * (rows * cols))
            q.read(by, y).wait(60)
            for r in range(rows):
                row = x[r * cols:(r + 1) * cols]
                m = max(row)
                s = sum(math.exp(v - m) for v in row)
                for c in range(cols):
                    self.assertAlmostEqual(y[r * cols + c],
                                           math.exp(row[c] - m) / s, 5)
            words = array.array("Q", range(4))
            bw = q.alloca(8 * 4)
            q.write(bw, words)
            q.dispatch("add_u64", [BufferArg(bw, "rw"),
                                   Scalar.u64(2**40 + 3), Scalar.u32(4)],
                       grid=(1,), block=(4,), executable=exe)
            out = array.array("Q", [0] * 4)
            q.read(bw, out).wait(60)
            self.assertEqual(list(out), [i + 2**40 + 3 for i in range(4)])
            for buf in (bx, by, bw):
                q.dealloca(buf)
                buf.close()

    def test_wrong_arguments_name_the_argument(self):
        q = self.queue
        with hipline.Executable(self.files) as exe:
            buf = q.alloca(4 * N)
            good = [BufferArg(buf, "r"), BufferArg(buf, "r"),
                    BufferArg(buf, "w"), Scalar.u32(N)]
            cases = [
                (good[:3], "takes 4 arguments; 3"),  # One short.
                (good + [Scalar.u32(1)], "takes 4 arguments; 5"),
                # Wrong kinds, then a wrong size: the argument's index, and
                # its name where the object's metadata has one (the host
                # twin's does; clang's GPU objects may leave names out).
                (good[:3] + [BufferArg(buf, "r")], "argument 3"),
                ([Scalar.u32(1)] + good[1:], "argument 0"),
                (good[:3] + [Scalar.u64(N)], "argument 3"),
            ]
            host = exe.select(self.device) == "host"
            for args, named in cases:
                with self.assertRaises(hipline.InvalidArgumentError) as cm:
                    q.dispatch("vector_add", args, executable=exe)
                self.assertIn(named, str(cm.exception))
                if host and named.startswith("argument"):
                    name = "(n)" if named.endswith("3") else "(a)"
                    self.assertIn(name, str(cm.exception))
            with self.assertRaises(hipline.NotFoundError) as cm:
                q.dispatch("no_such_kernel", [], executable=exe)
            self.assertIn("no_such_kernel", str(cm.exception))
            with self.assertRaises(TypeError):
                q.dispatch("vector_add", good, executable="vector_add")
            q.dealloca(buf).wait(60)
            buf.close()
            self.queue.check()  # Refused dispatches never failed the queue.

    def test_bad_objects(self):
        with self.assertRaises(hipline.InvalidArgumentError):
            hipline.Executable({})
        with self.assertRaises(hipline.InvalidArgumentError) as cm:
            hipline.Executable({"gfx90a": b"not an ELF"})
        self.assertIn("neither", str(cm.exception))
        with self.assertRaises(hipline.UnavailableError):
            hipline.Executable({"gfx90a": "/nonexistent/user_kernels.co"})
        with self.assertRaises(hipline.UnavailableError):
            hipline.Executable({"host": b"not a shared object"})
        with self.assertRaises(TypeError):
            hipline.Executable({"host": 42})
        with self.assertRaises(TypeError):
            hipline.Executable([("host", self.files["host"])])
        with self.assertRaises(hipline.InvalidArgumentError):
            hipline.Executable({"gfx90a:xnack": self.files["host"]})

    def test_result_freed_in_queue_order(self):
        """A Python function dispatches the user kernel into a result it
        allocates; the caller frees the result in queue order after a
        read, and the read sees the kernel's sums."""
        q = self.queue
        exe = hipline.Executable(self.files)

        def add(queue, args, wait, signal):
            out = queue.alloca(4 * N, wait=wait)
            queue.dispatch("vector_add",
                           [BufferArg(args[0], "r"), BufferArg(args[1], "r"),
                            BufferArg(out, "w"), Scalar.u32(N)],
                           grid=(N // 256,), block=(256,), wait=out.ready,
                           signal=signal, executable=exe)
            return out

        fn = hipline.Function("test.vector_add", add, args=("r", "r"),
                              results=1)
        # Nothing runs before the gate opens: every operation below is
        # submitted first, so only queue order keeps the free after the
        # kernel and the read.
        gate = hipline.Semaphore(0)
        a = _floats(float(i) for i in range(N))
        ba, bb = q.alloca(4 * N), q.alloca(4 * N)
        q.write(ba, a, wait=gate.at(1))
        ready = q.write(bb, a)
        inv = hipline.ProgramInvocation(fn, q, [ba, bb])
        inv.add_wait(ready)
        inv.invoke()
        (result,) = inv.results
        self.assertEqual(self.device.invocation_stats().async_imports, 1)
        c = _floats([0.0] * N)
        read = q.read(result, c, wait=inv.signal_fence)
        freed = q.dealloca(result)
        exe.close()  # The queue holds it until the dispatch completes.
        self.assertFalse(result.is_freed)
        self.assertFalse(read.is_reached())
        gate.signal(1)
        freed.wait(60)
        self.assertTrue(read.is_reached())
        self.assertTrue(result.is_freed)
        for i in range(N):
            self.assertEqual(c[i], 2 * a[i], "c[%d]" % i)
        self.assertEqual(q.memory_stats().use_after_free, 0)
        for buf in (ba, bb):
            q.dealloca(buf)
        for h in (result, ba, bb, inv, fn, ready, read, freed, gate):
            h.close()

class NativeCallTest(unittest.TestCase):
    """Queue.native_call: the caller's function with the native stream, in
    timeline order, with declared bindings."""

    def setUp(self):
        self.backend = os.environ.get("HIPLINE_TEST_BACKEND", "host")
        self.baseline = hipline.live_device_count()
        self.device = hipline.Device(self.backend)
        self.queue = self.device.create_queue()

    def tearDown(self):
        self.queue.wait_idle(60)
        self.queue.close()
        self.device.close()
        gc.collect()
        self.assertEqual(hipline.live_device_count(), self.baseline)

    def test_runs_in_order_with_its_bindings(self):
        """Submitted behind a closed gate, after a fill of its binding and
        before the binding's dealloca: on the host backend it sees the
        filled words (it would not, run early), and the free waits for it
        on both backends."""
        import ctypes
        q = self.queue
        gate = hipline.Semaphore(0)
        buf = q.alloca(64, wait=gate.at(1))
        q.fill(buf, 0x11223344)
        seen = []

        def on_stream(stream, pointers):
            data = None
            if self.backend == "host":  # Host memory, when the stream runs.
                data = ctypes.string_at(pointers[0] + 8, 8)
            seen.append((stream, len(pointers), data))

        ran = q.native_call(on_stream, [BufferArg(buf, "r", 8, 16)])
        freed = q.dealloca(buf)
        self.assertFalse(buf.is_freed)
        if self.backend == "host":
            self.assertEqual(seen, [])
        gate.signal(1)
        freed.wait(60)
        ran.wait(60)
        self.assertTrue(buf.is_freed)
        self.assertEqual(len(seen), 1)
        stream, count, data = seen[0]
        self.assertNotEqual(stream, 0)
        self.assertEqual(count, 1)
        if self.backend == "host":
            self.assertEqual(data, bytes.fromhex("4433221144332211"))
        for h in (buf, gate, ran, freed):
            h.close()

    def test_exception_fails_the_signal(self):
        q = self.queue

        def boom(stream, pointers):
            raise hipline.NotFoundError("nothing here")

        fence = q.native_call(boom)
        with self.assertRaises(hipline.NotFoundError) as cm:
            fence.wait(60)
        self.assertIn("nothing here", str(cm.exception))
        self.assertIn("native_call", str(cm.exception))
        fence.close()
        q.check()  # No binding writes: the queue itself did not fail.

    def test_bad_arguments(self):
        q = self.queue
        with self.assertRaises(TypeError):
            q.native_call(5)
        with self.assertRaises(TypeError):
            q.native_call(lambda s, p: None, [object()])
        with self.assertRaises(TypeError):
            q.native_call(lambda s, p: None, [BufferArg(None)])
        buf = q.alloca(64)
        with self.assertRaises(hipline.OutOfRangeError):
            q.native_call(lambda s, p: None, [BufferArg(buf, "r", 32, 64)])
        q.dealloca(buf).wait(60)
        buf.close()
        q.check()


if __name__ == "__main__":
    unittest.main()
