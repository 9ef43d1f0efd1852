#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Checks of build/bin/hipline-stress, one case per ctest.

Usage: stress_check.py --stress BIN --work DIR [--traces DIR] [--plot TOOL] CASE

Cases:
  env-no-alias-0   HIPLINE_ASSUME_NO_ALIAS=0 serving: async_imports == 0,
                   sync_imports > 0, source "environment".
  no-alias-1       --assume-no-alias 1 serving: async_imports > 0.
  matrix-json      a small --matrix run: one JSON object per run, all fields,
                   no verification failure or use-after-free.
  checked          random and serving in checked mode: no use-after-free.
  escape           serving --escape: handed-out addresses escape and take the
                   conservative fallback, never freed early.
  replay-traces    both traces in ../shared/data/traces, end to end (77 when
                   absent): peak reserved and peak live reported.
  replay-csv       a small RMM CSV replays; its peak live is exact.
  malformed-log    a bad line names the file and the line number.
  bad-flags        every flag's bad value exits 2 naming flag and value.
  plot             tools/hipline-plot writes PNGs (77 without gnuplot).
  silent-failures  failed allocations (faults, the pool limit) and failed
                   submissions end the run with exit 1 naming the first
                   error; nothing unverified counts as verified.
  interrupt        SIGINT/SIGTERM mid-run: exit 130/143, the JSON (marked
                   partial) and the trace are written.
  interrupt-convert  SIGTERM while a log is converted: the converter is
                   stopped and no temporary file is left.
  outputs          unwritable outputs fail before the run, HIPLINE_TRACE
                   with --trace is refused, /dev/full fails, trace drops are
                   counted and warned about.
  parsing          decimal numbers, --duration with --iterations (whichever
                   ends first), a
                   log on a pipe, a log named like an option.
  terminal         stderr on a pseudo-terminal: alias warnings once per
                   function with one note, log lines never inside the bar.
  plot-input       hipline-plot quotes names for gnuplot (no command
                   injection) and refuses bad numbers in one line (77
                   without gnuplot).
  table-width      the default table, notes and legend fit 100 columns;
                   --wide prints every column.
Exit 0 on success, 1 on failure, 77 to skip.
"""

import argparse
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time

REQUIRED = [
    "workload", "backend", "alloc", "assume_no_alias", "fallback", "ops",
    "seconds", "ops_per_s", "p50_us", "p99_us", "peak_used_bytes",
    "peak_reserved_bytes", "async_imports", "sync_imports", "alias_detected",
    "fallback_releases", "verify_failures", "use_after_free",
]

SMALL = ["--iterations", "20", "--backend", "host"]


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def run(args, stress, env_extra=None, expect=0):
    env = dict(os.environ)
    env.pop("HIPLINE_ASSUME_NO_ALIAS", None)
    env.update(env_extra or {})
    proc = subprocess.run([stress] + args, env=env, capture_output=True,
                          text=True, timeout=240)
    if expect is not None and proc.returncode != expect:
        raise Failure("%s exited %d (expected %d)\nstdout:\n%s\nstderr:\n%s" %
                      (" ".join(args), proc.returncode, expect, proc.stdout,
                       proc.stderr))
    return proc


def load(path):
    with open(path) as f:
        data = json.load(f)
    runs = data if isinstance(data, list) else [data]
    for r in runs:
        missing = [k for k in REQUIRED if k not in r]
        check(not missing, "%s: missing keys %s" % (path, missing))
    return runs


def case_env_no_alias_0(a):
    out = os.path.join(a.work, "env0.json")
    run(["--workload", "serving", "--json", out] + SMALL, a.stress,
        {"HIPLINE_ASSUME_NO_ALIAS": "0"})
    (r,) = load(out)
    check(r["async_imports"] == 0, "async_imports %d != 0" % r["async_imports"])
    check(r["sync_imports"] > 0, "sync_imports is 0")
    check(r["assume_no_alias"] == 0, "assume_no_alias not 0")
    check(r["assume_no_alias_source"] == "environment",
          "source %r" % r["assume_no_alias_source"])
    # The environment wins over the flag, as documented.
    run(["--workload", "serving", "--assume-no-alias", "1", "--json", out] +
        SMALL, a.stress, {"HIPLINE_ASSUME_NO_ALIAS": "0"})
    (r,) = load(out)
    check(r["async_imports"] == 0, "flag beat the environment")


def case_no_alias_1(a):
    out = os.path.join(a.work, "na1.json")
    run(["--workload", "serving", "--assume-no-alias", "1", "--json", out] +
        SMALL, a.stress)
    (r,) = load(out)
    check(r["async_imports"] > 0, "async_imports is 0")
    check(r["assume_no_alias"] == 1 and
          r["assume_no_alias_source"] == "invocation", "effective value")
    # And the flag's 0 really is 0 when the environment is silent.
    run(["--workload", "serving", "--assume-no-alias", "0", "--aliasing", "0",
         "--json", out] + SMALL, a.stress)
    (r,) = load(out)
    check(r["async_imports"] == 0 and r["sync_imports"] > 0,
          "--assume-no-alias 0: async %d sync %d" %
          (r["async_imports"], r["sync_imports"]))
    check(r["alias_detected"] == 0, "alias_detected with --aliasing 0")


def case_matrix_json(a):
    out = os.path.join(a.work, "matrix.json")
    run(["--matrix", "--json", out, "--iterations", "30", "--queues", "2",
         "--backend", "host"], a.stress)
    runs = load(out)
    check(len(runs) == 15, "expected 15 runs, got %d" % len(runs))
    policies = {(r["workload"], r["policy"]) for r in runs}
    check(len(policies) == 15, "duplicate runs")
    for r in runs:
        check(r["verify_failures"] == 0 and r["use_after_free"] == 0,
              "%s/%s failed verification" % (r["workload"], r["policy"]))
        check(r["ops"] > 0 and r["ops_per_s"] > 0, "no ops")
        if r["workload"] != "multistream":  # It only allocates and spins.
            check(r["verified"] > 0, "%s/%s verified nothing" %
                  (r["workload"], r["policy"]))
    fb = {r["policy"]: r for r in runs if r["workload"] == "serving"}
    check(fb["noalias0-ordered"]["fallback"] == "ordered", "fallback")
    check(fb["noalias0-ordered"]["fallback_releases"] > 0,
          "no ordered fallback releases with assume_no_alias=0")
    check(fb["noalias0-devsync"]["fallback"] == "device-sync", "fallback")
    check(fb["noalias0-frontier"]["fallback"] == "frontier", "fallback")
    check(fb["sync"]["alloc"] == "sync", "alloc")
    check(fb["noalias0-frontier"]["fallback_releases"] > 0,
          "no fallback releases with assume_no_alias=0")
    ms = [r for r in runs if r["workload"] == "multistream"]
    check(all(r["queue_scaling"] > 0 for r in ms), "queue_scaling")


def case_checked(a):
    out = os.path.join(a.work, "checked.json")
    for wl in ("random", "serving"):
        run(["--workload", wl, "--checked", "--aliasing", "0.5", "--json",
             out] + SMALL, a.stress)
        (r,) = load(out)
        check(r["checked"] is True, "checked mode not on")
        check(r["use_after_free"] == 0 and r["verify_failures"] == 0,
              "%s: use-after-free or corruption in checked mode" % wl)


def case_escape(a):
    """--escape P: serving hands device addresses out; those roots escape
    and take the conservative fallback, in checked mode, with nothing freed
    early. Without it no root escapes."""
    out = os.path.join(a.work, "escape.json")
    base = ["--workload", "serving", "--assume-no-alias", "0", "--fallback",
            "ordered", "--checked", "--json", out] + SMALL
    run(base + ["--escape", "0.5"], a.stress)
    (r,) = load(out)
    check(r["escaped_roots"] > 0, "--escape 0.5 escaped nothing: %r" % r)
    check(r["use_after_free"] == 0 and r["verify_failures"] == 0,
          "escape: use-after-free or corruption: %r" % r)
    run(base + ["--escape", "0"], a.stress)
    (r,) = load(out)
    check(r["escaped_roots"] == 0, "--escape 0 escaped roots: %r" % r)
    run(["--workload", "serving", "--escape", "1.5"] + SMALL, a.stress,
        expect=2)


def case_replay_traces(a):
    if not a.traces or not os.path.isdir(a.traces):
        print("no traces directory; skipping")
        return 77
    names = ["pytorch-ddp-v100.kineto.json.gz", "opt-finetune.snapshot.pickle"]
    paths = [os.path.join(a.traces, n) for n in names]
    if not all(os.path.exists(p) for p in paths):
        print("traces absent; skipping")
        return 77
    for p in paths:
        out = os.path.join(a.work, os.path.basename(p) + ".json")
        proc = run(["--workload", "replay", "--trace-file", p, "--json", out,
                    "--backend", "host"], a.stress)
        (r,) = load(out)
        check(r["log_events"] > 1000, "%s: %d events" % (p, r["log_events"]))
        check(r["peak_live_bytes"] > 0, "no peak live")
        check(r["peak_reserved_bytes"] >= r["peak_live_bytes"],
              "%s: reserved %d below the log's live peak %d" %
              (p, r["peak_reserved_bytes"], r["peak_live_bytes"]))
        check(r["ops"] == r["log_events"], "not every event replayed")
        check("reserved/live" in proc.stdout, "table lacks reserved/live")
        check(r["torch_model_peak_reserved_bytes"] >= r["peak_live_bytes"],
              "%s: torch model %d below peak live %d" %
              (p, r["torch_model_peak_reserved_bytes"], r["peak_live_bytes"]))
        check("pytorch model" in proc.stdout, "table lacks the pytorch model")
        check_arena_and_account(p, r, proc.stdout)
        # The pool's target on the shared traces (one queue each, so the
        # replay is deterministic): within 1.5% of the ideal arena and no
        # more than PyTorch's caching allocator.
        check(r["peak_reserved_bytes"] <= 1.015 * r["arena_peak_reserved_bytes"],
              "%s: reserved %d above 1.015 x the arena's %d" %
              (p, r["peak_reserved_bytes"], r["arena_peak_reserved_bytes"]))
        check(r["peak_reserved_bytes"] <= r["torch_model_peak_reserved_bytes"],
              "%s: reserved %d above the torch model's %d" %
              (p, r["peak_reserved_bytes"],
               r["torch_model_peak_reserved_bytes"]))


def check_arena_and_account(name, r, stdout):
    """The arena column and the pool's account at its peak in |r| (a replay
    row) and in the notes line of |stdout|."""
    arena = r["arena_peak_reserved_bytes"]
    check(arena >= r["peak_live_bytes"],
          "%s: arena %d below peak live %d" % (name, arena,
                                                r["peak_live_bytes"]))
    check(abs(r["arena_reserved_over_live"] -
              arena / r["peak_live_bytes"]) < 1e-3, "arena ratio")
    check(abs(r["reserved_over_arena"] -
              r["peak_reserved_bytes"] / arena) < 1e-3, "reserved/arena")
    a = r["peak_account"]
    parts = (a["requested_bytes"] + a["rounding_bytes"] + a["tail_bytes"] +
             a["fragment_bytes"] + a["free_slab_bytes"])
    check(a["slab_bytes"] > 0 and parts == a["slab_bytes"],
          "%s: account parts %d do not sum to the slabs %d" %
          (name, parts, a["slab_bytes"]))
    check(a["slab_bytes"] <= r["peak_reserved_bytes"],
          "%s: slabs at the peak above the peak reserved" % name)
    # (A zero-byte allocation of the log is replayed as 1 byte.)
    check(a["requested_bytes"] <= r["peak_live_bytes"] + r["peak_live_count"],
          "%s: requested at the peak above the log's live peak" % name)
    for word in ("arena", "rounding", "tails", "fragments", "free slabs"):
        check(word in stdout, "notes lack %r" % word)


def case_replay_csv(a):
    csv = os.path.join(a.work, "small.csv")
    with open(csv, "w") as f:
        f.write("Thread,Time,Action,Pointer,Size,Stream\n"
                "1,0:00:00.000001,allocate,0x1000,1000,0x1\n"
                "1,0:00:00.000002,allocate,0x9000,3000,0x2\n"
                "1,0:00:00.000003,free,0x1000,1000,0x1\n"
                "1,0:00:00.000004,allocate,0x1000,500,0x1\n"
                "1,0:00:00.000005,free,0x9000,3000,0x2\n")
    out = os.path.join(a.work, "small.json")
    proc = run([csv, "--json", out, "--backend", "host"], a.stress)
    (r,) = load(out)
    check(r["workload"] == "replay", "positional log did not mean replay")
    check(r["peak_live_bytes"] == 4000, "peak live %d" % r["peak_live_bytes"])
    check(r["log_events"] == 5 and r["ops"] == 5, "events")
    # The PyTorch model: 1000, 3000 and 500 bytes share one 2 MiB segment.
    check(r["torch_model_peak_reserved_bytes"] == 2 << 20,
          "torch model %d" % r["torch_model_peak_reserved_bytes"])
    # The arena: 1000 -> 1 KiB at 0, 3000 -> 3 KiB at 1 KiB (top 4 KiB),
    # 500 -> 512 B in the freed 1 KiB hole.
    check(r["arena_peak_reserved_bytes"] == 4096,
          "arena %d" % r["arena_peak_reserved_bytes"])
    check_arena_and_account(csv, r, proc.stdout)


def case_malformed_log(a):
    csv = os.path.join(a.work, "bad.csv")
    with open(csv, "w") as f:
        f.write("Thread,Time,Action,Pointer,Size,Stream\n"
                "1,0:00:00.000001,allocate,0x1000,1000,0x1\n"
                "1,0:00:00.000002,allocate,0x2000,abc,0x1\n")
    proc = run(["--log", csv, "--backend", "host"], a.stress, expect=1)
    check("bad.csv:3" in proc.stderr,
          "error does not name file and line: %r" % proc.stderr)
    # An endless stream that is no log is refused from its first bytes.
    proc = run(["--log", "/dev/zero", "--backend", "host"], a.stress, expect=1)
    check("starts with byte 0x00" in proc.stderr,
          "/dev/zero not refused by its content: %r" % proc.stderr)
    missing = os.path.join(a.work, "does-not-exist.csv")
    proc = run(["--trace-file", missing], a.stress, expect=1)
    check("does-not-exist.csv" in proc.stderr, "missing file not named")


RMM_HEADER = "Thread,Time,Action,Pointer,Size,Stream\n"


def write_log(path, sizes):
    """An RMM CSV allocating every size of |sizes| (all live), then freeing."""
    with open(path, "w") as f:
        f.write(RMM_HEADER)
        for i, size in enumerate(sizes):
            f.write("1,0:00:00.%06d,allocate,0x%x,%d,0\n" %
                    (i + 1, (i + 1) << 12, size))
        for i, size in enumerate(sizes):
            f.write("1,0:00:01.%06d,free,0x%x,%d,0\n" %
                    (i + 1, (i + 1) << 12, size))
    return path


def expect_failed_run(a, args, env, needle, name):
    """Runs |args| expecting exit 1, the first error named on stderr and in
    the JSON's error field, and no verification counted that did not run."""
    out = os.path.join(a.work, name + ".json")
    if os.path.exists(out):
        os.unlink(out)
    proc = run(args + ["--json", out, "--backend", "host"], a.stress, env,
               expect=1)
    check(needle in proc.stderr,
          "%s: first error (%r) not named: %r" % (name, needle, proc.stderr))
    (r,) = load(out)
    check(needle in r["error"], "%s: JSON error %r" % (name, r["error"]))
    check(r["verify_failures"] <= r["verified"],
          "%s: %d verification failures out of %d verifications" %
          (name, r["verify_failures"], r["verified"]))
    return r


def case_silent_failures(a):
    # Every allocation fails: not "verified, 0 failures".
    r = expect_failed_run(a, ["--workload", "serving", "--iterations", "30"],
                          {"HIPLINE_FAULTS": "alloc_fail_every=1"},
                          "alloc_fail_every", "alloc-fail")
    check(r["ooms"] > 0, "ooms not counted")
    check(r["verified"] == 0, "verified %d with no allocation" % r["verified"])
    # Two live 8 GiB allocations exceed the host pool's limit; 2^48 bytes too.
    big = write_log(os.path.join(a.work, "big.csv"), [8 << 30, 8 << 30])
    r = expect_failed_run(a, [big], None, "does not fit", "replay-big")
    check(r["ooms"] == 1, "ooms %d" % r["ooms"])
    huge = write_log(os.path.join(a.work, "huge.csv"), [1 << 48])
    expect_failed_run(a, [huge], None, "281474976710656 bytes", "replay-huge")
    # Injected submission failures: the counter is not read as garbage.
    r = expect_failed_run(a, ["--workload", "random", "--iterations", "20"],
                          {"HIPLINE_FAULTS": "fail_submission_every=2"},
                          "injected by HIPLINE_FAULTS", "fail-submission")
    check(r["failed_submissions"] > 0, "failed submissions not counted")
    check(r["verify_failures"] == 0, "garbage verification failures")
    # The same workloads without faults pass.
    run(["--workload", "random", "--iterations", "20", "--backend", "host"],
        a.stress)


def wait_for_handlers(proc, timeout=120):
    """Waits until |proc| has installed its SIGINT and SIGTERM handlers (its
    SigCgt mask in /proc), so a signal sent now is caught, not fatal."""
    want = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGTERM - 1))
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise Failure("exited %d before installing its signal handlers"
                          % proc.returncode)
        try:
            with open("/proc/%d/status" % proc.pid) as f:
                for line in f:
                    if line.startswith("SigCgt:") and \
                            int(line.split()[1], 16) & want == want:
                        return
        except FileNotFoundError:
            pass
        time.sleep(0.01)
    raise Failure("signal handlers not installed within %d s" % timeout)


def case_interrupt(a):
    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        out = os.path.join(a.work, "partial.json")
        trace = os.path.join(a.work, "partial.trace.json")
        for p in (out, trace):
            if os.path.exists(p):
                os.unlink(p)
        env = dict(os.environ)
        env.pop("HIPLINE_TRACE", None)
        # Far more steps than can run before the signal.
        proc = subprocess.Popen(
            [a.stress, "--workload", "random", "--iterations", "100000000",
             "--json", out, "--trace", trace, "--backend", "host"],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for_handlers(proc)
        time.sleep(0.3)
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=240)
        check(proc.returncode == code, "signal %d: exit %d, expected %d\n%s" %
              (sig, proc.returncode, code, stderr))
        check("partial" in stderr, "no word of partial results: %r" % stderr)
        with open(out) as f:
            data = json.load(f)
        runs = data if isinstance(data, list) else [data]
        check(len(runs) <= 1, "runs %d" % len(runs))
        for r in runs:
            check(r["partial"] is True, "the interrupted run is not partial")
            check("PARTIAL" in stdout, "table does not say partial")
        with open(trace) as f:
            json.load(f)  # The trace is written, and whole.


def case_interrupt_convert(a):
    """A log that needs conversion: a signal while the converter runs stops
    it and leaves no temporary file."""
    tmp = os.path.join(a.work, "tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    converter = os.path.join(a.work, "slow-convert")
    with open(converter, "w") as f:
        f.write("#!/bin/sh\n"
                "# A converter that writes part of its output, then hangs.\n"
                "while [ $# -gt 0 ]; do\n"
                "  [ \"$1\" = -o ] && out=$2\n"
                "  shift\n"
                "done\n"
                "echo Thread,Time,Action,Pointer,Size,Stream > \"$out\"\n"
                "exec sleep 600\n")
    os.chmod(converter, 0o755)
    log = os.path.join(a.work, "trace.json")
    with open(log, "w") as f:
        f.write('{"traceEvents": []}\n')
    env = dict(os.environ)
    env.update({"TMPDIR": tmp, "HIPLINE_TRACE_CONVERT": converter})
    env.pop("HIPLINE_TRACE", None)
    proc = subprocess.Popen([a.stress, log, "--backend", "host"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    wait_for_handlers(proc)
    end = time.monotonic() + 120
    while not os.listdir(tmp) and time.monotonic() < end:
        time.sleep(0.01)
    check(os.listdir(tmp), "the converter never started")
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    check(proc.returncode == 143, "exit %d, expected 143\n%s" %
          (proc.returncode, stderr))
    check(not os.listdir(tmp), "temporaries left: %s" % os.listdir(tmp))
    check("interrupted" in stderr, "stderr: %r" % stderr)


def case_outputs(a):
    small = ["--workload", "random", "--iterations", "20", "--backend", "host"]
    # Unwritable paths fail before any run (no table), with exit 2.
    for args, env, needle in (
            (["--json", "/nonexistent-dir/o.json"], None, "--json"),
            (["--trace", "/nonexistent-dir/t.json"], None, "--trace"),
            (["--json", a.work], None, "directory"),
            ([], {"HIPLINE_TRACE": "/nonexistent-dir/t.json"}, "HIPLINE_TRACE")):
        proc = run(small + args, a.stress, env, expect=2)
        check(needle in proc.stderr, "%s: %r" % (args, proc.stderr))
        check("ops/s" not in proc.stdout, "%s: the run ran" % args)
    # HIPLINE_TRACE with --trace is a conflict, refused before the run.
    t = os.path.join(a.work, "t.json")
    proc = run(small + ["--trace", t], a.stress, {"HIPLINE_TRACE": t},
               expect=2)
    check("HIPLINE_TRACE" in proc.stderr, "conflict: %r" % proc.stderr)
    # HIPLINE_TRACE alone: written by the run, with events.
    if os.path.exists(t):
        os.unlink(t)
    run(small + ["--quiet"], a.stress, {"HIPLINE_TRACE": t})
    with open(t) as f:
        check(len(json.load(f)["traceEvents"]) > 0, "HIPLINE_TRACE empty")
    # A write that fails (a full disk) fails the run.
    if os.path.exists("/dev/full"):
        for args in (["--json", "/dev/full", "--quiet"],
                     ["--trace", "/dev/full", "--quiet"]):
            proc = run(small + args, a.stress, expect=1)
            check("No space" in proc.stderr, "%s: %r" % (args, proc.stderr))
        with open("/dev/full", "w") as full:
            proc = subprocess.run([a.stress] + small, stdout=full,
                                  stderr=subprocess.PIPE, text=True,
                                  timeout=240)
        check(proc.returncode == 1 and "stdout" in proc.stderr,
              "table to /dev/full: exit %d %r" % (proc.returncode,
                                                 proc.stderr))
    # Events beyond the trace's limit are counted and warned about.
    proc = run(small + ["--trace", t, "--trace-events", "10", "--quiet"],
               a.stress)
    with open(t) as f:
        data = json.load(f)
    check(len(data["traceEvents"]) == 10, "kept %d" % len(data["traceEvents"]))
    check(data["otherData"]["dropped"] > 0, "drops not counted")
    check("dropped" in proc.stderr, "drops not warned: %r" % proc.stderr)


def case_parsing(a):
    out = os.path.join(a.work, "q.json")
    # Numbers are decimal: 010 is ten queues, 0x10 an error.
    run(["--workload", "serving", "--queues", "010", "--requests", "10",
         "--json", out, "--quiet"] + SMALL, a.stress)
    (r,) = load(out)
    check(r["queues"] == 10, "--queues 010 gave %d queues" % r["queues"])
    for flag, value in (("--queues", "0x10"), ("--seed", "0x1"),
                        ("--duration", "0x1p1"), ("--aliasing", "nan")):
        run([flag, value], a.stress, expect=2)
    # --duration with --iterations: whichever ends first. A long duration
    # with few iterations ends on the iterations; a huge iteration count
    # ends on the duration (the run's own elapsed time says which).
    run(["--workload", "random", "--duration", "600", "--iterations", "5",
         "--json", out, "--quiet"], a.stress)
    (r,) = load(out)
    check(r["seconds"] < 300, "--iterations 5 did not end the run: %r" % r)
    run(["--workload", "random", "--duration", "1", "--iterations",
         "100000000", "--json", out, "--quiet"], a.stress)
    (r,) = load(out)
    check(r["seconds"] < 300 and r["ops"] < 2 * 100000000,
          "--duration 1 did not end the run: %r" % r)
    # An environment value with a newline is echoed escaped, on one line.
    proc = run(["--workload", "random"] + SMALL, a.stress,
               {"HIPLINE_BACKEND": "ho\nst"}, expect=2)
    check(len(proc.stderr.strip().splitlines()) == 1 and
          "ho\\nst" in proc.stderr, "raw newline echoed: %r" % proc.stderr)
    # A log on a pipe is read once, not sniffed away.
    csv = "".join([RMM_HEADER, "1,0:00:00.000001,allocate,0x1000,100,0\n",
                   "1,0:00:00.000002,free,0x1000,100,0\n"])
    env = dict(os.environ)
    env["TMPDIR"] = a.work
    env.pop("HIPLINE_TRACE", None)
    proc = subprocess.run([a.stress, "--log", "/dev/stdin", "--json", out,
                           "--backend", "host", "--quiet"], input=csv,
                          env=env, capture_output=True, text=True,
                          timeout=240)
    check(proc.returncode == 0, "stdin log: %d %r" % (proc.returncode,
                                                     proc.stderr))
    (r,) = load(out)
    check(r["log_events"] == 2, "stdin log events %d" % r["log_events"])
    check(not [n for n in os.listdir(a.work)
               if n.startswith("hipline-stress-")], "temporary copy left")
    # A log named like an option reaches the converter as a file name.
    converter = os.path.join(a.work, "argv-convert")
    with open(converter, "w") as f:
        f.write("#!/bin/sh\n"
                "# Writes a one-event CSV to -o when the input comes after\n"
                "# '--' (a name that looks like an option stays a name).\n"
                "[ \"$1\" = -o ] && [ \"$3\" = -- ] && [ \"$4\" = --help ] ||"
                " { echo \"bad argv: $*\" >&2; exit 3; }\n"
                "printf 'Thread,Time,Action,Pointer,Size,Stream\\n"
                "1,0:00:00.000001,allocate,0x1000,100,0\\n' > \"$2\"\n")
    os.chmod(converter, 0o755)
    with open(os.path.join(a.work, "--help"), "w") as f:
        f.write('{"traceEvents": []}\n')
    env["HIPLINE_TRACE_CONVERT"] = converter
    proc = subprocess.run([a.stress, "--log=--help", "--json", out,
                           "--backend", "host", "--quiet"], cwd=a.work,
                          env=env, capture_output=True, text=True,
                          timeout=240)
    check(proc.returncode == 0, "log named --help: %d %r" %
          (proc.returncode, proc.stderr))


def case_terminal(a):
    """stderr on a terminal: the stress tool's own alias warnings appear once
    per function (not once per run), the legend (stdout) says once that
    they are intended, the table ends with the verdict line, and no log
    line starts in the middle of the progress bar."""
    import pty
    master, slave = pty.openpty()
    env = dict(os.environ)
    env.pop("HIPLINE_TRACE", None)
    env.pop("HIPLINE_ASSUME_NO_ALIAS", None)
    proc = subprocess.Popen(
        [a.stress, "--matrix", "--workload", "serving", "--iterations", "200",
         "--backend", "host"], env=env, stdout=subprocess.PIPE,
        stderr=slave, stdin=subprocess.DEVNULL)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal.
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    stdout, _ = proc.communicate(timeout=240)
    text = b"".join(chunks).decode("utf-8", "replace")
    check(proc.returncode == 0, "exit %d\n%s" % (proc.returncode, text))
    warnings = text.count("hipline W")
    check(1 <= warnings <= 2, "%d alias warnings (one per function at most):"
          "\n%s" % (warnings, text))
    # The expected warnings are explained once, in the legend (stdout).
    check("are expected" not in text, "a note on stderr:\n%s" % text)
    check(stdout.count(b"are expected") == 1,
          "the legend does not explain the expected warnings once:\n%s"
          % stdout.decode("utf-8", "replace"))
    last = stdout.decode("utf-8", "replace").rstrip("\n").split("\n")[-1]
    check(last.startswith("Verdict: the safe path (assume_no_alias=0, "
                          "ordered) against async: serving ")
          and last.endswith("every run passed (no failure, verification "
                            "failure or use-after-free)"),
          "the last line is not the verdict: %r" % last)
    for line in text.replace("\r\n", "\n").split("\n"):
        # What precedes a log line on its terminal line is only a cleared
        # bar ("...\r\x1b[K"), never bar text.
        at = line.find("hipline W")
        if at > 0:
            before = line[:at]
            check(before.endswith("\r\x1b[K") or before.endswith("\r"),
                  "a log line starts inside the bar: %r" % line)
    check(b"Legend:" in stdout, "no legend under the table")


def case_plot_input(a):
    """hipline-plot: quotes in names never reach gnuplot as commands, and bad
    values are one-line errors."""
    if not shutil.which("gnuplot"):
        print("no gnuplot; skipping")
        return 77

    def plot(args, cwd):
        return subprocess.run([sys.executable, a.plot] + args, cwd=cwd,
                              capture_output=True, text=True, timeout=120)

    runs = [{"workload": "random", "policy": p, "ops_per_s": 10.0 * (i + 1),
             "peak_reserved_bytes": 1 << 20, "peak_used_bytes": 1 << 19}
            for i, p in enumerate(['a"b', "c'd; system('touch q-marker')"])]
    good = os.path.join(a.work, "good.json")
    with open(good, "w") as f:
        json.dump(runs, f)
    out = os.path.join(a.work, "png")
    shutil.rmtree(out, ignore_errors=True)
    prefix = "x'; system('touch p-marker'); set output 'y"
    proc = plot([good, "-o", out, "--prefix", prefix], a.work)
    check(proc.returncode == 0, "plot: %s" % proc.stderr)
    for marker in ("p-marker", "q-marker", "y"):
        check(not os.path.exists(os.path.join(a.work, marker)),
              "gnuplot ran a command from a name: %s exists" % marker)
    check(os.path.exists(os.path.join(out, prefix + "-throughput.png")),
          "the prefix was not used literally: %s" % os.listdir(out))
    # The prefix names another directory: refused.
    evil = "x'; system('touch %s/r-marker'); set output '%s/y" % (a.work,
                                                                  a.work)
    proc = plot([good, "-o", out, "--prefix", evil], a.work)
    check(proc.returncode == 2 and "--prefix" in proc.stderr,
          "prefix with '/': %d %r" % (proc.returncode, proc.stderr))
    check(not os.path.exists(os.path.join(a.work, "r-marker")), "ran")
    # Strings and non-finite values where numbers belong.
    for key, value in (("ops_per_s", "fast"), ("peak_used_bytes", None),
                       ("peak_reserved_bytes", True),
                       ("ops_per_s", float("inf")), ("ops_per_s", -1),
                       ("peak_used_bytes", [1])):
        bad = [dict(runs[0])]
        bad[0][key] = value
        path = os.path.join(a.work, "bad.json")
        with open(path, "w") as f:
            json.dump(bad, f)
        proc = plot([path, "-o", out], a.work)
        check(proc.returncode == 1 and "Traceback" not in proc.stderr and
              key in proc.stderr and len(proc.stderr.splitlines()) == 1,
              "%s=%r: %d %r" % (key, value, proc.returncode, proc.stderr))
    # A huge integer, deeply nested JSON, an output directory that cannot
    # be made or written: one-line errors, no traceback.
    path = os.path.join(a.work, "odd.json")
    texts = [json.dumps([runs[0]]).replace("10.0", "1" + "0" * 400),
             "[" * 100000 + "]" * 100000]
    for text in texts:
        with open(path, "w") as f:
            f.write(text)
        proc = plot([path, "-o", out], a.work)
        check(proc.returncode == 1 and "Traceback" not in proc.stderr and
              len(proc.stderr.splitlines()) == 1,
              "%.40s: %d %r" % (text, proc.returncode, proc.stderr))
    for bad_dir in ("/dev/null/sub", "/proc/hipline-plot-test"):
        proc = plot([good, "-o", bad_dir], a.work)
        check(proc.returncode == 1 and "Traceback" not in proc.stderr and
              bad_dir in proc.stderr and len(proc.stderr.splitlines()) == 1,
              "-o %s: %d %r" % (bad_dir, proc.returncode, proc.stderr))


BAD_VALUES = [
    ("--workload", "bogus", "random"),
    ("--alloc", "maybe", "async"),
    ("--assume-no-alias", "2", "0 or 1"),
    ("--fallback", "lazy", "device-sync"),
    ("--backend", "cuda", "hip"),
    ("--seed", "-1", "integer"),
    ("--iterations", "0", "[1,"),
    ("--iterations", "ten", "[1,"),
    ("--duration", "-3", "seconds"),
    ("--max-size", "0", "bytes"),
    ("--max-size", "12Q", "bytes"),
    ("--live-cap", "x", "bytes"),
    ("--queues", "65", "[1, 64]"),
    ("--requests", "0", "[1, 4096]"),
    ("--results", "33", "[1, 32]"),
    ("--aliasing", "1.5", "[0, 1]"),
    ("--spin", "fast", "nanoseconds"),
    ("--json", "", "path"),
    ("--trace", "", "path"),
    ("--trace-file", "", "path"),
    ("--memory-snapshot", "", "path"),
]


def case_bad_flags(a):
    for flag, value, accepted in BAD_VALUES:
        for args in ([flag, value], [flag + "=" + value]):
            proc = run(args, a.stress, expect=2)
            check(flag in proc.stderr and ("'%s'" % value) in proc.stderr and
                  accepted in proc.stderr,
                  "%s: unclear error %r" % (args, proc.stderr))
    proc = run(["--no-such-flag"], a.stress, expect=2)
    check("--no-such-flag" in proc.stderr, "unknown flag not named")
    proc = run(["--queues"], a.stress, expect=2)
    check("--queues" in proc.stderr and "value" in proc.stderr, "missing value")
    proc = run(["--checked=1"], a.stress, expect=2)
    check("--checked" in proc.stderr, "bare flag with a value")
    proc = run(["--workload", "replay"], a.stress, expect=2)
    check("log" in proc.stderr, "replay without a log")
    proc = run(["--workload", "random"] + SMALL, a.stress,
               {"HIPLINE_ASSUME_NO_ALIAS": "perhaps"}, expect=2)
    check("HIPLINE_ASSUME_NO_ALIAS" in proc.stderr, "bad env not named")
    proc = run(["--help"], a.stress)
    check("--workload" in proc.stdout, "--help")
    # getopt_long's parsing keeps these errors (exit 2, the token named):
    # names are whole (a unique prefix is no option), -x is unknown, a value
    # missing at the end, two logs.
    for args, named in ((["--que", "3"], "'--que'"),
                        (["--work=random"], "'--work'"),
                        (["-x"], "'-x'"),
                        (["--tr", "x"], "'--tr'"),
                        (["--json"], "--json"),
                        (["--quiet=yes"], "--quiet")):
        proc = run(args, a.stress, expect=2)
        check(named in proc.stderr, "%s: %r" % (args, proc.stderr))
    proc = run(["a.csv", "b.csv"], a.stress, expect=2)
    check("'b.csv'" in proc.stderr and "'a.csv'" in proc.stderr,
          "two logs: %r" % proc.stderr)
    proc = run(["--log", "a.csv", "--", "b.csv"], a.stress, expect=2)
    check("'b.csv'" in proc.stderr, "a log after --: %r" % proc.stderr)
    out = os.path.join(a.work, "same.out")
    proc = run(["--workload", "random", "--json", out, "--memory-snapshot",
                out] + SMALL, a.stress, expect=2)
    check("--memory-snapshot and --json" in proc.stderr,
          "same output twice: %r" % proc.stderr)


def case_plot(a):
    if not shutil.which("gnuplot"):
        print("no gnuplot; skipping")
        return 77
    out = os.path.join(a.work, "plot.json")
    run(["--matrix", "--workload", "random", "--json", out] + SMALL, a.stress)
    pngs = os.path.join(a.work, "png")
    shutil.rmtree(pngs, ignore_errors=True)
    proc = subprocess.run([sys.executable, a.plot, out, "-o", pngs],
                          capture_output=True, text=True, timeout=120)
    check(proc.returncode == 0, "hipline-plot failed: %s" % proc.stderr)
    files = sorted(os.listdir(pngs))
    check(len(files) >= 2, "PNGs: %s" % files)
    for name in files:
        with open(os.path.join(pngs, name), "rb") as f:
            check(f.read(8) == b"\x89PNG\r\n\x1a\n", "%s is not a PNG" % name)
    bad = subprocess.run([sys.executable, a.plot, os.path.join(a.work, "nope")],
                         capture_output=True, text=True, timeout=60)
    check(bad.returncode != 0 and "nope" in bad.stderr, "missing input")


def case_memory_counters(a):
    """--trace carries memory counter tracks (Chrome "C" events, one track per
    device and pool, args in_use_bytes and reserved_bytes): with either pool
    their peaks are the run's peaks and the last sample holds nothing in
    use."""
    for allocator in ("driver", "hipline"):
        trace = os.path.join(a.work, "trace-%s.json" % allocator)
        out = os.path.join(a.work, "result-%s.json" % allocator)
        run(["--workload", "random", "--trace", trace, "--json", out] + SMALL,
            a.stress, {"HIPLINE_ALLOCATOR": allocator})
        with open(trace) as f:
            events = json.load(f)["traceEvents"]
        with open(out) as f:
            result = json.load(f)
        memory = [e for e in events if e["name"].startswith("memory ")]
        check(memory, "%s: no memory counter events" % allocator)
        names = {e["name"] for e in memory}
        check(names == {"memory 1 (%s pool)" % allocator},
              "%s: tracks %s" % (allocator, names))
        for e in memory:
            check(e["ph"] == "C" and set(e["args"]) ==
                  {"in_use_bytes", "reserved_bytes"}, "bad event %r" % e)
        in_use = [e["args"]["in_use_bytes"] for e in memory]
        reserved = [e["args"]["reserved_bytes"] for e in memory]
        check(max(in_use) == result["peak_used_bytes"],
              "%s: counter peak %d, run peak %d" %
              (allocator, max(in_use), result["peak_used_bytes"]))
        check(0 < max(reserved) <= result["peak_reserved_bytes"],
              "%s: reserved peak %d, run %d" %
              (allocator, max(reserved), result["peak_reserved_bytes"]))
        check(in_use[-1] == 0, "%s: %d bytes in use at the end" %
              (allocator, in_use[-1]))


def snapshot_peak(snapshot):
    """The peak live bytes of device 0 of a snapshot (alloc and
    free_completed of device_traces[0])."""
    live = peak = 0
    sizes = {}
    for e in snapshot["device_traces"][0]:
        if e["action"] == "alloc":
            check(e["addr"] not in sizes, "address allocated twice: %r" % e)
            sizes[e["addr"]] = e["size"]
            live += e["size"]
            peak = max(peak, live)
        elif e["action"] == "free_completed":
            live -= sizes.pop(e["addr"])
    return peak


def check_snapshot_layout(snapshot, where):
    """PyTorch's snapshot layout: segments, device_traces of events with
    action, addr, size, stream, time_us and frames, in time order."""
    check(set(snapshot) == {"segments", "device_traces"},
          "%s: keys %s" % (where, sorted(snapshot)))
    check(snapshot["segments"] == [], "%s: %d segments live at exit" %
          (where, len(snapshot["segments"])))
    traces = snapshot["device_traces"]
    check(traces and all(traces), "%s: %d device traces, empty ones" %
          (where, len(traces)))
    for trace in traces:
        for e in trace:
            check(set(e) == {"action", "addr", "size", "stream", "time_us",
                             "frames"} and e["frames"] == [] and
                  e["action"] in ("alloc", "free_completed") and
                  e["addr"] > 0 and e["size"] > 0,
                  "%s: event %r" % (where, e))
        times = [e["time_us"] for e in trace]
        check(times == sorted(times), "%s: events out of time order" % where)


def case_memory_snapshot(a):
    """--memory-snapshot writes a PyTorch memory snapshot pickle (segments,
    device_traces with alloc/free_completed, addresses, sizes, streams); a
    replay reads it back through hipline-trace-convert with the run's peak
    live bytes, with either pool. Several devices get a trace each, several
    queues their streams."""
    import pickle
    for allocator in ("driver", "hipline"):
        env = {"HIPLINE_ALLOCATOR": allocator}
        snap = os.path.join(a.work, "snapshot-%s.pickle" % allocator)
        out = os.path.join(a.work, "run-%s.json" % allocator)
        run(["--workload", "random", "--memory-snapshot", snap, "--json", out,
             "--iterations", "300", "--backend", "host"], a.stress, env)
        with open(snap, "rb") as f:
            snapshot = pickle.load(f)
        check_snapshot_layout(snapshot, allocator)
        (r,) = load(out)
        peak = snapshot_peak(snapshot)
        check(peak == r["peak_used_bytes"], "%s: snapshot peak %d, run %d" %
              (allocator, peak, r["peak_used_bytes"]))
        # The replay converts the pickle itself (hipline-trace-convert).
        replayed = os.path.join(a.work, "replay-%s.json" % allocator)
        run(["--log", snap, "--json", replayed, "--quiet", "--backend",
             "host"], a.stress, env)
        (rr,) = load(replayed)
        check(rr["peak_live_bytes"] == peak, "%s: replay peak live %d, "
              "snapshot %d" % (allocator, rr["peak_live_bytes"], peak))
    # multistream: a device of one queue, then one of four.
    snap = os.path.join(a.work, "multistream.pickle")
    run(["--workload", "multistream", "--queues", "4", "--memory-snapshot",
         snap, "--iterations", "50", "--backend", "host"], a.stress)
    with open(snap, "rb") as f:
        snapshot = pickle.load(f)
    check_snapshot_layout(snapshot, "multistream")
    streams = [sorted({e["stream"] for e in t})
               for t in snapshot["device_traces"]]
    check(streams == [[0], [0, 1, 2, 3]], "streams per device %s" % streams)


def case_plot_memory(a):
    """hipline-plot --memory draws memory over time from a stress run's trace
    (its memory counters) and from its memory snapshot; other input is a
    one-line error."""
    if not shutil.which("gnuplot"):
        print("no gnuplot; skipping")
        return 77
    trace = os.path.join(a.work, "trace.json")
    snap = os.path.join(a.work, "snapshot.pickle")
    result = os.path.join(a.work, "result.json")
    run(["--workload", "random", "--trace", trace, "--memory-snapshot", snap,
         "--json", result] + SMALL, a.stress)
    pngs = os.path.join(a.work, "png")
    shutil.rmtree(pngs, ignore_errors=True)
    for name, source in (("trace", trace), ("snapshot", snap)):
        proc = subprocess.run([sys.executable, a.plot, "--memory", source, "-o",
                               pngs, "--prefix", name], capture_output=True,
                              text=True, timeout=120)
        check(proc.returncode == 0, "%s: %s" % (name, proc.stderr))
        out = os.path.join(pngs, name + "-memory-over-time.png")
        check(proc.stdout.strip() == out, "printed %r" % proc.stdout)
        with open(out, "rb") as f:
            check(f.read(8) == b"\x89PNG\r\n\x1a\n", "%s is not a PNG" % out)
    bad = subprocess.run([sys.executable, a.plot, "--memory", result],
                         capture_output=True, text=True, timeout=60)
    check(bad.returncode == 1 and "traceEvents" in bad.stderr and
          len(bad.stderr.strip().splitlines()) == 1,
          "a result as --memory: %d %r" % (bad.returncode, bad.stderr))
    both = subprocess.run([sys.executable, a.plot, result, "--memory", trace],
                          capture_output=True, text=True, timeout=60)
    check(both.returncode == 2, "results and --memory: %d" % both.returncode)


def case_table_width(a):
    """The default table, its notes and its legend fit a 100-column
    terminal; only the verdict, one line that scripts grep, may be longer.
    --wide prints every column (the JSON has every counter)."""
    width = 100
    csv = os.path.join(a.work, "width.csv")
    with open(csv, "w") as f:
        f.write("Thread,Time,Action,Pointer,Size,Stream\n"
                "1,0:00:00.000001,allocate,0x1000,1000,0x1\n"
                "1,0:00:00.000002,free,0x1000,1000,0x1\n")
    for args in (["--matrix"] + SMALL, [csv, "--backend", "host"]):
        proc = run(args, a.stress)
        lines = proc.stdout.rstrip("\n").split("\n")
        check(lines[-1].startswith("Verdict: "), "no verdict last")
        wide = [l for l in lines[:-1] if len(l) > width]
        check(not wide, "%s: %d line(s) over %d columns:\n%s" %
              (" ".join(args), len(wide), width, "\n".join(wide)))
        check("Legend:" in proc.stdout and "--wide" in proc.stdout,
              "the legend does not point at --wide")
    check("reserved/live" in proc.stdout and "free slabs" in proc.stdout,
          "the replay's notes are not in the compact table")
    proc = run(["--wide", "--workload", "serving"] + SMALL, a.stress)
    header = [l for l in proc.stdout.split("\n") if l.startswith("workload")]
    check(len(header) == 1, "no header in --wide")
    for column in ("alloc", "no_alias", "fallback", "ops", "secs", "p50_us",
                   "p99_us", "used", "reserved", "async", "sync", "alias",
                   "fb_rel", "vfail", "uaf", "thr/asyn", "res/asyn"):
        check(column in header[0].split(), "--wide lacks %s" % column)


def case_tp(a):
    """--workload tp --devices 4 on 4 host devices: peers, then every pair
    unreachable (staged); both verify, keep reserved <= 1.1 x live per
    device, and gather the same bytes."""
    runs = {}
    for name, peers in (("peer", "all=on"), ("staged", "all=off")):
        out = os.path.join(a.work, "tp-%s.json" % name)
        run(["--workload", "tp", "--devices", "4", "--backend", "host",
             "--iterations", "30", "--json", out, "--quiet"], a.stress,
            {"HIPLINE_HOST_DEVICES": "4", "HIPLINE_HOST_PEERS": peers})
        with open(out) as f:
            r = json.load(f)
        check(r["steps"] == 30, "%s: %d steps" % (name, r["steps"]))
        check(r["verify_failures"] == 0 and r["use_after_free"] == 0,
              "%s: %d verification failures, %d use-after-free" %
              (name, r["verify_failures"], r["use_after_free"]))
        for d in r["per_device"]:
            check(d["peak_live_bytes"] > 0, "%s: device %d no live bytes" %
                  (name, d["device"]))
            check(d["peak_reserved_bytes"] <= 1.1 * d["peak_live_bytes"],
                  "%s: device %d reserved %d > 1.1 x live %d" %
                  (name, d["device"], d["peak_reserved_bytes"],
                   d["peak_live_bytes"]))
        check(r["cross_device_waits"] > 0, "%s: no cross-device waits" % name)
        runs[name] = r
    # 4 devices x 3 shards from the others x 30 steps.
    check(runs["peer"]["peer_copies"] == 360 and
          runs["peer"]["staged_copies"] == 0,
          "peer run: %d peer, %d staged copies" %
          (runs["peer"]["peer_copies"], runs["peer"]["staged_copies"]))
    check(runs["staged"]["staged_copies"] == 360 and
          runs["staged"]["peer_copies"] == 0,
          "staged run: %d peer, %d staged copies" %
          (runs["staged"]["peer_copies"], runs["staged"]["staged_copies"]))
    check(runs["peer"]["digest"] == runs["staged"]["digest"],
          "digests differ: %s (peer) and %s (staged)" %
          (runs["peer"]["digest"], runs["staged"]["digest"]))
    # More devices than the backend has is a clear error.
    bad = run(["--workload", "tp", "--devices", "4", "--backend", "host"],
              a.stress, {"HIPLINE_HOST_DEVICES": "2"}, expect=1)
    check("HIPLINE_HOST_DEVICES" in bad.stderr, "devices error: %r" %
          bad.stderr)


CASES = {
    "tp": case_tp,
    "env-no-alias-0": case_env_no_alias_0,
    "no-alias-1": case_no_alias_1,
    "matrix-json": case_matrix_json,
    "checked": case_checked,
    "escape": case_escape,
    "replay-traces": case_replay_traces,
    "replay-csv": case_replay_csv,
    "malformed-log": case_malformed_log,
    "bad-flags": case_bad_flags,
    "plot": case_plot,
    "silent-failures": case_silent_failures,
    "interrupt": case_interrupt,
    "interrupt-convert": case_interrupt_convert,
    "outputs": case_outputs,
    "parsing": case_parsing,
    "plot-input": case_plot_input,
    "terminal": case_terminal,
    "memory-counters": case_memory_counters,
    "memory-snapshot": case_memory_snapshot,
    "plot-memory": case_plot_memory,
    "table-width": case_table_width,
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--stress", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--traces")
    p.add_argument("--plot")
    p.add_argument("case", choices=sorted(CASES))
    a = p.parse_args()
    a.work = os.path.join(a.work, a.case)
    os.makedirs(a.work, exist_ok=True)
    try:
        rc = CASES[a.case](a)
    except Failure as e:
        print("FAIL %s: %s" % (a.case, e), file=sys.stderr)
        return 1
    return rc or 0


if __name__ == "__main__":
    sys.exit(main())
