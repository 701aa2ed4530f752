#!/usr/bin/env bash
# No import cycles between the files of a crate: reads every `.rs` file under each
# crate's `src/`, collects the files it imports from (`use crate::`, `use super::`,
# `use self::`, a child module, and the same paths written inline in code), follows
# `pub use` re-exports to the file that defines the name, and reports every cycle
# (two files importing each other, directly or through others). An inherent
# `impl Type` in another file than Type's counts as Type's file importing it (its
# methods live there), unless that file is a submodule of Type's or defines a Type
# of its own. Test code is left
# out: inline `#[cfg(test)] mod ... { }` blocks and files declared under `#[cfg(test)]`.
# Run by scripts/test.sh.
#
#   scripts/check-module-cycles.sh                     # every crate of the workspace
#   scripts/check-module-cycles.sh path/to/crate ...   # some crates
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
  # Every workspace member (Cargo.toml's `members`), so a new crate is checked too.
  mapfile -t members < <(python3 -c 'import tomllib; print("\n".join(tomllib.load(open("Cargo.toml", "rb"))["workspace"]["members"]))')
  [ "${#members[@]}" -gt 0 ] || { echo "error: no workspace member found in Cargo.toml" >&2; exit 2; }
  set -- "${members[@]}"
fi
exec python3 - "$@" <<'PY'
import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip(text):
    """Drops comments and string literals (doc links name modules too)."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r'"(?:\\.|[^"\\])*"', '""', text)
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def without_tests(text):
    """Drops inline `#[cfg(test)] mod name { ... }` blocks."""
    out, i = [], 0
    pattern = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub\S*\s+)?mod\s+" + IDENT + r"\s*\{")
    while True:
        m = pattern.search(text, i)
        if not m:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:m.start()])
        depth, j = 1, m.end()
        while j < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
        i = j


def expand(tree):
    """`a::{b, c::{d, e as f}, g::*}` -> [[a, b], [a, c, d], [a, c, e], [a, g]]."""
    tokens = re.findall(IDENT + r"|::|[{},*]", tree)

    def parse(k, prefix):
        """One use tree from token k; returns (paths, next k)."""
        path = list(prefix)
        while k < len(tokens):
            tok = tokens[k]
            if tok == "{":
                paths, k = [], k + 1
                while tokens[k] != "}":
                    sub, k = parse(k, path)
                    paths.extend(sub)
                    if tokens[k] == ",":
                        k += 1
                return paths, k + 1
            if tok == "*":
                return [path], k + 1
            if tok == "as":
                return [path], k + 2
            if tok == "::":
                k += 1
                continue
            if tok in (",", "}"):
                break
            path.append(tok)
            k += 1
        return [path], k

    return [p for p in parse(0, [])[0] if p]


class Crate:
    def __init__(self, root):
        self.src = os.path.join(root, "src")
        self.files = {}  # module path (tuple) -> file
        for dirpath, _, names in os.walk(self.src):
            for name in names:
                if name.endswith(".rs"):
                    path = os.path.join(dirpath, name)
                    rel = os.path.relpath(path, self.src)[:-3].split(os.sep)
                    if rel == ["lib"] or rel == ["main"]:
                        mod = ()
                    elif rel[-1] == "mod":
                        mod = tuple(rel[:-1])
                    else:
                        mod = tuple(rel)
                    self.files[mod] = path
        self.text = {m: open(p).read() for m, p in self.files.items()}
        self.tests = self.test_files()
        self.code = {m: without_tests(strip(t)) for m, t in self.text.items()}
        self.children = {m: set() for m in self.files}
        for m in self.files:
            if m:
                self.children.setdefault(m[:-1], set()).add(m[-1])
        self.reexports = {m: self.pub_uses(m) for m in self.files}

    def test_files(self):
        tests = set()
        decl = re.compile(r"#\[cfg\(test\)\]\s*(#\[path\s*=\s*\"([^\"]+)\"\]\s*)?mod\s+(" + IDENT + r")\s*;")
        for m, text in self.text.items():
            base = os.path.dirname(self.files[m])
            for d in decl.finditer(text):
                if d.group(2):
                    target = os.path.normpath(os.path.join(base, d.group(2)))
                    tests.update(k for k, p in self.files.items() if os.path.normpath(p) == target)
                else:
                    tests.add(m + (d.group(3),))
        return {t for t in tests if t in self.files}

    def resolve_start(self, mod, path):
        """The absolute module path of `path` as written in `mod`, or None (external)."""
        head = path[0]
        if head == "crate":
            return list(path[1:])
        if head == "self":
            return list(mod) + list(path[1:])
        if head == "super":
            base = list(mod)
            while path and path[0] == "super":
                base = base[:-1]
                path = path[1:]
            return base + list(path)
        if head in self.children.get(mod, ()):
            return list(mod) + list(path)
        return None

    def target(self, absolute, seen=()):
        """The file defining the item at `absolute`, following `pub use` re-exports."""
        k = len(absolute)
        while k > 0 and tuple(absolute[:k]) not in self.files:
            k -= 1
        mod = tuple(absolute[:k])
        rest = absolute[k:]
        if rest and (mod, rest[0]) not in seen:
            again = self.reexports.get(mod, {}).get(rest[0])
            if again is not None:
                return self.target(again + rest[1:], seen + ((mod, rest[0]),))
        return mod

    def pub_uses(self, mod):
        found = {}
        code = without_tests(strip(self.text[mod]))
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", code):
            for p in expand(m.group(1)):
                start = self.resolve_start(mod, p)
                if start is not None:
                    found[p[-1]] = start
        return found

    def edges(self):
        graph = {m: set() for m in self.files if m not in self.tests}
        for mod in graph:
            code = self.code[mod]
            paths = []
            for m in re.finditer(r"\buse\s+([^;]+);", code):
                paths.extend(expand(m.group(1)))
            uses_removed = re.sub(r"\buse\s+[^;]+;", "", code)
            for m in re.finditer(r"(?<![A-Za-z0-9_:])((?:" + IDENT + r"::)+" + IDENT + ")", uses_removed):
                paths.append(m.group(1).split("::"))
            for p in paths:
                start = self.resolve_start(mod, p)
                if start is None:
                    continue
                t = self.target(start)
                if t != mod and t in graph:
                    graph[mod].add(t)
        return graph

    def impl_edges(self, graph):
        """An inherent `impl Type` outside Type's file holds part of the type: Type's
        file depends on it (unless it is a submodule of Type's file, the usual way to
        split one type's methods while its fields stay private)."""
        defined = {}
        for mod, code in self.code.items():
            for m in re.finditer(r"\b(?:struct|enum|trait)\s+(" + IDENT + ")", code):
                defined.setdefault(m.group(1), set()).add(mod)
        for mod in graph:
            code = self.code[mod]
            for m in re.finditer(r"^impl\s*(?:<[^>{]*>)?\s*(" + IDENT + r")\s*(?:<[^>{]*>)?\s*\{", code, re.M):
                homes = defined.get(m.group(1), set())
                if mod in homes:
                    # The file defines a type of that name itself: the impl is its
                    # own (another file's type of the same name is another type).
                    continue
                for home in homes:
                    if home != mod and mod[: len(home)] != home and home in graph:
                        graph[home].add(mod)

    def name(self, mod):
        return os.path.relpath(self.files[mod], self.src)


def cycles(graph):
    """Strongly connected components of more than one file (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
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
                out.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


status = 0
for root in sys.argv[1:]:
    crate = Crate(root)
    graph = crate.edges()
    crate.impl_edges(graph)
    found = cycles(graph)
    if not found:
        print(f"ok: {root}: no import cycle between its {len(graph)} files")
        continue
    status = 1
    for comp in found:
        members = set(comp)
        names = sorted(crate.name(m) for m in comp)
        print(f"error: {root}: import cycle between {', '.join(names)}", file=sys.stderr)
        for m in sorted(comp, key=crate.name):
            inside = sorted(crate.name(t) for t in graph[m] if t in members)
            print(f"  {crate.name(m)} -> {', '.join(inside)}", file=sys.stderr)
sys.exit(status)
PY
