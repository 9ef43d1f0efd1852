# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The synchronous binding: every handle type, its errors, and release."""

import array
import gc
import time
import unittest

import hipline
from hipline import StatusCode


def settle_devices(baseline, timeout=60.0):
    """Waits (bounded, generous) for deferred device teardown."""
    end = time.monotonic() + timeout
    while hipline.live_device_count() > baseline and time.monotonic() < end:
        time.sleep(0.01)
    return hipline.live_device_count()


class DeviceTest(unittest.TestCase):
    def test_backend_and_properties(self):
        info = hipline.backend_query("host")
        self.assertIsInstance(info, hipline.BackendInfo)
        self.assertTrue(info.available)
        with hipline.Device("host") as dev:
            p = dev.properties
            self.assertIsInstance(p, hipline.DeviceProperties)
            self.assertEqual(p.backend, "host")
            self.assertEqual(p.target, "host")
            self.assertGreater(p.memory_bytes, 0)
            self.assertEqual(dev.fallback_mode, "ordered")  # The default.
            self.assertIsInstance(dev.pool_attributes, hipline.PoolAttributes)
            self.assertIsInstance(dev.memory_stats(), hipline.MemoryStats)
            self.assertIsInstance(dev.invocation_stats(),
                                  hipline.InvocationStats)
            dev.trim(0)
            dev.wait_idle(timeout=30)

    def test_reset_peak_memory_stats(self):
        with hipline.Device("host") as dev, dev.create_queue() as q:
            a, b = q.alloca(4096), q.alloca(1024)
            q.wait_idle(timeout=30)
            q.dealloca(a).wait(timeout=30)
            deadline = time.monotonic() + 30
            while (dev.memory_stats().bytes_in_use != 1024 and
                   time.monotonic() < deadline):
                time.sleep(0.001)
            self.assertEqual(dev.memory_stats().bytes_in_use_peak, 5120)
            dev.reset_peak_memory_stats()
            self.assertEqual(dev.memory_stats().bytes_in_use_peak, 1024)
            self.assertEqual(q.memory_stats().bytes_in_use_peak, 1024)
            q.dealloca(b).wait(timeout=30)
            a.close()
            b.close()

    def test_fallback_option(self):
        with hipline.Device("host", fallback="device-sync") as dev:
            self.assertEqual(dev.fallback_mode, "device-sync")
        with self.assertRaises(hipline.InvalidArgumentError) as cm:
            hipline.Device("host", fallback="sometimes")
        self.assertEqual(cm.exception.code, StatusCode.INVALID_ARGUMENT)
        self.assertIn("sometimes", cm.exception.message)

    def test_bad_backend_and_ordinal(self):
        with self.assertRaises(hipline.InvalidArgumentError):
            hipline.Device("cuda")
        with self.assertRaises(hipline.Error) as cm:
            hipline.Device("host", ordinal=1000)
        self.assertNotEqual(cm.exception.code, StatusCode.OK)
        self.assertTrue(cm.exception.message)

    def test_kernels_and_pattern(self):
        names = hipline.kernel_names()
        for k in ("fill_pattern", "verify_pattern", "copy", "spin", "axpy"):
            self.assertIn(k, names)
        self.assertEqual(hipline.pattern_value(7, 3),
                         hipline.pattern_value(7, 3))
        self.assertNotEqual(hipline.pattern_value(7, 3),
                            hipline.pattern_value(8, 3))


class SemaphoreFenceTest(unittest.TestCase):
    def test_signal_query_wait(self):
        with hipline.Semaphore(3) as s:
            self.assertEqual(s.value, 3)
            s.signal(5)
            self.assertEqual(s.value, 5)
            s.wait(5, timeout=0)
            with self.assertRaises(hipline.OutOfRangeError) as cm:
                s.signal(5)
            self.assertEqual(cm.exception.code, StatusCode.OUT_OF_RANGE)
            with self.assertRaises(hipline.DeadlineExceededError):
                s.wait(6, timeout=0.01)

    def test_failure_reaches_every_waiter(self):
        with hipline.Semaphore(0) as s:
            s.fail(StatusCode.DATA_LOSS, "disk on fire")
            for op in (lambda: s.value, lambda: s.wait(1, timeout=1),
                       lambda: s.signal(2)):
                with self.assertRaises(hipline.DataLossError) as cm:
                    op()
                self.assertIn("disk on fire", cm.exception.message)
            with self.assertRaises(hipline.InvalidArgumentError):
                s.fail(StatusCode.OK)

    def test_fence(self):
        a, b = hipline.Semaphore(0), hipline.Semaphore(0)
        f = hipline.Fence([(a, 1)])
        f.insert(b, 2).insert(b, 1)  # The larger value is kept.
        self.assertEqual(len(f), 2)
        self.assertEqual(sorted(v for _, v in f.entries), [1, 2])
        self.assertFalse(f.is_reached())
        with self.assertRaises(hipline.DeadlineExceededError):
            f.wait(timeout=0.01)
        a.signal(1)
        b.signal(2)
        self.assertTrue(f.is_reached())
        f.wait(timeout=0)
        g = hipline.Fence().join(f)
        self.assertEqual(len(g), 2)
        g.clear()
        self.assertEqual(len(g), 0)
        for h in (a, b, f, g):
            h.close()


class BufferTest(unittest.TestCase):
    def setUp(self):
        self.dev = hipline.Device("host")
        self.q = self.dev.create_queue()

    def tearDown(self):
        self.q.wait_idle(timeout=60)
        self.q.close()
        self.dev.close()

    def test_alloca_fill_copy_read_write(self):
        q = self.q
        a = q.alloca(64)
        self.assertEqual((len(a), a.offset, a.origin), (64, 0, "async"))
        q.fill(a, 0xAABBCCDD, wait=a.ready)
        b = q.alloca(64)
        q.copy(a, b, wait=b.ready)
        out = bytearray(64)
        q.read(b, out).wait(timeout=60)
        self.assertEqual(bytes(out), bytes.fromhex("ddccbbaa") * 16)
        # Writes from several buffer-protocol objects.
        for src in (b"\x01" * 16, bytearray(b"\x02" * 16),
                    memoryview(b"\x03" * 32)[8:24],
                    array.array("I", [0x04040404] * 4)):
            q.write(b, src, offset=16).wait(timeout=60)
            view = memoryview(bytearray(16))
            q.read(b, view, offset=16).wait(timeout=60)
            self.assertEqual(bytes(view), bytes(memoryview(src).cast("B")))
        sub = b.subview(16, 16)
        self.assertEqual((len(sub), sub.offset, sub.root_id),
                         (16, 16, b.root_id))
        self.assertNotEqual(a.root_id, b.root_id)
        q.dealloca(a).wait(timeout=60)
        self.assertTrue(a.is_freed)
        with self.assertRaises(hipline.FailedPreconditionError):
            q.dealloca(a)
        for h in (a, b, sub):
            h.close()

    def test_buffer_errors(self):
        q = self.q
        with self.assertRaises(hipline.InvalidArgumentError):
            q.alloca(0)
        with self.assertRaises(hipline.OutOfRangeError):
            q.alloca(1 << 60)
        a = q.alloca(16)
        with self.assertRaises(hipline.OutOfRangeError):
            q.fill(a, 0, offset=0, length=32)
        with self.assertRaises(hipline.OutOfRangeError):
            a.subview(8, 16)
        with self.assertRaises(hipline.InvalidArgumentError):
            q.read(a, b"read-only target")
        with self.assertRaises(hipline.OutOfRangeError):
            q.read(a, bytearray(32))
        a.register_global()
        self.assertEqual(a.origin, "persistent")
        with self.assertRaises(hipline.AlreadyExistsError):
            a.register_global()
        a.unregister_global()
        with self.assertRaises(hipline.NotFoundError):
            a.unregister_global()
        a.close()

    def test_dispatch_and_patterns(self):
        q = self.q
        x, y = q.alloca(64), q.alloca(64)
        q.write(x, array.array("f", [1.5] * 16))
        q.write(y, array.array("f", [1.0] * 16))
        q.dispatch("axpy", [hipline.Scalar.f32(2.0),
                            hipline.BufferArg(x, "r"),
                            hipline.BufferArg(y, "rw"),
                            hipline.Scalar.u64(16)]).wait(timeout=60)
        out = array.array("f", bytes(64))
        q.read(y, out).wait(timeout=60)
        self.assertEqual(list(out), [4.0] * 16)
        with self.assertRaises(hipline.NotFoundError):
            q.dispatch("no_such_kernel", [])
        with self.assertRaises(hipline.InvalidArgumentError):
            q.dispatch("axpy", [hipline.Scalar.f32(1.0)])
        with self.assertRaises(TypeError):  # Names args[0].
            q.dispatch("axpy", [1, 2, 3, 4])
        counter = q.alloca(4)
        q.fill(counter, 0)
        q.fill_pattern(x, 99)
        q.verify_pattern(x, 99, counter).wait(timeout=60)
        c = array.array("I", [7])
        q.read(counter, c).wait(timeout=60)
        self.assertEqual(c[0], 0)
        q.verify_pattern(x, 100, counter).wait(timeout=60)
        q.read(counter, c).wait(timeout=60)
        self.assertEqual(c[0], 16)
        q.spin(1000).wait(timeout=60)
        for h in (x, y, counter):
            h.close()

    def test_queue_stats_barrier_host_call(self):
        q = self.q
        s = hipline.Semaphore(0)
        ran = []
        done = q.host_call(lambda: ran.append(1), wait=s.at(1))
        self.assertFalse(done.is_reached())
        s.signal(1)
        done.wait(timeout=60)
        self.assertEqual(ran, [1])
        q.barrier().wait(timeout=60)
        st = q.stats()
        self.assertIsInstance(st, hipline.QueueStats)
        self.assertGreaterEqual(st.submissions, 2)
        self.assertGreaterEqual(st.parked, 1)
        self.assertEqual(q.timeline.value, st.submitted_value)
        self.assertIsInstance(q.memory_stats(), hipline.MemoryStats)
        q.check()
        s.close()

    def test_failed_wait_fails_the_signal(self):
        q = self.q
        s = hipline.Semaphore(0)
        done = q.barrier(wait=s.at(1))
        s.fail(StatusCode.CANCELLED, "upstream gave up")
        with self.assertRaises(hipline.CancelledError) as cm:
            done.wait(timeout=60)
        self.assertIn("upstream gave up", cm.exception.message)
        s.close()


class FunctionTest(unittest.TestCase):
    def setUp(self):
        hipline.register_kernel_functions()
        self.dev = hipline.Device("host")
        self.q = self.dev.create_queue()

    def tearDown(self):
        self.q.wait_idle(timeout=60)
        self.q.close()
        self.dev.close()

    def test_builtin_clone(self):
        q = self.q
        x = q.alloca(32)
        q.fill(x, 0x11223344)
        with hipline.Function.lookup("hipline.clone") as clone:
            self.assertEqual(clone.name, "hipline.clone")
            with hipline.ProgramInvocation(clone, q, [x]) as inv:
                inv.invoke()
                self.assertEqual(inv.result_count, 1)
                (y,) = inv.results
                inv.signal_fence.wait(timeout=60)
                with self.assertRaises(hipline.FailedPreconditionError):
                    inv.invoke()
                with self.assertRaises(hipline.FailedPreconditionError):
                    inv.add_arg(x)
        out = bytearray(32)
        q.read(y, out).wait(timeout=60)
        self.assertEqual(bytes(out), bytes.fromhex("44332211") * 8)
        self.assertNotEqual(x.root_id, y.root_id)
        with self.assertRaises(hipline.NotFoundError) as cm:
            hipline.Function.lookup("no.such.function")
        self.assertIn("no.such.function", cm.exception.message)
        x.close()
        y.close()

    def test_python_function(self):
        q, calls = self.q, []

        def double(queue, args, wait, signal):
            (src,) = args
            calls.append(len(src))
            out = queue.alloca(len(src), wait=wait)
            queue.copy(src, out, wait=out.ready)
            queue.dispatch("axpy", [hipline.Scalar.f32(1.0),
                                    hipline.BufferArg(src, "r"),
                                    hipline.BufferArg(out, "rw"),
                                    hipline.Scalar.u64(len(src) // 4)],
                           signal=signal)
            return out

        fn = hipline.Function("test.double", double, args=("r",), results=1)
        self.assertEqual(fn.name, "test.double")
        x = q.alloca(16)
        q.write(x, array.array("f", [2.5] * 4))
        inv = hipline.ProgramInvocation(fn, q, [x])
        inv.invoke()
        (y,) = inv.results
        inv.signal_fence.wait(timeout=60)
        out = array.array("f", bytes(16))
        q.read(y, out).wait(timeout=60)
        self.assertEqual(list(out), [5.0] * 4)
        self.assertEqual(calls, [16])
        # Registered functions are found by name and stay callable.
        fn.register()
        with self.assertRaises(hipline.AlreadyExistsError):
            fn.register()
        with hipline.Function.lookup("test.double") as again:
            self.assertEqual(again.name, "test.double")
        hipline.Function.unregister("test.double")
        with self.assertRaises(hipline.NotFoundError):
            hipline.Function.unregister("test.double")
        for h in (inv, x, y, fn):
            h.close()

    def test_python_function_errors(self):
        q = self.q

        def raises_hipline(queue, args, wait, signal):
            raise hipline.ResourceExhaustedError("no room at the inn")

        def raises_python(queue, args, wait, signal):
            return 1 / 0

        def wrong_count(queue, args, wait, signal):
            return []

        x = q.alloca(16)
        cases = [(raises_hipline, hipline.ResourceExhaustedError,
                  "no room at the inn"),
                 (raises_python, hipline.InternalError, "ZeroDivisionError"),
                 (wrong_count, hipline.InvalidArgumentError, "1")]
        for fn_py, exc, text in cases:
            with self.subTest(fn=fn_py.__name__):
                fn = hipline.Function("test." + fn_py.__name__, fn_py,
                                      args=("r",), results=1)
                inv = hipline.ProgramInvocation(fn, q, [x])
                with self.assertRaises(exc) as cm:
                    inv.invoke()
                self.assertIn(text, cm.exception.message)
                self.assertIn(fn_py.__name__, cm.exception.message)
                inv.close()
                fn.close()
        x.close()

    def test_import_policy_and_stats(self):
        q, keep = self.q, []

        def cached(queue, args, wait, signal):
            out = queue.alloca(16, wait=wait)
            queue.fill(out, 1, wait=out.ready, signal=signal)
            keep.append(out)  # Not unique: the function keeps a reference.
            return out

        fn = hipline.Function("test.cached", cached, args=(), results=1)
        before = self.dev.invocation_stats()
        g_before = hipline.invocation_stats_global()
        for flag in (True, False):
            inv = hipline.ProgramInvocation(fn, q, assume_no_alias=flag)
            self.assertIs(inv.assume_no_alias, flag)
            inv.invoke()
            inv.signal_fence.wait(timeout=60)
            for r in inv.results:
                r.close()
            inv.close()
        after = self.dev.invocation_stats()
        self.assertEqual(after.invocations - before.invocations, 2)
        self.assertEqual(after.async_imports - before.async_imports, 1)
        self.assertEqual(after.sync_imports - before.sync_imports, 1)
        self.assertGreaterEqual(
            hipline.invocation_stats_global().invocations - g_before.invocations,
            2)
        # The safety net: a result that is an argument is always sync.
        def echo(queue, args, wait, signal):
            queue.barrier(wait=wait, signal=signal)
            return args[0]

        x = q.alloca(16)
        echo_fn = hipline.Function("test.echo", echo, args=("r",), results=1)
        with hipline.ProgramInvocation(echo_fn, q, [x]) as inv:
            inv.invoke()
            inv.signal_fence.wait(timeout=60)
            for r in inv.results:
                r.close()
        self.assertEqual(self.dev.invocation_stats().alias_detected -
                         after.alias_detected, 1)
        for h in keep + [x, fn, echo_fn]:
            h.close()


class ReleaseTest(unittest.TestCase):
    def test_closed_handles_raise_and_close_is_idempotent(self):
        dev = hipline.Device("host")
        q = dev.create_queue()
        q.close()
        q.close()
        with self.assertRaises(hipline.FailedPreconditionError) as cm:
            q.alloca(16)
        self.assertIn("closed", cm.exception.message)
        self.assertTrue(q.closed)
        with dev:
            pass
        self.assertTrue(dev.closed)
        with self.assertRaises(hipline.FailedPreconditionError):
            dev.create_queue()

    def test_context_managers_release_devices(self):
        base = hipline.live_device_count()
        with hipline.Device("host") as dev, dev.create_queue() as q:
            b = q.alloca(1024)
            q.fill(b, 5)
            q.dealloca(b)
            b.close()
            self.assertEqual(hipline.live_device_count(), base + 1)
        self.assertEqual(settle_devices(base), base)

    def test_gc_releases_once(self):
        base = hipline.live_device_count()

        def make():
            dev = hipline.Device("host")
            q = dev.create_queue()
            b = q.alloca(256)
            q.fill(b, 1)
            s = hipline.Semaphore(0)
            f = s.at(0)
            cycle = [dev, q, b, s, f]
            cycle.append(cycle)  # Only the cycle collector frees this.
            extra = q.timeline  # A second reference to a borrowed handle.
            extra.close()

        make()
        gc.collect()
        self.assertEqual(settle_devices(base), base)
        gc.collect()  # Nothing left to release twice.


if __name__ == "__main__":
    unittest.main()

class MoreBindingsTest(unittest.TestCase):
    def setUp(self):
        self.dev = hipline.Device("host")
        self.q = self.dev.create_queue()

    def tearDown(self):
        self.q.wait_idle(timeout=60)
        self.q.close()
        self.dev.close()

    def test_fences_of_a_buffer_and_escape(self):
        q = self.q
        b = q.alloca(64)
        gate = hipline.Semaphore(0)
        q.fill(b, 1, wait=gate.at(1))
        use, barrier = b.use_fence(), b.mutation_barrier()
        self.assertGreaterEqual(len(use), 1)
        self.assertGreaterEqual(len(barrier), 1)
        self.assertFalse(use.is_reached())  # The fill waits on the gate.
        gate.signal(1)
        use.wait(timeout=60)
        barrier.wait(timeout=60)
        with b.device as d:
            self.assertEqual(d.properties.target, "host")
        self.assertIsNotNone(b.device_pointer())  # Issued: it has an address.
        for h in (b, gate, use, barrier):
            h.close()

    def test_invocation_add_wait(self):
        q = self.q
        gate = hipline.Semaphore(0)
        other = hipline.Semaphore(0)
        fn = hipline.Function("test.wait", lambda queue, a, w, s:
                              queue.barrier(wait=w, signal=s) and None)
        inv = hipline.ProgramInvocation(fn, q)
        inv.add_wait(gate, 1)
        inv.add_wait(other.at(2))
        inv.invoke()
        done = inv.signal_fence
        gate.signal(1)
        other.signal(1)
        with self.assertRaises(hipline.DeadlineExceededError):
            done.wait(timeout=0.01)  # other is at 1 of 2: cannot be reached.
        other.signal(2)
        done.wait(timeout=60)
        for h in (done, inv, fn, gate, other):
            h.close()

    def test_environment_check_in_a_child(self):
        import os
        import subprocess
        import sys
        code = ("import hipline\n"
                "try:\n"
                "    hipline.environment_check(); print('ok')\n"
                "except hipline.InvalidArgumentError as e:\n"
                "    print('bad', e.message)\n")
        env = dict(os.environ, HIPLINE_FALLBACK="sometimes")
        p = subprocess.run([sys.executable, "-c", code], env=env,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("bad", p.stdout)
        self.assertIn("HIPLINE_FALLBACK", p.stdout)
        env.pop("HIPLINE_FALLBACK")
        p = subprocess.run([sys.executable, "-c", code], env=env,
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.stdout.strip(), "ok", p.stderr)


class ExitTest(unittest.TestCase):
    """A process may exit with work and callbacks in flight."""

    CHILD = """
import threading, time, hipline
dev = hipline.Device("host")
q = dev.create_queue()
b = q.alloca(1 << 16)
gate = hipline.Semaphore(0)
q.barrier(wait=gate.at(1))               # Nothing runs before the gate ...
for i in range(50):
    q.write(b, bytes([i]) * (1 << 16))   # ... so these reads and writes are
    q.read(b, bytearray(1 << 16))        # in flight, kept alive by callbacks.
never = hipline.Semaphore(0)
q2 = dev.create_queue()
q2.barrier(wait=never.at(1))             # A wait nobody will ever signal.
print("pending", hipline.pending_callbacks() >= 100, flush=True)
go = threading.Event()
def opener():
    go.wait()
    time.sleep(0.02)
    gate.signal(1)                       # Opens while the process exits.
threading.Thread(target=opener).start()
go.set()
"""

    def test_exit_with_work_in_flight(self):
        import subprocess
        import sys
        p = subprocess.run([sys.executable, "-c", self.CHILD],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("pending True", p.stdout)
