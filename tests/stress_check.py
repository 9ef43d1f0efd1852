#!/usr/bin/env python3
"""Checks of build/bin/hipline-stress, one case per ctest.

Usage: stress_check.py --stress BIN --work DIR [--traces DIR] [--plot TOOL] CASE

Cases:
  env-no-alias-0   HIPLINE_ASSUME_NO_ALIAS=0 serving: async_imports == 0,
                   sync_imports > 0, source "environment".
  no-alias-1       --assume-no-alias 1 serving: async_imports > 0.
  matrix-json      a small --matrix run: one JSON object per run, all fields,
                   no verification failure or use-after-free.
  checked          random and serving in checked mode: no use-after-free.
  replay-traces    both traces in ../shared/data/traces, end to end (77 when
                   absent): peak reserved and peak live reported.
  replay-csv       a small RMM CSV replays; its peak live is exact.
  malformed-log    a bad line names the file and the line number.
  bad-flags        every flag's bad value exits 2 naming flag and value.
  plot             tools/hipline-plot writes PNGs (77 without gnuplot).
  silent-failures  failed allocations (faults, the pool limit) and failed
                   submissions end the run with exit 1 naming the first
                   error; nothing unverified counts as verified.
Exit 0 on success, 1 on failure, 77 to skip.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

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
    check(len(runs) == 12, "expected 12 runs, got %d" % len(runs))
    policies = {(r["workload"], r["policy"]) for r in runs}
    check(len(policies) == 12, "duplicate runs")
    for r in runs:
        check(r["verify_failures"] == 0 and r["use_after_free"] == 0,
              "%s/%s failed verification" % (r["workload"], r["policy"]))
        check(r["ops"] > 0 and r["ops_per_s"] > 0, "no ops")
        if r["workload"] != "multistream":  # It only allocates and spins.
            check(r["verified"] > 0, "%s/%s verified nothing" %
                  (r["workload"], r["policy"]))
    fb = {r["policy"]: r for r in runs if r["workload"] == "serving"}
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
    run([csv, "--json", out, "--backend", "host"], a.stress)
    (r,) = load(out)
    check(r["workload"] == "replay", "positional log did not mean replay")
    check(r["peak_live_bytes"] == 4000, "peak live %d" % r["peak_live_bytes"])
    check(r["log_events"] == 5 and r["ops"] == 5, "events")


def case_malformed_log(a):
    csv = os.path.join(a.work, "bad.csv")
    with open(csv, "w") as f:
        f.write("Thread,Time,Action,Pointer,Size,Stream\n"
                "1,0:00:00.000001,allocate,0x1000,1000,0x1\n"
                "1,0:00:00.000002,allocate,0x2000,abc,0x1\n")
    proc = run(["--log", csv, "--backend", "host"], a.stress, expect=1)
    check("bad.csv:3" in proc.stderr,
          "error does not name file and line: %r" % proc.stderr)
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


CASES = {
    "env-no-alias-0": case_env_no_alias_0,
    "no-alias-1": case_no_alias_1,
    "matrix-json": case_matrix_json,
    "checked": case_checked,
    "replay-traces": case_replay_traces,
    "replay-csv": case_replay_csv,
    "malformed-log": case_malformed_log,
    "bad-flags": case_bad_flags,
    "plot": case_plot,
    "silent-failures": case_silent_failures,
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
