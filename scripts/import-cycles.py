#!/usr/bin/env python3
"""File-level import circles inside one crate.

Reads every `.rs` file under a crate's `src/`, maps each file to its
module path (`src/a/b.rs` and `src/a/b/mod.rs` are `a::b`), and draws an
edge from a file to every module of the same crate it names: in `use`
items and in paths written out in the code (`crate::x::y`, `super::x`,
`self::x`). A path names the longest module prefix that exists, so
`crate::server::Shared` is an edge to `server`. A file's own submodules
(`mod x;`) and its parent are not counted: a parent and the files inside
it are one concern. Code under `#[cfg(test)]` (an inline test module, a
test-only function or `use`, a test file declared `#[cfg(test)] mod x;`)
is not counted either: a test is a client of the code it tests, and its
imports say nothing about how the crate's own files depend on one another.

Prints each circle (a strongly connected component of more than one
file) with its size, and exits 1 if there is any, so that it can run in
`make lint` once the circles are gone.

With `--edges`, each circle is followed by the edges inside it, one a
line with the file that draws it, to show where to cut.

    scripts/import-cycles.py [--edges] crates/monitor crates/runtime
"""

import re
import sys
from pathlib import Path

PATH_RE = re.compile(r"\b(crate|super|self)((?:::[A-Za-z_][A-Za-z0-9_]*)+)")
USE_GROUP_RE = re.compile(r"\buse\s+(crate|super|self)::([^;]*?)\{([^;]*)\};", re.S)
# Comments, raw strings, strings and character literals, in one pass so
# that a `//` inside a string or a `"` in a character is not misread.
TOKEN_RE = re.compile(
    r"//[^\n]*|/\*.*?\*/"
    r'|r(#*)".*?"\1'
    r'|b?"(?:\\.|[^"\\])*"'
    r"|b?'(?:\\.|[^'\\])'",
    re.S,
)
CFG_TEST_RE = re.compile(r"#\[cfg\(test\)\]")
ATTR_RE = re.compile(r"\s*#\[[^\]]*\]")
TEST_MOD_FILE_RE = re.compile(r"#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;")


def strip_cfg_test(text: str) -> str:
    """`text` without the items under `#[cfg(test)]`.

    An item ends at its first `;` or `,` outside brackets, where the first
    brace block it opens closes (a module, a function, an impl, a `use`
    group), or before the brace that closes the block around it (a field,
    a match arm).
    """
    out = []
    pos = 0
    while True:
        m = CFG_TEST_RE.search(text, pos)
        if m is None:
            out.append(text[pos:])
            return "".join(out)
        out.append(text[pos : m.start()])
        i = m.end()
        while True:
            a = ATTR_RE.match(text, i)
            if a is None:
                break
            i = a.end()
        braces = parens = 0
        while i < len(text):
            c = text[i]
            if c == "}" and braces == 0:
                break  # the end of the block around a test-only field or arm
            i += 1
            if c in "([":
                parens += 1
            elif c in ")]":
                parens -= 1
            elif c == "{":
                braces += 1
            elif c == "}":
                braces -= 1
                if braces == 0:
                    break
            elif c in ";," and braces == 0 and parens == 0:
                break
        pos = i


def module_of(src: Path, file: Path) -> tuple:
    rel = file.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("lib", "main") and len(parts) == 1:
        return ()
    if parts[-1] == "mod":
        parts = parts[:-1]
    return tuple(parts)


def resolve(base: tuple, head: str, rest: list, modules: set) -> tuple:
    """The longest existing module that `head::rest` names from `base`."""
    if head == "crate":
        start = ()
    elif head == "self":
        start = base
    else:  # super, possibly repeated: super::super::x
        start = base[:-1]
        while rest and rest[0] == "super":
            start = start[:-1]
            rest = rest[1:]
    best = None
    path = start
    for part in rest:
        path = path + (part,)
        if path in modules:
            best = path
    return best


def blank(text: str) -> str:
    """`text` with comments removed and literals emptied."""

    def one(m):
        t = m.group(0)
        if t.startswith("/"):
            return " "
        return "''" if t.endswith("'") else '""'

    return TOKEN_RE.sub(one, text)


def code_of(text: str) -> str:
    """`text` without comments, literals and test-only items."""
    return strip_cfg_test(blank(text))


def test_children(text: str, me: tuple) -> set:
    """The submodules `text` declares as `#[cfg(test)] mod x;` (files)."""
    text = blank(text)
    return {me + (m.group(1),) for m in TEST_MOD_FILE_RE.finditer(text)}


def edges_of(text: str, me: tuple, modules: set) -> set:
    text = code_of(text)
    # A file that is `x/mod.rs` or `x.rs` is module x: `self` is x and
    # `super` its parent.
    found = set()
    for m in USE_GROUP_RE.finditer(text):
        head, prefix, group = m.group(1), m.group(2), m.group(3)
        for item in re.split(r",", group):
            item = item.strip().split(" as ")[0].strip()
            if not item:
                continue
            names = [p for p in (prefix + item).split("::") if p]
            target = resolve(me, head, names, modules)
            if target is not None:
                found.add(target)
    for m in PATH_RE.finditer(text):
        names = [p for p in m.group(2).split("::") if p]
        target = resolve(me, m.group(1), names, modules)
        if target is not None:
            found.add(target)
    return found


def related(a: tuple, b: tuple) -> bool:
    """A module and its own ancestors or descendants."""
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def circles(crate: Path) -> list:
    src = crate / "src"
    files = {module_of(src, f): f for f in sorted(src.rglob("*.rs"))}
    tests = set()
    for me, f in files.items():
        tests |= test_children(f.read_text(), me)
    files = {
        me: f
        for me, f in files.items()
        if not any(me[: len(t)] == t for t in tests)
    }
    modules = set(files)
    graph = {}
    for me, f in files.items():
        targets = edges_of(f.read_text(), me, modules)
        graph[me] = {t for t in targets if t != me and not related(me, t)}
    # Tarjan's strongly connected components.
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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
                members = set(comp)
                inner = sorted(
                    (a, b) for a in members for b in graph[a] if b in members
                )
                out.append((sorted(comp), inner))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return out


def name(module: tuple) -> str:
    return "::".join(module) or "lib"


def main(argv: list) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[-1].strip(), file=sys.stderr)
        return 2
    show_edges = "--edges" in argv
    argv = [a for a in argv if a != "--edges"]
    found = False
    for arg in argv:
        crate = Path(arg)
        if not (crate / "src").is_dir():
            print(f"import-cycles: {crate} has no src/ folder", file=sys.stderr)
            return 2
        comps = circles(crate)
        if not comps:
            print(f"{crate}: no file-level import circle")
        for comp, inner in comps:
            found = True
            names = ", ".join(name(m) for m in comp)
            print(f"{crate}: a circle of {len(comp)} files: {names}")
            if show_edges:
                for a, b in inner:
                    print(f"    {name(a)} -> {name(b)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
