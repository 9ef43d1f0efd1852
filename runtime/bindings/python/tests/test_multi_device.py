# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Several devices from Python: enumeration, peer access, copies between
devices (peer and staged) and frees ordered after another device's use.

The environment says what to expect:
  HIPLINE_TEST_BACKEND  "host" (default) or "hip" (the hip test runtime);
  HL_TEST_DEVICES       how many devices the backend has (at least 2;
                        HIPLINE_HOST_DEVICES / HL_HIP_TEST_RUNTIME_DEVICES);
  HL_TEST_UNREACHABLE   the pairs that cannot reach each other, "0-3,1-3",
                        "all" or "" (HIPLINE_HOST_PEERS /
                        HL_HIP_TEST_RUNTIME_PEERS say the same to the
                        backend).
"""

import gc
import os
import threading
import time
import unittest

import hipline
from hipline import StatusCode

TIMEOUT = 60.0


def settle_devices(baseline, timeout=60.0):
    """Waits (bounded, generous) for deferred device teardown."""
    end = time.monotonic() + timeout
    while hipline.live_device_count() > baseline and time.monotonic() < end:
        time.sleep(0.01)
    return hipline.live_device_count()


def expected_unreachable(count):
    """The set of ordered pairs (a, b), a != b, that cannot reach each
    other according to HL_TEST_UNREACHABLE."""
    spec = os.environ.get("HL_TEST_UNREACHABLE", "").strip()
    pairs = set()
    if spec == "all":
        return {(a, b) for a in range(count) for b in range(count) if a != b}
    for item in filter(None, spec.split(",")):
        a, b = (int(x) for x in item.split("-"))
        pairs |= {(a, b), (b, a)}
    return pairs


def payload(n, seed):
    return bytes((i * 7 + seed) & 0xFF for i in range(n))


class MultiDeviceCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.backend = os.environ.get("HIPLINE_TEST_BACKEND", "host")
        cls.count = int(os.environ.get("HL_TEST_DEVICES", "0"))
        if cls.count < 2:
            raise unittest.SkipTest("HL_TEST_DEVICES is not set to 2 or more "
                                    "(ctest sets it: python.multi_device*)")
        cls.unreachable = expected_unreachable(cls.count)

    def setUp(self):
        gc.collect()
        self.baseline = hipline.live_device_count()
        # Checked mode (use after free counted, freed memory poisoned) is
        # the host backend's.
        self.options = {"checked": True} if self.backend == "host" else {}
        self.devs = hipline.devices(self.backend, **self.options)
        self.queues = [d.create_queue() for d in self.devs]

    def tearDown(self):
        for q in self.queues:
            q.wait_idle(timeout=TIMEOUT)
            q.check()
            q.close()
        for d in self.devs:
            self.assertEqual(d.memory_stats().use_after_free, 0)
            d.close()
        gc.collect()
        self.assertEqual(settle_devices(self.baseline), self.baseline)
        self.assertEqual(hipline.pending_callbacks(), 0)

    def pair(self, reachable):
        """An ordered pair of distinct ordinals that can (or cannot) reach
        each other, or skips."""
        for a in range(self.count):
            for b in range(self.count):
                if a != b and ((a, b) not in self.unreachable) == reachable:
                    return a, b
        self.skipTest("no %s pair here" %
                      ("reachable" if reachable else "unreachable"))

    def filled(self, ordinal, data):
        """A buffer of device |ordinal| holding |data| (written, waited)."""
        q = self.queues[ordinal]
        buf = q.alloca(len(data))
        q.write(buf, data, wait=buf.ready).wait(timeout=TIMEOUT)
        return buf

    def read(self, ordinal, buf):
        out = bytearray(len(buf))
        self.queues[ordinal].read(buf, out).wait(timeout=TIMEOUT)
        return bytes(out)


class EnumerationTest(MultiDeviceCase):
    def test_devices_lists_every_ordinal(self):
        self.assertEqual(hipline.Device.count(self.backend), self.count)
        self.assertEqual(hipline.backend_query(self.backend).device_count,
                         self.count)
        self.assertEqual(len(self.devs), self.count)
        for i, d in enumerate(self.devs):
            self.assertIsInstance(d, hipline.Device)
            self.assertEqual(d.properties.ordinal, i)
            self.assertEqual(d.properties.backend, self.backend)
            self.assertEqual(d.checked, self.backend == "host")
            self.assertIn("ordinal=%d" % i, repr(d))
        # Each is a device of its own: a buffer says which.
        for i, q in enumerate(self.queues):
            with q.alloca(64) as b, b.device as owner:
                self.assertIn("on %s:%d" % (self.backend, i), repr(b))
                self.assertEqual(owner.properties.ordinal, i)
                q.dealloca(b).wait(timeout=TIMEOUT)

    def test_options_are_passed_to_every_device(self):
        opened = hipline.devices(self.backend, fallback="device-sync",
                                 pool_release_threshold=4096)
        try:
            self.assertEqual(len(opened), self.count)
            for d in opened:
                self.assertEqual(d.fallback_mode, "device-sync")
                self.assertEqual(d.pool_attributes.release_threshold, 4096)
        finally:
            for d in opened:
                d.close()

    def test_the_next_ordinal_is_refused(self):
        with self.assertRaises(hipline.Error) as cm:
            hipline.Device(self.backend, ordinal=self.count)
        if self.backend == "host":
            self.assertEqual(cm.exception.code, StatusCode.OUT_OF_RANGE)
            self.assertIn("HIPLINE_HOST_DEVICES", cm.exception.message)

    def test_bad_backend(self):
        with self.assertRaises(hipline.InvalidArgumentError):
            hipline.devices("cuda")
        with self.assertRaises(hipline.InvalidArgumentError):
            hipline.Device.count("cuda")
        with self.assertRaises(hipline.InvalidArgumentError):
            hipline.devices(self.backend, fallback="sometimes")

    def test_options_refused_open_nothing(self):
        before = hipline.live_device_count()
        with self.assertRaises(hipline.OutOfRangeError):
            hipline.devices(self.backend, pool_reuse_flags=2**32)
        self.assertEqual(settle_devices(before), before)


    def test_a_failed_open_closes_the_others(self):
        """devices() opening the last ordinal fails: the ones it opened are
        closed, the error is raised."""
        import hipline.device as device_module
        real = device_module.Device
        last = self.count - 1
        made = []

        class Failing(real):
            def __init__(self, backend, ordinal, *args):
                if ordinal == last:
                    raise hipline.ResourceExhaustedError(
                        StatusCode.RESOURCE_EXHAUSTED, "no more")
                super().__init__(backend, ordinal, *args)
                made.append(self)

        before = hipline.live_device_count()
        device_module.Device = Failing
        try:
            with self.assertRaises(hipline.ResourceExhaustedError):
                hipline.devices(self.backend)
        finally:
            device_module.Device = real
        self.assertEqual(len(made), last)
        self.assertTrue(all(d.closed for d in made))
        del made[:]
        gc.collect()
        self.assertEqual(settle_devices(before), before)

    def test_unavailable_backend(self):
        if self.backend == "hip" or hipline.backend_query("hip").available:
            self.skipTest("hip is available here")
        self.assertEqual(hipline.Device.count("hip"), 0)
        with self.assertRaises(hipline.UnavailableError) as cm:
            hipline.devices("hip")
        self.assertIn("unavailable", cm.exception.message)


class PeerQueryTest(MultiDeviceCase):
    def test_can_access_peer_follows_the_backend(self):
        for a, da in enumerate(self.devs):
            for b, db in enumerate(self.devs):
                want = a == b or (a, b) not in self.unreachable
                self.assertIs(da.can_access_peer(db), want, (a, b))

    def test_enable_peer_access(self):
        for a, da in enumerate(self.devs):
            for b, db in enumerate(self.devs):
                self.assertIs(da.peer_access_enabled(db), a == b, (a, b))
        # A subset first: only its pairs are enabled.
        hipline.enable_peer_access(self.devs[:2])
        for a, da in enumerate(self.devs):
            for b, db in enumerate(self.devs):
                want = a == b or (a < 2 and b < 2 and
                                  (a, b) not in self.unreachable)
                self.assertIs(da.peer_access_enabled(db), want, (a, b))
        # Then the whole group, twice (idempotent), from a generator.
        for _ in range(2):
            hipline.enable_peer_access(d for d in self.devs)
            for a, da in enumerate(self.devs):
                for b, db in enumerate(self.devs):
                    self.assertIs(da.peer_access_enabled(db),
                                  da.can_access_peer(db), (a, b))
        # A device alone, or twice in the list, is fine.
        hipline.enable_peer_access([self.devs[0]])
        hipline.enable_peer_access([self.devs[0], self.devs[0]])

    def test_peer_stats(self):
        s = self.devs[0].peer_stats()
        self.assertIsInstance(s, hipline.PeerStats)
        self.assertEqual(s, hipline.PeerStats(0, 0, 0, 0, 0))
        self.assertIn("staged_copies=0", repr(s))

    def test_bad_input(self):
        d0, d1 = self.devs[0], self.devs[1]
        for bad in ([], (), iter([])):
            with self.assertRaises(hipline.InvalidArgumentError) as cm:
                hipline.enable_peer_access(bad)
            self.assertIn("devices is empty", cm.exception.message)
        for bad in (d0, 5, None):
            with self.assertRaises(TypeError) as cm:
                hipline.enable_peer_access(bad)
            self.assertIn("iterable of Device", str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            hipline.enable_peer_access([d0, "d1"])
        self.assertIn("devices[1] must be a Device", str(cm.exception))
        for call in (d0.can_access_peer, d0.peer_access_enabled):
            with self.assertRaises(TypeError) as cm:
                call("d1")
            self.assertIn("peer must be a Device", str(cm.exception))
            with self.assertRaises(TypeError):
                call(None)
        # A closed device, as the argument or as self.
        other = hipline.Device(self.backend, ordinal=1)
        other.close()
        for call in (lambda: d0.can_access_peer(other),
                     lambda: d0.peer_access_enabled(other),
                     lambda: other.can_access_peer(d0),
                     lambda: other.peer_access_enabled(d0),
                     lambda: other.peer_stats(),
                     lambda: hipline.enable_peer_access([d0, other])):
            with self.assertRaises(hipline.FailedPreconditionError) as cm:
                call()
            self.assertIn("closed", cm.exception.message)
        # Nothing was enabled by the refused calls.
        self.assertFalse(d0.peer_access_enabled(d1))

    def test_other_backend_is_refused(self):
        if self.backend == "host":
            self.skipTest("needs a second backend")
        with hipline.Device("host") as host:
            for call in (lambda: self.devs[0].can_access_peer(host),
                         lambda: host.can_access_peer(self.devs[0]),
                         lambda: hipline.enable_peer_access(
                             [self.devs[0], host])):
                with self.assertRaises(hipline.InvalidArgumentError) as cm:
                    call()
                self.assertIn("different backends", cm.exception.message)
            self.assertFalse(self.devs[0].peer_access_enabled(host))


class CopyTest(MultiDeviceCase):
    def check_copy(self, a, b, enable, kind):
        """Copies a buffer of |a| into one of |b| on b's queue and the
        result back on a's queue; |kind| is what the stats must count."""
        if enable:
            hipline.enable_peer_access([self.devs[a], self.devs[b]])
        data = payload(4096 + 64, a * 16 + b)
        src = self.filled(a, data)
        qb = self.queues[b]
        dst = qb.alloca(len(data))
        before = [d.peer_stats() for d in self.devs]
        qb.copy(src, dst, wait=dst.ready).wait(timeout=TIMEOUT)
        self.assertEqual(self.read(b, dst), data)
        # A part back the other way, on a's queue, at offsets.
        self.queues[a].copy(dst, src, source_offset=64, target_offset=128,
                            length=1024).wait(timeout=TIMEOUT)
        self.assertEqual(self.read(a, src),
                         data[:128] + data[64:64 + 1024] + data[128 + 1024:])
        after = [d.peer_stats() for d in self.devs]
        for i, (s0, s1) in enumerate(zip(before, after)):
            copies, nbytes = ((1, len(data)) if i == b else
                              (1, 1024) if i == a else (0, 0))
            other = "staged" if kind == "peer" else "peer"
            self.assertEqual(getattr(s1, kind + "_copies") -
                             getattr(s0, kind + "_copies"), copies, i)
            self.assertEqual(getattr(s1, kind + "_bytes") -
                             getattr(s0, kind + "_bytes"), nbytes, i)
            self.assertEqual(getattr(s1, other + "_copies"),
                             getattr(s0, other + "_copies"), i)
        for q, buf in ((self.queues[a], src), (qb, dst)):
            q.dealloca(buf).wait(timeout=TIMEOUT)
            buf.close()

    def test_peer_copy(self):
        a, b = self.pair(reachable=True)
        self.check_copy(a, b, enable=True, kind="peer")

    def test_staged_copy_between_unreachable_devices(self):
        a, b = self.pair(reachable=False)
        hipline.enable_peer_access(self.devs)  # Leaves the pair as it is.
        self.assertFalse(self.devs[b].peer_access_enabled(self.devs[a]))
        self.check_copy(a, b, enable=False, kind="staged")

    def test_staged_copy_without_enabling(self):
        a, b = self.pair(reachable=True)
        self.check_copy(a, b, enable=False, kind="staged")

    def test_copy_on_a_third_device(self):
        """A queue of c copies a buffer of a into one of b."""
        if self.count < 3:
            self.skipTest("needs 3 devices")
        hipline.enable_peer_access(self.devs)
        a, b, c = 0, 1, self.count - 1
        data = payload(2048, 5)
        src = self.filled(a, data)
        dst = self.queues[b].alloca(len(data))
        dst.ready.wait(timeout=TIMEOUT)
        self.queues[c].copy(src, dst).wait(timeout=TIMEOUT)
        self.assertEqual(self.read(b, dst), data)
        self.queues[a].dealloca(src).wait(timeout=TIMEOUT)
        self.queues[b].dealloca(dst).wait(timeout=TIMEOUT)
        src.close()
        dst.close()

    def test_cross_device_wait_is_counted(self):
        """b's copy waits for a's fill: a device-side wait on another
        device's signal, counted on b. On the host backend a's stream is
        held by a host call on its worker, so the wait is issued while the
        fill is pending: exactly one. On hip a host call is no stream work
        (the wait could find the fill done and be elided), so a long spin
        holds the stream and the count is only bounded by b's issued waits,
        as multi_device_test does."""
        a, b = self.pair(reachable=True)
        hipline.enable_peer_access([self.devs[a], self.devs[b]])
        qa, qb = self.queues[a], self.queues[b]
        src = qa.alloca(4096)
        dst = qb.alloca(4096)
        dst.ready.wait(timeout=TIMEOUT)
        host = self.backend == "host"
        gate = threading.Event()
        if host:
            qa.host_call(lambda: gate.wait(TIMEOUT), wait=src.ready)
        else:
            qa.spin(100 * 1000 * 1000, wait=src.ready)
        filled = qa.fill(src, 0x5A5A5A5A)
        before = [d.peer_stats().cross_device_waits for d in self.devs]
        issued = qb.stats().waits_issued
        copied = qb.copy(src, dst, wait=filled)
        if host:
            self.assertFalse(copied.is_reached())  # a's stream is held.
        gate.set()
        copied.wait(timeout=TIMEOUT)
        self.assertEqual(self.read(b, dst), b"\x5a" * 4096)
        after = [d.peer_stats().cross_device_waits for d in self.devs]
        crossed = after[b] - before[b]
        if host:
            self.assertEqual(crossed, 1)
        self.assertLessEqual(crossed, qb.stats().waits_issued - issued)
        self.assertEqual(after[a], before[a])  # a waited for nobody.
        qa.dealloca(src).wait(timeout=TIMEOUT)
        qb.dealloca(dst).wait(timeout=TIMEOUT)

    def test_only_copies_and_dispatches_cross_devices(self):
        """On a queue of b with a's buffer: fill, read, write and
        native_call raise at the call, reached or not; a dispatch raises
        until b reaches a, then runs."""
        a, b = self.pair(reachable=True)
        src = self.filled(a, payload(256, 1))
        qb = self.queues[b]
        own = [lambda: qb.fill(src, 0),
               lambda: qb.read(src, bytearray(16)),
               lambda: qb.write(src, b"x" * 16),
               lambda: qb.native_call(lambda s, p: None,
                                      [hipline.BufferArg(src, "r")])]
        for enabled in (False, True):
            if enabled:
                hipline.enable_peer_access([self.devs[a], self.devs[b]])
            for i, op in enumerate(own + [lambda: qb.fill_pattern(src, 3)]):
                if enabled and i == len(own):
                    qb.fill_pattern(src, 3).wait(timeout=TIMEOUT)
                    continue
                with self.assertRaises(hipline.Error, msg=(enabled, i)) as cm:
                    op()
                self.assertIn(cm.exception.code,
                              (StatusCode.INVALID_ARGUMENT,
                               StatusCode.FAILED_PRECONDITION), (enabled, i))
            qb.check()  # Refused up front: the queue is fine.
        counter = self.queues[a].alloca(4)
        self.queues[a].fill(counter, 0, wait=counter.ready)
        self.queues[a].verify_pattern(src, 3, counter)
        self.assertEqual(self.read(a, counter), bytes(4))
        self.queues[a].dealloca(counter)
        self.queues[a].dealloca(src).wait(timeout=TIMEOUT)

    def test_copy_out_of_range_across_devices(self):
        a, b = self.pair(reachable=True)
        hipline.enable_peer_access(self.devs)
        src = self.filled(a, payload(256, 2))
        dst = self.queues[b].alloca(128)
        with self.assertRaises(hipline.Error) as cm:
            self.queues[b].copy(src, dst, wait=dst.ready)
        self.assertIn(cm.exception.code, (StatusCode.OUT_OF_RANGE,
                                          StatusCode.INVALID_ARGUMENT))
        with self.assertRaises(hipline.OutOfRangeError):
            self.queues[b].copy(src, dst, length=2**64)
        self.queues[b].check()
        self.queues[a].dealloca(src).wait(timeout=TIMEOUT)
        self.queues[b].dealloca(dst).wait(timeout=TIMEOUT)


class InvocationTest(MultiDeviceCase):
    def invoke_clone(self, a, b, data):
        """hipline.clone on b's queue of a buffer of a: the result's bytes,
        or the Error raised."""
        import asyncio
        src = self.filled(a, data)
        qb = self.queues[b]

        async def run():
            fn = hipline.Function.lookup("hipline.clone")
            (result,) = await hipline.ProgramInvocation(fn, qb, [src])
            with result, result.device as owner:
                self.assertEqual(owner.properties.ordinal, b)
                got = bytes(await qb.read_bytes(result))
                await qb.dealloca(result)
            return got

        try:
            return asyncio.run(run())
        except hipline.Error as e:
            return e
        finally:
            self.queues[a].dealloca(src).wait(timeout=TIMEOUT)
            src.close()

    def test_argument_of_a_reached_device(self):
        a, b = self.pair(reachable=True)
        hipline.enable_peer_access([self.devs[a], self.devs[b]])
        data = payload(4096, 3)
        self.assertEqual(self.invoke_clone(a, b, data), data)

    def test_argument_of_an_unreached_device(self):
        a, b = self.pair(reachable=True)  # Not enabled.
        got = self.invoke_clone(a, b, payload(4096, 4))
        self.assertIsInstance(got, hipline.InvalidArgumentError)
        self.assertIn("another device", got.message)
        self.queues[b].check()


class ConcurrencyTest(MultiDeviceCase):
    def test_threads_enable_query_and_copy(self):
        """A thread per device enables the group, queries every pair and
        gathers every other device's buffer on its own queue, while
        another thread closes an extra handle of each device they use:
        the closed handle raises, the rest is unaffected."""
        shards = [self.filled(i, payload(1024, i)) for i in range(self.count)]
        extras = [hipline.Device(self.backend, ordinal=i, **self.options)
                  for i in range(self.count)]
        errors, closed_seen = [], []
        start = threading.Barrier(self.count + 1)

        def worker(me):
            try:
                q = self.queues[me]
                start.wait(TIMEOUT)
                for round_ in range(5):
                    hipline.enable_peer_access(self.devs)
                    for d in self.devs:
                        self.devs[me].can_access_peer(d)
                        self.devs[me].peer_access_enabled(d)
                    try:
                        self.devs[me].can_access_peer(extras[me])
                    except hipline.FailedPreconditionError:
                        closed_seen.append(me)
                    out = q.alloca(1024 * self.count)
                    fences = [q.copy(s, out, target_offset=i * 1024,
                                     wait=out.ready)
                              for i, s in enumerate(shards)]
                    for f in fences:
                        f.wait(timeout=TIMEOUT)
                    got = bytearray(len(out))
                    q.read(out, got).wait(timeout=TIMEOUT)
                    want = b"".join(payload(1024, i)
                                    for i in range(self.count))
                    if bytes(got) != want:
                        errors.append("device %d round %d: wrong data" %
                                      (me, round_))
                    q.dealloca(out).wait(timeout=TIMEOUT)
                    out.close()
            except BaseException as e:  # noqa: BLE001
                errors.append("device %d: %r" % (me, e))

        threads = [threading.Thread(target=worker, args=(i,))
                   for i in range(self.count)]
        for t in threads:
            t.start()
        start.wait(TIMEOUT)
        for d in extras:
            d.close()
        for t in threads:
            t.join(TIMEOUT)
            self.assertFalse(t.is_alive())
        self.assertEqual(errors, [])
        for i, s in enumerate(shards):
            self.queues[i].dealloca(s).wait(timeout=TIMEOUT)
            s.close()


class LifetimeTest(MultiDeviceCase):
    """A buffer of a freed (dealloca on a's queue, or its last handle
    dropped) while a queue of b still reads it: the free waits for b's
    use; checked mode counts no use after free (tearDown)."""

    def free_while_read(self, reachable, how):
        a, b = self.pair(reachable)
        hipline.enable_peer_access(self.devs)
        qa, qb = self.queues[a], self.queues[b]
        data = payload(8192, 9)
        src = self.filled(a, data)
        dst = qb.alloca(len(data))
        dst.ready.wait(timeout=TIMEOUT)
        gate = hipline.Semaphore(0)
        wait = hipline.Fence()
        wait.insert(gate, 1)
        copied = qb.copy(src, dst, wait=wait)
        freed = qa.dealloca(src) if how == "dealloca" else None
        src.close()  # The last handle: the copy still holds the root.
        if how == "everything":
            # a's queue and device too: C keeps them while the copy lives.
            qa.close()
            self.devs[a].close()
        self.assertFalse(copied.is_reached())
        if freed is not None:
            self.assertFalse(freed.is_reached())  # Ordered after the copy.
        gate.signal(1)
        copied.wait(timeout=TIMEOUT)
        if freed is not None:
            freed.wait(timeout=TIMEOUT)
        # Checked mode poisons freed memory: a copy after the free would
        # not read the data.
        self.assertEqual(self.read(b, dst), data)
        qb.dealloca(dst).wait(timeout=TIMEOUT)
        dst.close()
        if how == "everything":  # Fresh ones for tearDown.
            self.devs[a] = hipline.Device(self.backend, ordinal=a,
                                          **self.options)
            self.queues[a] = self.devs[a].create_queue()

    def test_dealloca_waits_for_a_peer_read(self):
        self.free_while_read(True, "dealloca")

    def test_release_waits_for_a_peer_read(self):
        self.free_while_read(True, "release")

    def test_dealloca_waits_for_a_staged_read(self):
        self.free_while_read(False, "dealloca")

    def test_release_waits_for_a_staged_read(self):
        self.free_while_read(False, "release")

    def test_every_handle_of_the_owner_closed(self):
        self.free_while_read(True, "everything")


if __name__ == "__main__":
    unittest.main()
