#!/usr/bin/env python3
"""A small asyncio HTTP server that embeds hipline as a serving stack would.

POST /generate {"steps": N, "assume_no_alias": true|false, "seed": S}
  runs a decode-like loop of N invocations of one kernel-backed function,
  each step producing a fresh result from the previous step's result, and
  answers {"ok": true, "value": ..., "expected": ..., "steps": N} after
  reading the final state back and checking every element.
GET /stats      device memory and invocation counters (JSON).
POST /shutdown  stops the server after answering.

The step function `serve.decode_step` (one read argument, one result) does,
on the invocation's queue: alloca a fresh state (waiting on the invocation's
wait fence), copy the previous state into it, then axpy it += 2 * previous
(signalling the invocation's signal fence). So the state triples per step:
after N steps every float equals (seed % 7 + 1) * 3**N, checked on read
back, which fails if any state was freed or reused early. Like a model's KV
cache, the function keeps its last --cache results per request; so a result
is not provably unique when it is imported, and the request's
`assume_no_alias` decides how it is freed: true imports it async (a
queue-ordered free on the last release), false takes the device's fallback
(--fallback ordered, frontier or device-sync).

Run from a build tree:
  LIBHIPLINE=build/lib/libhipline.so PYTHONPATH=runtime/bindings/python \\
    python3 bench/serve/serve.py --port 8000
"""

import argparse
import array
import asyncio
import contextvars
import json
import signal
import sys

import hipline

_cache = contextvars.ContextVar("hipline_serve_cache")


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
        self.stopping = asyncio.Event()
        self.server = None

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

    async def generate(self, body):
        steps = int(body.get("steps", self.args.steps))
        no_alias = bool(body.get("assume_no_alias", True))
        seed = int(body.get("seed", 0))
        if not 1 <= steps <= 15:
            raise ValueError("steps must be 1..15")
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
        expected = base * 3.0**steps
        bad = sum(1 for v in out if v != expected)
        if bad:
            raise RuntimeError("%d of %d values differ from %g" %
                               (bad, n, expected))
        return {"ok": True, "steps": steps, "value": out[0],
                "expected": expected,
                "assume_no_alias": no_alias}

    def stats(self):
        m = self.device.memory_stats()
        i = self.device.invocation_stats()
        return {"memory": m.__dict__, "invocations": i.__dict__,
                "requests": self.requests, "errors": self.errors,
                "fallback": self.device.fallback_mode,
                "global_assume_no_alias":
                    hipline.ProgramInvocation.global_assume_no_alias}

    async def handle(self, reader, writer):
        try:
            while True:
                line = await reader.readline()
                if not line:
                    break
                method, path, _ = line.decode("latin-1").split(" ", 2)
                length = 0
                keep_alive = True
                while True:
                    h = await reader.readline()
                    if h in (b"\r\n", b"\n", b""):
                        break
                    k, _, v = h.decode("latin-1").partition(":")
                    k = k.strip().lower()
                    if k == "content-length":
                        length = int(v)
                    elif k == "connection" and v.strip().lower() == "close":
                        keep_alive = False
                body = await reader.readexactly(length) if length else b""
                status, reply = await self.route(method, path, body)
                data = json.dumps(reply).encode()
                writer.write(b"HTTP/1.1 %d %s\r\nContent-Type: "
                             b"application/json\r\nContent-Length: %d\r\n"
                             b"Connection: %s\r\n\r\n" %
                             (status, b"OK" if status == 200 else b"Error",
                              len(data),
                              b"keep-alive" if keep_alive else b"close") +
                             data)
                await writer.drain()
                if not keep_alive:
                    break
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:  # Server shutting down.
            pass
        finally:
            writer.close()

    async def route(self, method, path, body):
        if method == "POST" and path == "/generate":
            self.requests += 1
            try:
                return 200, await self.generate(json.loads(body or b"{}"))
            except Exception as e:  # A failed request answers, never hangs.
                self.errors += 1
                return 500, {"ok": False, "error": "%s: %s" %
                             (type(e).__name__, e)}
        if method == "GET" and path == "/stats":
            return 200, self.stats()
        if method == "POST" and path == "/shutdown":
            self.stopping.set()
            return 200, {"ok": True}
        return 404, {"ok": False, "error": "no route %s %s" % (method, path)}

    async def run(self):
        self.server = await asyncio.start_server(self.handle, self.args.host,
                                                 self.args.port)
        port = self.server.sockets[0].getsockname()[1]
        print("LISTENING %d" % port, flush=True)
        loop = asyncio.get_running_loop()
        for s in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(s, self.stopping.set)
        await self.stopping.wait()
        self.server.close()
        await self.server.wait_closed()
        for q in self.queues:
            await q.idle()

    def close(self):
        for q in self.queues:
            q.close()
        self.step_fn.close()
        self.device.close()


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
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--cache", type=int, default=2,
                   help="results the step function keeps per request")
    args = p.parse_args(argv)
    if args.size <= 0 or args.size % 4:
        p.error("--size must be a positive multiple of 4")
    server = Server(args)
    try:
        asyncio.run(server.run())
    finally:
        server.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
