#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Load generator for bench/serve/serve.py: one fresh server per policy.

For each policy it starts serve.py on 127.0.0.1 (any free port), drives it
with --clients concurrent keep-alive clients for --duration seconds, then
reads the server's /stats and shuts it down. It prints one table row per
policy: requests, errors, lost (sent without an answer), requests per
second, p50/p99 latency and the device's peak reserved memory. It stops by
itself and exits 1 if any request failed or was lost.

Policies:
  async        assume_no_alias=true: results are freed in queue order.
  ordered      assume_no_alias=false, device fallback "ordered" (the default:
               a queue-ordered free after the root's use fence).
  frontier     assume_no_alias=false, device fallback "frontier".
  device-sync  assume_no_alias=false, device fallback "device-sync".

The server needs aiohttp (python3-aiohttp); loadgen runs it with its own
interpreter:
  LIBHIPLINE=build/lib/libhipline.so PYTHONPATH=runtime/bindings/python \\
    /usr/bin/python3 bench/serve/loadgen.py --clients 32 --duration 20
"""

import argparse
import asyncio
import json
import os
import sys
import time

POLICIES = {
    "async": (True, "ordered"),
    "ordered": (False, "ordered"),
    "frontier": (False, "frontier"),
    "device-sync": (False, "device-sync"),
}
HERE = os.path.dirname(os.path.abspath(__file__))


async def http(reader, writer, method, path, body=None):
    data = json.dumps(body).encode() if body is not None else b""
    writer.write(b"%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: "
                 b"application/json\r\nContent-Length: %d\r\n\r\n" %
                 (method.encode(), path.encode(), len(data)) + data)
    await writer.drain()
    status = int((await reader.readline()).split()[1])
    length = 0
    while True:
        h = await reader.readline()
        if h in (b"\r\n", b""):
            break
        k, _, v = h.decode("latin-1").partition(":")
        if k.strip().lower() == "content-length":
            length = int(v)
    return status, json.loads(await reader.readexactly(length))


async def client(port, deadline, no_alias, steps, idx, out):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    seq = 0
    try:
        while time.monotonic() < deadline:
            seq += 1
            out["sent"] += 1
            t0 = time.perf_counter()
            try:
                status, reply = await http(reader, writer, "POST",
                                           "/generate", {
                                               "steps": steps,
                                               "assume_no_alias": no_alias,
                                               "seed": idx * 1000 + seq
                                           })
            except (ConnectionError, asyncio.IncompleteReadError,
                    ValueError, IndexError) as e:
                out["lost"] += 1
                out["messages"].append("client %d: %r" % (idx, e))
                return
            out["latencies"].append(time.perf_counter() - t0)
            if status != 200 or not reply.get("ok") or \
                    reply.get("value") != reply.get("expected"):
                out["errors"] += 1
                out["messages"].append("client %d: %s" % (idx, reply))
    finally:
        writer.close()


def percentile(values, q):
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


async def run_policy(name, args):
    no_alias, fallback = POLICIES[name]
    env = dict(os.environ)
    env.pop("HIPLINE_ASSUME_NO_ALIAS", None)  # The request decides.
    proc = await asyncio.create_subprocess_exec(
        sys.executable, os.path.join(HERE, "serve.py"), "--fallback",
        fallback, "--size", str(args.size), "--queues", str(args.queues),
        "--cache", str(args.cache), "--backend", args.backend,
        stdout=asyncio.subprocess.PIPE, env=env)
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        if not line.startswith(b"LISTENING "):
            raise RuntimeError("server did not start: %r" % line)
        port = int(line.split()[1])
        out = {"sent": 0, "lost": 0, "errors": 0, "latencies": [],
               "messages": []}
        t0 = time.monotonic()
        deadline = t0 + args.duration
        await asyncio.wait_for(
            asyncio.gather(*(client(port, deadline, no_alias, args.steps, i,
                                    out) for i in range(args.clients))),
            args.duration + 120)
        elapsed = time.monotonic() - t0
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        _, stats = await http(reader, writer, "GET", "/stats")
        await http(reader, writer, "POST", "/shutdown", {})
        writer.close()
        rc = await asyncio.wait_for(proc.wait(), 60)
    except BaseException:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        raise
    done = len(out["latencies"])
    mem, inv = stats["memory"], stats["invocations"]
    return {
        "policy": name, "assume_no_alias": no_alias, "fallback": fallback,
        "clients": args.clients, "duration_s": round(elapsed, 2),
        "requests": done, "sent": out["sent"], "errors": out["errors"],
        "lost": out["sent"] - done,
        "server_errors": stats["errors"], "server_exit": rc,
        "rps": done / elapsed if elapsed > 0 else 0.0,
        "p50_ms": percentile(out["latencies"], 0.50) * 1e3,
        "p99_ms": percentile(out["latencies"], 0.99) * 1e3,
        "peak_reserved_bytes": mem["bytes_reserved_peak"],
        "peak_in_use_bytes": mem["bytes_in_use_peak"],
        "async_imports": inv["async_imports"],
        "sync_imports": inv["sync_imports"],
        "fallback_releases": inv["fallback_releases_frontier"] +
        inv["fallback_releases_device_sync"] +
        inv["fallback_releases_ordered"],
        "messages": out["messages"][:5],
    }


def print_table(rows, args):
    print("%d clients, %g s per policy, %d steps of %d KiB per request, "
          "%d queues" % (args.clients, args.duration, args.steps,
                         args.size >> 10, args.queues))
    print("| policy | assume_no_alias | fallback | requests | errors | lost "
          "| req/s | p50 ms | p99 ms | peak reserved MiB | async / sync "
          "imports | fallback releases |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print("| %s | %s | %s | %d | %d | %d | %.1f | %.1f | %.1f | %.2f | "
              "%d / %d | %d |" %
              (r["policy"], str(r["assume_no_alias"]).lower(), r["fallback"],
               r["requests"], r["errors"], r["lost"], r["rps"], r["p50_ms"],
               r["p99_ms"], r["peak_reserved_bytes"] / 2**20,
               r["async_imports"], r["sync_imports"],
               r["fallback_releases"]))


async def amain(args):
    rows = []
    for name in args.policies.split(","):
        if name not in POLICIES:
            raise SystemExit("unknown policy %r (accepted: %s)" %
                             (name, ", ".join(POLICIES)))
        rows.append(await run_policy(name, args))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--clients", type=int, default=32)
    p.add_argument("--duration", type=float, default=20.0,
                   help="seconds per policy")
    p.add_argument("--policies",
                   default="async,ordered,frontier,device-sync")
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--size", type=int, default=64 << 10)
    p.add_argument("--queues", type=int, default=4)
    p.add_argument("--cache", type=int, default=2)
    p.add_argument("--backend", default="host")
    p.add_argument("--json", help="also write the rows to this file")
    args = p.parse_args(argv)
    for name in ("clients", "steps", "size", "queues", "cache"):
        if getattr(args, name) <= 0:
            p.error("--%s must be a positive integer, not %d" %
                    (name, getattr(args, name)))
    if not args.duration > 0 or args.duration == float("inf"):
        p.error("--duration must be a positive, finite number of seconds")
    rows = asyncio.run(amain(args))
    print_table(rows, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    bad = [r for r in rows if r["errors"] or r["lost"] or r["server_errors"]
           or r["server_exit"] != 0 or r["requests"] == 0]
    for r in bad:
        print("FAILED %s: %s" % (r["policy"], r["messages"]), file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
