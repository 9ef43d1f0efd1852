# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""assume_no_alias as shortfin spells it, with the C API's precedence:
the process-wide value (API or HIPLINE_ASSUME_NO_ALIAS), when set, overrides
every invocation's own value."""

import json
import os
import subprocess
import sys
import textwrap
import unittest

import hipline
from hipline import ProgramInvocation

CHILD = textwrap.dedent("""
    import json, hipline
    from hipline import ProgramInvocation as PI
    out = {}
    try:
        out["global"] = PI.global_assume_no_alias
        out["source"] = PI.global_assume_no_alias_source
        with hipline.Device("host") as dev, dev.create_queue() as q:
            fn = hipline.Function("child.noop", lambda *a: None)
            inv = PI(fn, q)
            inv.assume_no_alias = True
            e = inv.effective_assume_no_alias
            out["effective"] = [e.value, e.source]
            PI.global_assume_no_alias = True   # The API replaces the env.
            e = inv.effective_assume_no_alias
            out["after_api"] = [e.value, e.source,
                                PI.global_assume_no_alias_source]
            PI.global_assume_no_alias = None   # Unset clears the env too.
            e = inv.effective_assume_no_alias
            out["after_unset"] = [e.value, e.source,
                                  PI.global_assume_no_alias]
            inv.close(); fn.close()
    except hipline.Error as err:
        out["error"] = [err.code.name, err.message]
    print(json.dumps(out))
""")


def run_child(value):
    env = dict(os.environ)
    env.pop("HIPLINE_ASSUME_NO_ALIAS", None)
    if value is not None:
        env["HIPLINE_ASSUME_NO_ALIAS"] = value
    p = subprocess.run([sys.executable, "-c", CHILD], env=env,
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise AssertionError("child failed (%d): %s" % (p.returncode,
                                                       p.stderr))
    return json.loads(p.stdout.strip().splitlines()[-1])


class InProcessTest(unittest.TestCase):
    def setUp(self):
        self.saved = ProgramInvocation.global_assume_no_alias
        ProgramInvocation.global_assume_no_alias = None
        self.dev = hipline.Device("host")
        self.q = self.dev.create_queue()
        self.fn = hipline.Function("test.noop", lambda *a: None)

    def tearDown(self):
        ProgramInvocation.global_assume_no_alias = self.saved
        for h in (self.fn, self.q, self.dev):
            h.close()

    def test_per_invocation_when_unset(self):
        self.assertIsNone(ProgramInvocation.global_assume_no_alias)
        self.assertIsNone(ProgramInvocation.global_assume_no_alias_source)
        with ProgramInvocation(self.fn, self.q) as inv:
            self.assertIs(inv.assume_no_alias, True)  # The default.
            self.assertEqual(inv.effective_assume_no_alias,
                             hipline.AssumeNoAlias(True, "invocation"))
            inv.assume_no_alias = False
            self.assertIs(inv.assume_no_alias, False)
            self.assertEqual(inv.effective_assume_no_alias,
                             hipline.AssumeNoAlias(False, "invocation"))

    def test_global_overrides_both_ways(self):
        with ProgramInvocation(self.fn, self.q) as a, \
                ProgramInvocation(self.fn, self.q) as b:
            a.assume_no_alias = True
            b.assume_no_alias = False
            for g in (False, True):
                ProgramInvocation.global_assume_no_alias = g
                self.assertIs(ProgramInvocation.global_assume_no_alias, g)
                self.assertEqual(
                    ProgramInvocation.global_assume_no_alias_source, "api")
                for inv in (a, b):
                    self.assertEqual(inv.effective_assume_no_alias,
                                     hipline.AssumeNoAlias(g, "api"))
            # The invocation keeps its own value underneath.
            self.assertEqual((a.assume_no_alias, b.assume_no_alias),
                             (True, False))
            ProgramInvocation.global_assume_no_alias = None
            self.assertEqual(b.effective_assume_no_alias,
                             hipline.AssumeNoAlias(False, "invocation"))

    def test_global_decides_the_import(self):
        keep = []

        def cached(queue, args, wait, signal):
            out = queue.alloca(16, wait=wait)
            queue.barrier(wait=out.ready, signal=signal)
            keep.append(out)
            return out

        fn = hipline.Function("test.cached.global", cached, results=1)
        ProgramInvocation.global_assume_no_alias = False
        before = self.dev.invocation_stats()
        with ProgramInvocation(fn, self.q) as inv:  # Own value: True.
            for r in inv.invoke().results:
                r.close()
        after = self.dev.invocation_stats()
        self.assertEqual(after.sync_imports - before.sync_imports, 1)
        self.assertEqual(after.async_imports - before.async_imports, 0)
        self.q.wait_idle(timeout=60)
        for b in keep:
            b.close()
        fn.close()

    def test_bad_values(self):
        with self.assertRaises(hipline.InvalidArgumentError):
            ProgramInvocation.global_assume_no_alias = 1
        with ProgramInvocation(self.fn, self.q) as inv:
            with self.assertRaises(hipline.InvalidArgumentError):
                inv.assume_no_alias = "yes"


class EnvironmentTest(unittest.TestCase):
    def test_unset(self):
        out = run_child(None)
        self.assertIsNone(out["global"])
        self.assertEqual(out["effective"], [True, "invocation"])

    def test_env_false_overrides_invocation(self):
        for value in ("0", "false", "off"):
            with self.subTest(value=value):
                out = run_child(value)
                self.assertIs(out["global"], False)
                self.assertEqual(out["source"], "environment")
                self.assertEqual(out["effective"], [False, "environment"])
                self.assertEqual(out["after_api"], [True, "api", "api"])
                self.assertEqual(out["after_unset"],
                                 [True, "invocation", None])

    def test_env_true(self):
        out = run_child("1")
        self.assertEqual((out["global"], out["source"]), (True, "environment"))
        self.assertEqual(out["effective"], [True, "environment"])

    def test_env_invalid_is_an_error_naming_it(self):
        out = run_child("maybe")
        self.assertEqual(out["error"][0], "INVALID_ARGUMENT")
        self.assertIn("HIPLINE_ASSUME_NO_ALIAS", out["error"][1])
        self.assertIn("maybe", out["error"][1])


if __name__ == "__main__":
    unittest.main()
