#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""An aiohttp server that embeds hipline as a serving stack would.

POST /generate {"steps": N, "assume_no_alias": true|false, "seed": S}
  runs a decode-like loop of N invocations of one kernel-backed function,
  each step producing a fresh result from the previous step's result, and
  answers {"ok": true, "value": ..., "expected": ..., "steps": N} after
  reading the final state back and checking every element.
GET /stats      device memory and invocation counters (JSON).
POST /shutdown  answers, then drains: the listening socket closes, requests
                in flight finish and are answered, then the process exits.
SIGTERM / SIGINT drain the same way.

HTTP is aiohttp's (Debian: python3-aiohttp): malformed request lines and
headers, a bad or duplicate Content-Length and over-long headers get 400; a
body over --max-body bytes gets 413; a request head that does not arrive
within --header-timeout seconds (slowloris, or a connection that never sends
anything) gets 408 and the connection is closed, as does a body slower than
--body-timeout; idle keep-alive connections close after --idle-timeout. The
JSON body is checked strictly: not JSON is 400, anything but an object with
"steps" (int 1..15), "assume_no_alias" (bool) and "seed" (int 0..2**32-1),
all optional, is 422 naming the field.

The step function `serve.decode_step` (one read argument, one result) does,
on the invocation's queue: alloca a fresh state (waiting on the invocation's
wait fence), copy the previous state into it, then axpy it += 2 * previous
(signalling the invocation's signal fence). So the state triples per step,
in float32: 2 * x is exact and the sum is rounded once, so after N steps
every element equals round_f32(3 * v) applied N times to the seed's base
(seed % 7 + 1), the expectation computed below the same way. A mismatch
means some state was freed or reused early. Like a model's KV cache, the
function keeps its last --cache results per request; so a result is not
provably unique when it is imported, and the request's `assume_no_alias`
decides how it is freed: true imports it async (a queue-ordered free on the
last release), false takes the device's fallback (--fallback ordered,
frontier or device-sync).

Run from a build tree (an interpreter with aiohttp, e.g. /usr/bin/python3):
  LIBHIPLINE=build/lib/libhipline.so PYTHONPATH=runtime/bindings/python \\
    /usr/bin/python3 bench/serve/serve.py --port 8000
"""

import argparse
import array
import asyncio
import contextvars
import json
import logging
import signal
import struct
import sys

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler

import hipline

_cache = contextvars.ContextVar("hipline_serve_cache")
MAX_STEPS = 15
FIELDS = {"steps", "assume_no_alias", "seed"}


def round_f32(x):
    return struct.unpack("f", struct.pack("f", x))[0]


def expected_value(seed, steps):
    """What every element holds after |steps| steps, as the device computes
    it: float32, 2 * x exact, x + 2 * x rounded once (3 * x is exact in
    double, so rounding it to float32 is that single rounding)."""
    v = round_f32(float(seed % 7 + 1))
    for _ in range(steps):
        v = round_f32(3.0 * v)
    return v


class BadField(Exception):
    """A well-formed JSON body with a field of the wrong type or range."""


def parse_generate(body, default_steps):
    """(steps, assume_no_alias, seed) from a decoded JSON body, strictly."""
    if not isinstance(body, dict):
        raise BadField("the body must be a JSON object, not %s" %
                       type(body).__name__)
    unknown = sorted(set(body) - FIELDS)
    if unknown:
        raise BadField("unknown field(s) %s (accepted: %s)" %
                       (", ".join(unknown), ", ".join(sorted(FIELDS))))

    def int_field(name, default, lo, hi):
        v = body.get(name, default)
        if isinstance(v, bool) or not isinstance(v, int):
            raise BadField("%s must be an integer, not %s" %
                           (name, json.dumps(v)))
        if not lo <= v <= hi:
            raise BadField("%s must be in [%d, %d], not %d" % (name, lo, hi, v))
        return v

    steps = int_field("steps", default_steps, 1, MAX_STEPS)
    seed = int_field("seed", 0, 0, 2**32 - 1)
    no_alias = body.get("assume_no_alias", True)
    if not isinstance(no_alias, bool):
        raise BadField("assume_no_alias must be true or false, not %s" %
                       json.dumps(no_alias))
    return steps, no_alias, seed


class GuardedHandler(RequestHandler):
    """aiohttp's connection handler with a deadline for each request head:
    a client that sends one slowly, or nothing at all, gets 408."""

    header_timeout = 10.0

    def connection_made(self, transport):
        super().connection_made(transport)
        self._guard = self._loop.call_later(self.header_timeout,
                                            self._head_too_slow)

    def data_received(self, data):
        before = self._request_count
        super().data_received(data)
        guard = self.__dict__.get("_guard")
        if self._request_count != before:
            if guard is not None:  # A whole head arrived.
                guard.cancel()
                self._guard = None
        elif guard is None and data and not self._force_close:
            # The start of the next head on a kept-alive connection.
            self._guard = self._loop.call_later(self.header_timeout,
                                                self._head_too_slow)

    def connection_lost(self, exc):
        guard = self.__dict__.get("_guard")
        if guard is not None:
            guard.cancel()
            self._guard = None
        super().connection_lost(exc)

    def _head_too_slow(self):
        self._guard = None
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        if self._current_request is not None or self._messages:
            return  # A request is being served: its handler answers.
        body = b'{"ok": false, "error": "request head took too long"}'
        transport.write(b"HTTP/1.1 408 Request Timeout\r\nContent-Type: "
                        b"application/json\r\nContent-Length: %d\r\n"
                        b"Connection: close\r\n\r\n%s" % (len(body), body))
        self.force_close()
        transport.close()


class _QuietBadRequests(logging.Filter):
    """A client's malformed request is answered with 400, not logged with a
    traceback."""

    def filter(self, record):
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, HttpProcessingError)


class Server:
    def __init__(self, args):
        self.args = args
        self.device = hipline.Device(args.backend, fallback=args.fallback)
        self.queues = [self.device.create_queue() for _ in range(args.queues)]
        self.next_queue = 0
        self.step_fn = hipline.Function("serve.decode_step", self._decode_step,
                                        args=("r",), results=1)
        self.requests = 0
        self.errors = 0
        self.in_flight = 0
        self.draining = False
        self.stopping = None

    def _decode_step(self, queue, args, wait, signal):
        # Runs synchronously inside invoke(), on the loop thread, in the
        # request's context (so the contextvar is the request's cache).
        (prev,) = args
        n = len(prev)
        state = queue.alloca(n, wait=wait)
        queue.copy(prev, state, wait=state.ready)
        queue.dispatch("axpy", [
            hipline.Scalar.f32(2.0),
            hipline.BufferArg(prev, "r"),
            hipline.BufferArg(state, "rw"),
            hipline.Scalar.u64(n // 4)
        ], signal=signal)
        cache = _cache.get()
        cache.append(state)
        while len(cache) > self.args.cache:
            cache.pop(0).close()
        return state

    async def generate(self, steps, no_alias, seed):
        queue = self.queues[self.next_queue]
        self.next_queue = (self.next_queue + 1) % len(self.queues)
        cache = []
        _cache.set(cache)
        n = self.args.size // 4
        base = float(seed % 7 + 1)
        state = queue.alloca(n * 4)
        try:
            await queue.write(state, array.array("f", [base]) * n,
                              wait=state.ready)
            first = True
            for _ in range(steps):
                inv = hipline.ProgramInvocation(self.step_fn, queue, [state],
                                                assume_no_alias=no_alias)
                with inv:
                    (nxt,) = await inv
                if first:  # Ours, not imported: free it in queue order.
                    queue.dealloca(state)
                    first = False
                state.close()  # The previous step's state is done with.
                state = nxt
            out = array.array("f", await queue.read_bytes(state))
        finally:
            state.close()
            for b in cache:
                b.close()
        expected = expected_value(seed, steps)
        bad = sum(1 for v in out if v != expected)
        if bad:
            raise RuntimeError("%d of %d values differ from %r" %
                               (bad, n, expected))
        return {"ok": True, "steps": steps, "seed": seed, "value": out[0],
                "expected": expected, "assume_no_alias": no_alias}

    def stats(self):
        m = self.device.memory_stats()
        i = self.device.invocation_stats()
        return {"memory": m.__dict__, "invocations": i.__dict__,
                "requests": self.requests, "errors": self.errors,
                "in_flight": self.in_flight,
                "fallback": self.device.fallback_mode,
                "global_assume_no_alias":
                    hipline.ProgramInvocation.global_assume_no_alias}

    @staticmethod
    def reply(status, body):
        return web.json_response(body, status=status)

    async def handle_generate(self, request):
        if self.draining:
            return self.reply(503, {"ok": False,
                                    "error": "the server is shutting down"})
        self.in_flight += 1
        try:
            try:
                raw = await asyncio.wait_for(request.read(),
                                             self.args.body_timeout)
            except asyncio.TimeoutError:
                return web.json_response(
                    {"ok": False, "error": "request body took too long"},
                    status=408, headers={"Connection": "close"})
            try:
                body = json.loads(raw) if raw else {}
            except (ValueError, UnicodeDecodeError) as e:
                return self.reply(400, {"ok": False,
                                        "error": "body is not JSON: %s" % e})
            try:
                steps, no_alias, seed = parse_generate(body, self.args.steps)
            except BadField as e:
                return self.reply(422, {"ok": False, "error": str(e)})
            self.requests += 1
            try:
                return self.reply(200, await self.generate(steps, no_alias,
                                                           seed))
            except Exception as e:  # A failed request answers, never hangs.
                self.errors += 1
                return self.reply(500, {"ok": False, "error": "%s: %s" %
                                        (type(e).__name__, e)})
        finally:
            self.in_flight -= 1

    async def handle_stats(self, request):
        return self.reply(200, self.stats())

    async def handle_shutdown(self, request):
        # Stops once this answer is on its way: the drain below waits for
        # every request in flight, this one included.
        asyncio.get_running_loop().call_soon(self.stopping.set)
        return self.reply(200, {"ok": True, "in_flight": self.in_flight})

    def app(self):
        app = web.Application(client_max_size=self.args.max_body)
        app.router.add_post("/generate", self.handle_generate)
        app.router.add_get("/stats", self.handle_stats)
        app.router.add_post("/shutdown", self.handle_shutdown)
        return app

    async def run(self):
        self.stopping = asyncio.Event()
        logging.getLogger("aiohttp.server").addFilter(_QuietBadRequests())
        GuardedHandler.header_timeout = self.args.header_timeout
        runner = web.AppRunner(
            self.app(), handle_signals=False, access_log=None,
            keepalive_timeout=self.args.idle_timeout,
            max_line_size=8190, max_field_size=8190, max_headers=64)
        await runner.setup()
        runner.server.__class__ = _GuardedServer
        site = web.TCPSite(runner, self.args.host, self.args.port,
                           backlog=self.args.backlog,
                           shutdown_timeout=self.args.drain_timeout)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]
        print("LISTENING %d" % port, flush=True)
        loop = asyncio.get_running_loop()
        for s in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(s, self.stopping.set)
        await self.stopping.wait()
        await self.drain(runner, site)
        for q in self.queues:
            await q.idle()

    async def drain(self, runner, site):
        """Stops listening, lets every request in flight finish and answer
        (up to --drain-timeout; new requests on open connections get 503),
        then closes the connections. (aiohttp's own shutdown cancels the
        handlers still running.)"""
        self.draining = True
        site._server.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.args.drain_timeout

        def busy(h):
            return h._current_request is not None or bool(h._messages)

        while (any(busy(h) for h in runner.server.connections) and
               loop.time() < deadline):
            await asyncio.sleep(0.01)
        await runner.cleanup()

    def close(self):
        for q in self.queues:
            q.close()
        self.step_fn.close()
        self.device.close()


class _GuardedServer(web.Server):
    def __call__(self):
        return GuardedHandler(self, loop=self._loop, **self._kwargs)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0: any free port")
    p.add_argument("--backend", default="host")
    p.add_argument("--fallback", default="ordered",
                   choices=["ordered", "frontier", "device-sync"])
    p.add_argument("--queues", type=int, default=4)
    p.add_argument("--size", type=int, default=64 << 10,
                   help="bytes of state per request")
    p.add_argument("--steps", type=int, default=8,
                   help="steps of a request that names none (1..%d)" %
                   MAX_STEPS)
    p.add_argument("--cache", type=int, default=2,
                   help="results the step function keeps per request")
    p.add_argument("--max-body", type=int, default=4096,
                   help="largest request body in bytes (else 413)")
    p.add_argument("--header-timeout", type=float, default=10.0,
                   help="seconds for a request head to arrive (else 408)")
    p.add_argument("--body-timeout", type=float, default=10.0,
                   help="seconds for a request body to arrive (else 408)")
    p.add_argument("--idle-timeout", type=float, default=30.0,
                   help="seconds an idle keep-alive connection stays open")
    p.add_argument("--drain-timeout", type=float, default=120.0,
                   help="seconds a shutdown waits for requests in flight")
    p.add_argument("--backlog", type=int, default=128)
    args = p.parse_args(argv)
    if args.size <= 0 or args.size % 4:
        p.error("--size must be a positive multiple of 4")
    if not 1 <= args.steps <= MAX_STEPS:
        p.error("--steps must be in 1..%d" % MAX_STEPS)
    for name in ("queues", "cache", "max_body", "backlog"):
        if getattr(args, name) <= 0:
            p.error("--%s must be positive" % name.replace("_", "-"))
    for name in ("header_timeout", "body_timeout", "idle_timeout",
                 "drain_timeout"):
        if not getattr(args, name) > 0:
            p.error("--%s must be a positive number of seconds" %
                    name.replace("_", "-"))
    server = Server(args)
    try:
        asyncio.run(server.run())
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
