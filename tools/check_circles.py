#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0 WITH LLVM-exception
"""Finds circles of files in runtime/: A uses B when A names a function or
global that B defines (a .c file's non-static definitions; a header's
static inline functions and macros). Declarations do not count: a header
that declares what a .c file defines does not use it. A header and the .c
file of the same name in the same folder are one module: their uses of each
other are no circle. Prints every circle (a strongly
connected component of more than one unit) and exits 1 when one is not in
the allowed list: --allow "a b c" (exactly these files, as printed) or
--allow-folder F/ (any circle of files all inside folder F/).

Usage: check_circles.py ROOT [--allow "file file ..."]... [--allow-folder F/]...
"""
import os
import re
import sys

IDENT = re.compile(r"[A-Za-z_]\w*")
KEYWORDS = {"if", "for", "while", "switch", "return", "sizeof", "defined"}


def strip(text):
    """Removes comments and the contents of strings and characters."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(\\.|[^"\\\n])*"', '""', text)
    return re.sub(r"'(\\.|[^'\\\n])*'", "''", text)


def definitions(path, code):
    """Names that |path| defines for other files to use."""
    names = set()
    header = path.endswith(".h")
    if header:
        names.update(re.findall(r"^\s*#\s*define\s+([A-Za-z_]\w*)", code, re.M))
    # Top-level function definitions: a name and its parameters, then '{'.
    depth = 0
    i = 0
    start = 0
    while i < len(code):
        c = code[i]
        if c == "#" and (i == 0 or code[i - 1] == "\n"):
            j = i
            while True:  # Skip the directive and its continuations.
                j = code.find("\n", j)
                if j < 0 or code[j - 1] != "\\":
                    break
                j += 1
            i = len(code) if j < 0 else j
            start = i
            continue
        if c == "{":
            if depth == 0:
                head = code[start:i]
                m = re.search(r"([A-Za-z_]\w*)\s*\([^()]*(\([^()]*\)[^()]*)*\)\s*$",
                              head)
                is_static = re.match(r"\s*static\b", head)
                inline = re.search(r"\binline\b", head)
                if m and m.group(1) not in KEYWORDS and "=" not in head:
                    if (header and inline) or (not header and not is_static):
                        names.add(m.group(1))
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                start = i + 1
        elif c == ";" and depth == 0:
            decl = code[start:i]
            if (not header and "(" not in decl and "=" in decl
                    and not re.match(r"\s*(static|typedef|extern)\b", decl)):
                m = re.search(r"([A-Za-z_]\w*)\s*(\[[^\]]*\])?\s*=", decl)
                if m:
                    names.add(m.group(1))
            start = i + 1
        i += 1
    return names


def used_names(code):
    """Identifiers |code| uses: top-level declarations (prototypes, externs)
    name what others define and are left out."""
    out = []
    depth = 0
    start = 0
    for i, c in enumerate(code):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == ";" and depth == 0:
            stmt = code[start:i]
            last = max(stmt.rfind("}"), stmt.rfind("#"))
            tail = stmt[last + 1:] if last >= 0 else stmt
            if "(" in tail and "=" not in tail or re.match(r"\s*extern\b", tail):
                # A prototype or extern: keep what precedes it only.
                out.append(stmt[:last + 1] if last >= 0 else "")
            else:
                out.append(stmt)
            start = i + 1
    out.append(code[start:])
    return set(IDENT.findall(" ".join(out)))


def unit(root, path):
    return os.path.relpath(path, root)


def pair(a, b):
    """A header and the .c file of the same name: one module, no circle."""
    return os.path.splitext(a)[0] == os.path.splitext(b)[0]


def main():
    args = sys.argv[1:]
    root = args[0]
    allowed = []
    folders = []
    i = 1
    while i < len(args):
        if args[i] == "--allow":
            allowed.append(" ".join(sorted(args[i + 1].split())))
            i += 2
        elif args[i] == "--allow-folder":
            folders.append(args[i + 1])
            i += 2
        else:
            sys.exit("unknown argument " + args[i])
    files = []
    for d, _, fs in os.walk(root):
        for f in fs:
            if f.endswith((".c", ".h")):
                files.append(os.path.join(d, f))
    code = {p: strip(open(p, encoding="utf-8").read()) for p in files}
    owner = {}
    for p in files:
        for name in definitions(p, code[p]):
            owner.setdefault(name, set()).add(unit(root, p))
    edges = {}
    for p in files:
        u = unit(root, p)
        out = edges.setdefault(u, set())
        for tok in used_names(code[p]):
            for v in owner.get(tok, ()):
                if v != u and not pair(u, v):
                    out.add(v)
    # Tarjan's strongly connected components.
    index, low, stack, on, comps = {}, {}, [], set(), []
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    bad = 0
    for comp in sorted(comps):
        key = " ".join(comp)
        ok = key in allowed or any(
            all(v.startswith(f) for v in comp) for f in folders)
        bad += not ok
        print(("allowed: " if ok else "CIRCLE: ") + key)
        if not ok:
            for v in comp:
                uses = sorted(w for w in edges[v] if w in comp)
                print("  %s uses %s" % (v, ", ".join(uses)))
    for key in allowed:
        if key not in (" ".join(c) for c in comps):
            print("allowed but gone (remove it from the list): " + key)
            bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
