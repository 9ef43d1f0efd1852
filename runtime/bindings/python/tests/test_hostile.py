# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Hostile use of the binding: lifecycle races, closed handles, fences
failed by the user, integers that do not fit C, fork, exit with stuck work,
Python functions that never signal. None of it may corrupt memory (the
suite runs under ASan and TSan too), hang, or fail without naming what was
wrong."""

import gc
import os
import subprocess
import sys
import threading
import unittest

import hipline
from hipline import StatusCode

N = 1 << 20


def run_child(code, timeout=300, env=None):
    return subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})))


class KeepAliveTest(unittest.TestCase):
    """Host memory and callbacks live until the operation itself ends."""

    def setUp(self):
        self.dev = hipline.Device("host")
        self.q = self.dev.create_queue()

    def tearDown(self):
        self.q.wait_idle(timeout=120)
        self.q.close()
        self.dev.close()

    def _busy_buffer(self):
        q = self.q
        b = q.alloca(N)
        q.fill(b, 0x41414141, wait=b.ready)
        q.wait_idle()
        q.spin(100_000_000)  # The next operation stays queued a while.
        return b

    def _churn(self):
        gc.collect()
        return [bytearray(N) for _ in range(4)]  # Reuses freed memory.

    def test_read_outlives_a_signal_fence_the_user_fails(self):
        b = self._busy_buffer()
        s = hipline.Semaphore(0)
        target = bytearray(N)
        probe = memoryview(target)  # Sees the bytes after the read.
        self.q.read(b, target, signal=s.at(1, device=self.dev))
        del target
        s.fail(StatusCode.CANCELLED, "cancel")
        junk = self._churn()
        self.q.wait_idle()
        self.assertEqual(bytes(probe[:4]), b"AAAA")
        del junk
        b.close()

    def test_read_outlives_a_signal_fence_already_reached(self):
        b = self._busy_buffer()
        s = hipline.Semaphore(5)  # Already past the value signalled.
        self.q.read(b, bytearray(N), signal=s.at(1, device=self.dev))
        junk = self._churn()
        self.q.wait_idle()
        del junk
        b.close()

    def test_write_outlives_a_failed_signal_fence(self):
        b = self._busy_buffer()
        s = hipline.Semaphore(0)
        self.q.write(b, bytearray(b"\x07" * N), signal=s.at(1))
        s.fail(StatusCode.CANCELLED, "cancel")
        junk = self._churn()
        self.q.wait_idle()
        out = bytearray(N)
        self.q.read(b, out).wait(60)
        self.assertEqual(out[:4], b"\x07" * 4)
        del junk
        b.close()

    def test_host_call_outlives_a_failed_signal_fence(self):
        b = self._busy_buffer()
        s = hipline.Semaphore(0)
        ran = []
        self.q.host_call(lambda: ran.append(1), signal=s.at(1))
        s.fail(StatusCode.CANCELLED, "cancel")
        self._churn()
        self.q.wait_idle()
        self.assertEqual(ran, [1])
        b.close()

    def test_keep_alives_survive_device_close(self):
        b = self._busy_buffer()
        ran = []
        self.dev.close()  # The queue keeps its device; so do its keep-alives.
        self.q.read(b, bytearray(N))
        self.q.write(b, bytearray(N))
        self.q.host_call(lambda: ran.append(1))
        junk = self._churn()
        self.q.wait_idle()
        self.assertEqual(ran, [1])
        del junk
        b.close()

    def test_no_callback_left_behind_by_refused_operations(self):
        before = hipline.pending_callbacks()
        b = self.q.alloca(64)
        with self.assertRaises(hipline.Error):
            self.q.read(b, bytearray(128))  # Past the end: refused.
        with self.assertRaises(hipline.Error):
            self.q.host_call(lambda: None, wait=hipline.Semaphore(0).at(1),
                             signal=self.q.timeline.at(10**6))
        self.q.wait_idle()
        self.q.dealloca(b).wait(60)
        b.close()
        gc.collect()
        self.assertEqual(hipline.pending_callbacks(), before)


class CloseRaceTest(unittest.TestCase):
    """close() on one thread while others use the handle: an error, never a
    crash."""

    def _race(self, make, use, rounds=20, threads=4):
        for _ in range(rounds):
            h = make()
            errors, go = [], threading.Event()

            def worker():
                go.wait()
                for _ in range(200):
                    try:
                        use(h)
                    except hipline.FailedPreconditionError as e:
                        self.assertIn("closed", e.message)
                        return
                    except BaseException as e:  # noqa: BLE001
                        errors.append(e)
                        return

            ts = [threading.Thread(target=worker) for _ in range(threads)]
            for t in ts:
                t.start()
            go.set()
            h.close()
            for t in ts:
                t.join()
            self.assertEqual(errors, [])

    def test_queue(self):
        with hipline.Device("host") as dev:
            self._race(dev.create_queue, lambda q: q.barrier().wait(5))

    def test_device(self):
        self._race(lambda: hipline.Device("host"),
                   lambda d: (d.properties, d.memory_stats(),
                              d.create_queue().close()))

    def test_semaphore(self):
        def use(s):
            s.signal(s.value + 1)
            s.at(1).close()
        self._race(lambda: hipline.Semaphore(0), use)

    def test_fence(self):
        sem = hipline.Semaphore(1)
        self._race(lambda: hipline.Semaphore(0).at(0),
                   lambda f: (f.insert(sem, 1), f.is_reached(), f.entries,
                              len(f)))
        sem.close()

    def test_buffer(self):
        with hipline.Device("host") as dev, dev.create_queue() as q:
            def make():
                b = q.alloca(4096)
                b.ready.wait(60)
                return b

            def use(b):
                q.fill(b, 1).wait(60)
                b.subview(0, 64).close()
                return len(b), b.root_id
            self._race(make, use)
            q.wait_idle(60)

    def test_function_and_invocation(self):
        with hipline.Device("host") as dev, dev.create_queue() as q:
            fn = hipline.Function(
                "test.race", lambda queue, a, w, s: queue.barrier(w, s) and None)
            self._race(lambda: hipline.Function(
                "test.race2", lambda queue, a, w, s:
                queue.barrier(w, s) and None),
                lambda f: (f.name, hipline.ProgramInvocation(f, q).close()))

            def use(inv):
                inv.assume_no_alias = True
                return inv.effective_assume_no_alias, inv.result_count
            self._race(lambda: hipline.ProgramInvocation(fn, q), use)
            fn.close()
            q.wait_idle(60)

    def test_every_closed_handle_fails_precondition(self):
        dev = hipline.Device("host")
        q = dev.create_queue()
        b = q.alloca(64)
        s = hipline.Semaphore(0)
        f = s.at(1)
        fn = hipline.Function("test.closed", lambda *a: None)
        inv = hipline.ProgramInvocation(fn, q)
        q.wait_idle()
        for h in (inv, fn, f, s, b, q, dev):
            h.close()
        uses = [lambda: dev.properties, lambda: dev.create_queue(),
                lambda: q.alloca(8), lambda: q.barrier(), lambda: len(b),
                lambda: b.subview(0, 8), lambda: s.value,
                lambda: s.signal(2), lambda: f.is_reached(),
                lambda: f.insert(hipline.Semaphore(0), 1),
                lambda: fn.name, lambda: inv.invoke()]
        for use in uses:
            with self.assertRaises(hipline.FailedPreconditionError):
                use()
        self.assertIn("closed", repr(q))


class ArgumentTest(unittest.TestCase):
    """Integers never wrap into C widths; types are checked; names say
    which argument was wrong."""

    def setUp(self):
        self.dev = hipline.Device("host")
        self.q = self.dev.create_queue()
        self.b = self.q.alloca(256)

    def tearDown(self):
        self.q.wait_idle(60)
        self.b.close()
        self.q.close()
        self.dev.close()

    def assertOutOfRange(self, name, fn, *args, **kw):
        with self.assertRaises(hipline.OutOfRangeError) as cm:
            fn(*args, **kw)
        self.assertIsInstance(cm.exception, ValueError)
        self.assertIn(name, cm.exception.message)

    def assertType(self, name, fn, *args, **kw):
        with self.assertRaises(TypeError) as cm:
            fn(*args, **kw)
        self.assertIn(name, str(cm.exception))

    def test_integers_out_of_range(self):
        q, b = self.q, self.b
        self.assertOutOfRange("size", q.alloca, 2**64 + 64)
        self.assertOutOfRange("size", q.alloca, -1)
        self.assertOutOfRange("offset", q.fill, b, 1, offset=2**64)
        self.assertOutOfRange("length", q.fill, b, 1, length=2**64 + 4)
        self.assertOutOfRange("pattern", q.fill, b, 2**32)
        self.assertOutOfRange("ordinal", hipline.Device, "host",
                              ordinal=2**32)
        self.assertOutOfRange("ordinal", hipline.Device, "host", ordinal=-1)
        self.assertOutOfRange("initial_value", hipline.Semaphore, -1)
        self.assertOutOfRange("pool_release_threshold", hipline.Device,
                              "host", pool_release_threshold=-1)
        self.assertOutOfRange("pool_reuse_flags", hipline.Device, "host",
                              pool_reuse_flags=2**32)
        self.assertOutOfRange("source_offset", q.copy, b, b,
                              source_offset=2**64)
        self.assertOutOfRange("offset", q.read, b, bytearray(4),
                              offset=2**64)
        self.assertOutOfRange("offset", q.write, b, b"abcd", offset=-4)
        self.assertOutOfRange("cycles", q.spin, 2**64)
        self.assertOutOfRange("seed", q.fill_pattern, b, 2**32)
        self.assertOutOfRange("offset", b.subview, 2**64, 4)
        self.assertOutOfRange("min_bytes_to_keep", self.dev.trim, -1)
        self.assertOutOfRange("timeout", q.wait_idle, -1)
        self.assertOutOfRange("timeout", q.wait_idle, float("nan"))
        self.assertOutOfRange("value", hipline.Semaphore(0).signal, 2**64)
        self.assertOutOfRange("value", hipline.Scalar.u32, 2**32)
        self.assertOutOfRange("grid[0]", q.dispatch, "hipline_fill_u32", [],
                              grid=(2**32,))

    def test_wrong_types(self):
        q, b = self.q, self.b
        self.assertType("size", q.alloca, "64")
        self.assertType("size", q.alloca, 64.0)
        self.assertType("buffer", q.fill, "not a buffer", 1)
        self.assertType("wait", q.barrier, wait=5)
        self.assertType("signal", q.barrier, signal=hipline.Semaphore(0))
        self.assertType("fn", q.host_call, 5)
        self.assertType("into", q.read, b, 12)
        self.assertType("semaphore", hipline.Fence().insert, "s", 1)
        self.assertType("timeout", q.wait_idle, "1")
        self.assertType("ordinal", hipline.Device, "host", ordinal="0")
        self.assertType("checked", hipline.Device, "host", checked="no")
        self.assertType("name", hipline.Function, 5, lambda *a: None)
        self.assertType("fn", hipline.Function, "x", None)
        self.assertType("args[0]", q.dispatch, "hipline_fill_u32", [5])
        self.assertType("kernel", q.dispatch, 5, [])
        self.assertType("queue", hipline.ProgramInvocation,
                        hipline.Function("t.x", lambda *a: None), "q")

    def test_names_with_nul_are_refused(self):
        with self.assertRaises(hipline.InvalidArgumentError) as cm:
            hipline.Function("a\0b", lambda *a: None)
        self.assertIn("name", cm.exception.message)
        with self.assertRaises(hipline.InvalidArgumentError):
            hipline.Function.lookup("hipline.clone\0x")
        with self.assertRaises(hipline.InvalidArgumentError):
            self.q.dispatch("hipline_fill_u32\0", [])

    def test_infinite_timeout_means_forever(self):
        s = hipline.Semaphore(0)
        threading.Timer(0.05, s.signal, (1,)).start()
        s.wait(1, timeout=float("inf"))
        self.q.barrier().wait(timeout=float("inf"))
        self.q.wait_idle(timeout=1e300)
        s.close()


class ForkTest(unittest.TestCase):
    CHILD = r"""
import os, hipline
dev = hipline.Device("host"); q = dev.create_queue()
b = q.alloca(64); b.ready.wait(60)
pid = os.fork()
if pid == 0:
    codes = []
    for use in (lambda: q.barrier(), lambda: q.fill(b, 1), lambda: len(b),
                lambda: hipline.Device("host"), lambda: hipline.Semaphore(0)):
        try:
            use(); codes.append("ran")
        except hipline.FailedPreconditionError as e:
            codes.append("fork" if "fork" in e.message else e.message)
    print("child", codes, flush=True)
    os._exit(0)
_, status = os.waitpid(pid, 0)
q.fill(b, 2).wait(60)
print("parent ok", os.waitstatus_to_exitcode(status), flush=True)
"""

    def test_use_after_fork_is_refused(self):
        p = run_child(self.CHILD)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("child ['fork', 'fork', 'fork', 'fork', 'fork']",
                      p.stdout)
        self.assertIn("parent ok 0", p.stdout)


class ExitStuckTest(unittest.TestCase):
    CHILD = r"""
import hipline
dev = hipline.Device("host"); q = dev.create_queue()
b = q.alloca(1 << 16)
never = hipline.Semaphore(0)
q.read(b, bytearray(1 << 16), wait=never.at(1))  # Parked for good.
q2 = dev.create_queue()
q2.barrier(wait=never.at(2))
print("pending", hipline.pending_callbacks(), flush=True)
"""

    def test_exit_does_not_wait_for_work_that_cannot_run(self):
        p = run_child(self.CHILD)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("could no longer be signalled", p.stderr)
        self.assertIn("CANCELLED", p.stderr)


class SilentFunctionTest(unittest.TestCase):
    def test_function_that_never_signals_fails_the_invocation(self):
        import asyncio

        async def main():
            with hipline.Device("host") as dev, dev.create_queue() as q:
                fn = hipline.Function("test.silent", lambda *a: None)
                inv = hipline.ProgramInvocation(fn, q)
                with self.assertRaises(hipline.FailedPreconditionError) as cm:
                    await inv
                self.assertIn("signal fence", cm.exception.message)
                # Signalling it through a queue, or directly, is fine.
                def direct(queue, args, wait, signal):
                    for sem, v in signal.entries:
                        sem.signal(v)
                        sem.close()
                for f in (hipline.Function("test.direct", direct),
                          hipline.Function("test.joined",
                                           lambda queue, a, w, s: queue.barrier(
                                               w, hipline.Fence().join(s))
                                           and None)):
                    await hipline.ProgramInvocation(f, q)
                    f.close()
                inv.close()
                fn.close()
                q.wait_idle(60)
        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
