# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""asyncio: await fence / invocation / queue.idle() without blocking the loop
and without a thread per wait."""

import array
import asyncio
import threading
import time
import unittest

import hipline
from hipline import StatusCode

# Bounds every await in these tests so a bug fails instead of hanging.
LIMIT = 60.0


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, LIMIT))


def drained(timeout=LIMIT):
    end = time.monotonic() + timeout
    while hipline.pending_callbacks() and time.monotonic() < end:
        time.sleep(0.005)
    return hipline.pending_callbacks()


class AsyncTest(unittest.TestCase):
    def setUp(self):
        hipline.register_kernel_functions()
        self.dev = hipline.Device("host")
        self.q = self.dev.create_queue()

    def tearDown(self):
        self.q.wait_idle(timeout=LIMIT)
        self.q.close()
        self.dev.close()
        self.assertEqual(drained(), 0)

    def test_await_fence_does_not_block_the_loop(self):
        async def main():
            s = hipline.Semaphore(0)
            fence = s.at(2, device=self.dev)
            ticks = []

            async def ticker():
                # Runs only while the loop is free; signals from the loop.
                for i in range(5):
                    ticks.append(i)
                    await asyncio.sleep(0)
                s.signal(1)
                await asyncio.sleep(0)
                ticks.append("signalled 1")
                s.signal(2)

            t = asyncio.create_task(ticker())
            await fence
            await t
            self.assertEqual(ticks[:6], [0, 1, 2, 3, 4, "signalled 1"])
            self.assertEqual(s.value, 2)
            s.close()

        run(main())

    def test_await_fence_without_device_uses_a_notifier(self):
        async def main():
            with hipline.Semaphore(0) as s:
                f = s.at(1)  # No device: the module's notifier delivers.
                asyncio.get_running_loop().call_later(0.01, s.signal, 1)
                await f

        run(main())

    def test_await_failed_fence_raises_its_status(self):
        async def main():
            s = hipline.Semaphore(0)
            done = self.q.barrier(wait=s.at(1))
            asyncio.get_running_loop().call_soon(
                s.fail, StatusCode.UNAVAILABLE, "replica went away")
            with self.assertRaises(hipline.UnavailableError) as cm:
                await done
            self.assertEqual(cm.exception.code, StatusCode.UNAVAILABLE)
            self.assertIn("replica went away", cm.exception.message)
            s.close()

        run(main())

    def test_many_awaits_no_thread_per_wait(self):
        async def main():
            threads_before = threading.active_count()
            s = hipline.Semaphore(0)
            fences = [s.at(i + 1, device=self.dev) for i in range(500)]
            tasks = [asyncio.ensure_future(self._await(f)) for f in fences]
            await asyncio.sleep(0)
            self.assertEqual(hipline.pending_callbacks(), 500)
            self.assertEqual(threading.active_count(), threads_before)
            for i in range(500):
                s.signal(i + 1)
            await asyncio.gather(*tasks)
            self.assertEqual(threading.active_count(), threads_before)
            s.close()

        run(main())

    @staticmethod
    async def _await(f):
        await f

    def test_cancelled_await_is_harmless(self):
        async def main():
            s = hipline.Semaphore(0)
            task = asyncio.ensure_future(self._await(s.at(1, self.dev)))
            await asyncio.sleep(0)
            task.cancel()
            with self.assertRaises(asyncio.CancelledError):
                await task
            s.signal(1)  # The callback still fires; nobody is told.
            await s.at(1, self.dev)
            s.close()

        run(main())

    def test_await_queue_ops_invocation_and_idle(self):
        async def main():
            q = self.q
            x = q.alloca(64)
            await q.write(x, array.array("f", [1.0] * 16), wait=x.ready)
            clone = hipline.Function.lookup("hipline.clone")
            inv = hipline.ProgramInvocation(clone, q, [x])
            (y,) = await inv  # Invokes, awaits, takes the results.
            self.assertEqual(inv.results, [y])
            gate = hipline.Semaphore(0)
            q.barrier(wait=gate.at(1))  # Nothing completes before the gate.
            q.fill(y, 0x3F800000)  # 1.0f
            idle = q.idle()
            self.assertFalse(idle.is_reached())
            asyncio.get_running_loop().call_soon(gate.signal, 1)
            await idle
            gate.close()
            self.assertTrue(idle.is_reached())
            data = await q.read_bytes(y)
            self.assertEqual(list(array.array("f", data)), [1.0] * 16)
            await q.dealloca(x)
            self.assertTrue(x.is_freed)
            for h in (x, y, inv, clone):
                h.close()

        run(main())

    def test_await_failed_invocation(self):
        async def main():
            def boom(queue, args, wait, signal):
                raise hipline.AbortedError(StatusCode.ABORTED, "boom")

            fn = hipline.Function("test.async.boom", boom)
            with self.assertRaises(hipline.AbortedError):
                await hipline.ProgramInvocation(fn, self.q)
            fn.close()

        run(main())

    def test_concurrent_requests_chain(self):
        # Many tasks each run a chain of invocations and await each step.
        async def request(seed):
            q = self.q
            x = q.alloca(16)
            await q.write(x, array.array("f", [float(seed)] * 4))
            with hipline.Function.lookup("hipline.axpy2") as axpy2, \
                    hipline.Function.lookup("hipline.clone") as clone:
                for _ in range(3):
                    (y,) = await hipline.ProgramInvocation(clone, q, [x])
                    await hipline.ProgramInvocation(axpy2, q, [x, y])
                    x.close()
                    x = y
            out = array.array("f", await q.read_bytes(x))
            x.close()
            return out[0]

        async def main():
            got = await asyncio.gather(*(request(i) for i in range(32)))
            self.assertEqual(got, [float(i) * 27 for i in range(32)])

        run(main())


if __name__ == "__main__":
    unittest.main()
