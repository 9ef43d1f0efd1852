# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""The package's public surface: __all__, docstrings, type hints, reprs.

public_api_problems() walks the package and every module in it: each
__all__ lists only names the module has, and every public name the module
defines (a private module's names, _lib's structs, are the package's own
business); every public class, function, method and property has a
docstring; every public function and method annotates its parameters and
its return. The test runs it on hipline and, so that it is known to catch
what it looks for, on a small package with one of each fault.
"""

import asyncio
import gc
import importlib
import inspect
import os
import pkgutil
import sys
import tempfile
import textwrap
import unittest

import hipline

# Names a module may hold without listing them: the package's submodules
# and its version.
_DUNDER_OK = {"__version__"}


def _modules(package):
    yield package
    for info in pkgutil.iter_modules(package.__path__):
        yield importlib.import_module(package.__name__ + "." + info.name)


def _own(module, obj):
    """True when |obj| is defined in |module| (not imported into it)."""
    return getattr(obj, "__module__", None) == module.__name__


def _members(cls):
    """(name, raw attribute) of the public methods and properties |cls|
    and its bases from the same package define, and of its metaclass."""
    seen = set()
    owners = [c for c in inspect.getmro(cls)
              if c.__module__.split(".")[0] == cls.__module__.split(".")[0]]
    meta = type(cls)
    if meta.__module__.split(".")[0] == cls.__module__.split(".")[0]:
        owners.append(meta)
    for owner in owners:
        for name, attr in vars(owner).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            yield name, attr


def _callable_of(attr):
    if isinstance(attr, (staticmethod, classmethod)):
        return attr.__func__
    if isinstance(attr, property):
        return attr.fget
    return attr if inspect.isfunction(attr) else None


def _annotation_problems(where, fn):
    problems = []
    sig = inspect.signature(fn)
    for p in sig.parameters.values():
        if p.name in ("self", "cls"):
            continue
        if p.annotation is inspect.Parameter.empty:
            problems.append("%s: parameter %r has no type hint" %
                            (where, p.name))
    if sig.return_annotation is inspect.Signature.empty:
        problems.append("%s: no return type hint" % where)
    return problems


def _class_problems(where, cls):
    problems = []
    if not inspect.getdoc(cls):
        problems.append("%s: no docstring" % where)
    is_enum = isinstance(cls, type) and issubclass(cls, __import__(
        "enum").Enum)
    for name, attr in _members(cls):
        fn = _callable_of(attr)
        if fn is None:
            continue  # Data: enum members, dataclass fields, constants.
        if is_enum:
            continue
        what = "%s.%s" % (where, name)
        if not (attr.__doc__ if isinstance(attr, property) else fn.__doc__):
            problems.append("%s: no docstring" % what)
        problems += _annotation_problems(what, fn)
    init = vars(cls).get("__init__")
    if inspect.isfunction(init):
        problems += _annotation_problems("%s.__init__" % where, init)
    return problems


def public_api_problems(package):
    """Every fault of |package|'s public surface, as readable lines."""
    problems = []
    for module in _modules(package):
        mname = module.__name__
        if not inspect.getdoc(module):
            problems.append("%s: no module docstring" % mname)
        exported = getattr(module, "__all__", None)
        if exported is None:
            problems.append("%s: no __all__" % mname)
            continue
        for name in exported:
            if not hasattr(module, name):
                problems.append("%s.__all__ lists %r, which it does not have"
                                % (mname, name))
        private = mname.rsplit(".", 1)[-1].startswith("_")
        for name, obj in vars(module).items():
            if private or name.startswith("_") or name in exported:
                continue
            if inspect.ismodule(obj) and obj.__name__.startswith(
                    package.__name__ + "."):
                continue  # A submodule: reached through the walk.
            if module is package or _own(module, obj):
                problems.append("%s.%s is public but not in __all__" %
                                (mname, name))
        for name in exported:
            obj = getattr(module, name, None)
            where = "%s.%s" % (mname, name)
            if module is not package and not _own(module, obj):
                continue  # Re-exported: checked where it is defined.
            if inspect.isclass(obj):
                problems += _class_problems(where, obj)
            elif inspect.isfunction(obj):
                if not obj.__doc__:
                    problems.append("%s: no docstring" % where)
                problems += _annotation_problems(where, obj)
    return problems


_FAULTY = {
    "__init__.py": '''
        """A package with one fault of each kind."""
        import os
        from .part import Good, missing_doc
        __all__ = ["Good", "missing_doc", "not_there"]
        ''',
    "part.py": '''
        """Its module."""
        __all__ = ["Good", "missing_doc"]
        class Good:
            """Documented."""
            def method(self, x: int) -> int:
                return x
            @property
            def value(self) -> int:
                """Documented."""
                return 1
            def untyped(self, y):
                """Documented."""
        def missing_doc() -> None:
            pass
        def unlisted() -> None:
            """Documented but not in __all__."""
        ''',
}


class PublicApiTest(unittest.TestCase):
    def test_hipline_has_no_problems(self):
        problems = public_api_problems(hipline)
        self.assertEqual(problems, [], "\n" + "\n".join(problems))

    def test_the_walk_finds_each_fault(self):
        with tempfile.TemporaryDirectory() as root:
            pkg = os.path.join(root, "hl_faulty_pkg")
            os.mkdir(pkg)
            for name, text in _FAULTY.items():
                with open(os.path.join(pkg, name), "w") as f:
                    f.write(textwrap.dedent(text))
            sys.path.insert(0, root)
            try:
                problems = public_api_problems(
                    importlib.import_module("hl_faulty_pkg"))
            finally:
                sys.path.remove(root)
                for name in list(sys.modules):
                    if name.startswith("hl_faulty_pkg"):
                        del sys.modules[name]
        text = "\n".join(problems)
        for expected in (
                "hl_faulty_pkg.__all__ lists 'not_there'",
                "hl_faulty_pkg.os is public but not in __all__",
                "hl_faulty_pkg.part.unlisted is public but not in __all__",
                "hl_faulty_pkg.part.missing_doc: no docstring",
                "hl_faulty_pkg.part.Good.method: no docstring",
                "hl_faulty_pkg.part.Good.untyped: parameter 'y' has no type "
                "hint",
                "hl_faulty_pkg.part.Good.untyped: no return type hint"):
            self.assertIn(expected, text)
        self.assertNotIn("Good.value", text)

    def test_star_import_and_dir_hold_only_hipline_names(self):
        namespace = {}
        exec("from hipline import *", namespace)
        namespace.pop("__builtins__")
        self.assertEqual(sorted(namespace), sorted(hipline.__all__))
        submodules = {info.name for info in
                      pkgutil.iter_modules(hipline.__path__)}
        for name in dir(hipline):
            if name.startswith("__") or name in submodules:
                continue
            self.assertIn(name, hipline.__all__)
        for leaked in ("ctypes", "byref", "asyncio", "Optional", "c_void_p",
                       "lib", "threading", "weakref"):
            self.assertNotIn(leaked, dir(hipline))


class ReprTest(unittest.TestCase):
    def setUp(self):
        self.baseline = hipline.live_device_count()

    def tearDown(self):
        gc.collect()
        self.assertEqual(hipline.live_device_count(), self.baseline)

    def test_reprs_say_what_and_closed(self):
        dev = hipline.Device("host")
        target = dev.properties.target
        self.assertRegex(repr(dev), r"^<hipline\.Device 'host' ordinal=0 "
                         r"target=%r name='[^']*'>$" % target)
        q = dev.create_queue()
        self.assertRegex(repr(q), r"^<hipline\.Queue id=\d+ on host:0, "
                         r"submitted 0, ok>$")
        buf = q.alloca(4096)
        buf.ready.wait(30)
        self.assertRegex(repr(q), r"submitted 1, ok>$")
        self.assertRegex(repr(buf), r"^<hipline\.Buffer 4096 bytes at offset "
                         r"0 of root \d+ \(async\) on host:0>$")
        view = buf.subview(64, 128)
        self.assertRegex(repr(view), r"^<hipline\.Buffer 128 bytes at offset "
                         r"64 of root %d " % buf.root_id)
        sem = hipline.Semaphore(7)
        self.assertEqual(repr(sem), "<hipline.Semaphore value=7>")
        fence = sem.at(9)
        self.assertEqual(repr(fence), "<hipline.Fence 1 pair, pending>")
        sem.signal(9)
        self.assertEqual(repr(fence), "<hipline.Fence 1 pair, reached>")
        fence.insert(hipline.Semaphore(0), 0)
        self.assertEqual(repr(fence), "<hipline.Fence 2 pairs, reached>")
        sem.fail(hipline.StatusCode.CANCELLED, "stop")
        self.assertEqual(repr(sem), "<hipline.Semaphore failed CANCELLED>")
        self.assertEqual(repr(fence), "<hipline.Fence 2 pairs, failed "
                         "CANCELLED>")
        fn = hipline.Function.lookup("hipline.clone")
        self.assertEqual(repr(fn), "<hipline.Function 'hipline.clone'>")
        inv = hipline.ProgramInvocation(fn, q, [buf])
        self.assertRegex(repr(inv), r"^<hipline\.ProgramInvocation "
                         r"'hipline.clone' on queue \d+, not invoked>$")
        inv.invoke()
        self.assertRegex(repr(inv), r", invoked>$")
        (clone,) = asyncio.run(_await(inv))
        self.assertRegex(repr(hipline.BufferArg(buf, "r", 8, 16)),
                         r"^BufferArg\(<hipline\.Buffer .*>, access='r', "
                         r"offset=8, length=16\)$")
        self.assertEqual(repr(hipline.Scalar.u32(5)),
                         "Scalar(bits=0x5, size=4)")
        q.dealloca(buf).wait(30)
        self.assertRegex(repr(buf), r"on host:0, freed>$")
        q.dealloca(clone).wait(30)
        handles = [inv, fn, clone, view, buf, fence, sem, q, dev]
        for h in handles:
            h.close()
            self.assertEqual(repr(h), "<hipline.%s closed>" %
                             type(h).__name__)

    def test_queue_failure_shows(self):
        with hipline.Device("host") as dev, dev.create_queue() as q:
            gate = hipline.Semaphore(0)
            buf = q.alloca(64, wait=gate.at(1))
            gate.fail(hipline.StatusCode.ABORTED, "no")
            with self.assertRaises(hipline.AbortedError):
                buf.ready.wait(30)
            try:
                q.check()
                state = "ok"
            except hipline.Error as e:
                state = "failed %s" % e.code.name
            self.assertTrue(repr(q).endswith(", %s>" % state), repr(q))
            for h in (buf, gate):
                h.close()


async def _await(inv):
    return await inv


if __name__ == "__main__":
    unittest.main()
