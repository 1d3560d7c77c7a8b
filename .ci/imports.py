#!/usr/bin/env python3
"""The import graph of `src/`, one node per top-level module.

Reads every `crate::…` path in the code of `src/` (comments and doc
comments stripped, so intra-doc links do not count; test modules do count),
maps it to the top-level module it names (a name re-exported at the crate
root, such as `crate::Rejection`, to the module `src/lib.rs` takes it from),
and reports:

- each cycle between top-level modules, with one file and line per edge;
- each import of a module that nothing may import (`config`: it builds
  everything, and the core, keyed limiters and the adapters are whole
  without it), with its file and line;
- each file of `src/` over 600 lines;
- each cycle between files, here, in `algorithms/src/` and in the
  simulator's `sim/src/` (`config/file.rs` and `config/gather.rs`
  importing each other), with one file and line per edge. Here a path
  is followed to the file that defines what it names (through `pub use`
  re-exports), `super::` and `self::` paths count, and a file's
  `#[cfg(test)]` module does not. A module's own file and the
  files of its submodules are one module: an edge between them (a
  `mod.rs` re-exporting its parts, a part using its parent's items) is
  not counted.

`super::` paths stay inside their top-level module in this crate, so they
add no edge. Exits 1 if it finds any, 0 otherwise; `--graph` also prints
every edge. Run from anywhere: `python3 .ci/imports.py`.
"""

import os
import re
import sys

MAX_LINES = 600
# Top-level modules no other module of `src/` may import.
IMPORTED_BY_NOTHING = ("config",)
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
# The crates whose files are checked for cycles: the library, its pure
# algorithms and the simulator.
FILE_ROOTS = (
    ROOT,
    os.path.join(ROOT, "..", "algorithms", "src"),
    os.path.join(ROOT, "..", "sim", "src"),
)


def strip_comments(text):
    """The text with `//` and `/* */` comments blanked, strings kept, lines kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append(text[i : j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def top_module(path):
    """`limiter` for src/limiter/wait.rs, `clock` for src/clock.rs, None for lib.rs."""
    rel = os.path.relpath(path, ROOT).split(os.sep)
    if rel == ["lib.rs"]:
        return None
    return rel[0][:-3] if len(rel) == 1 else rel[0]


def root_reexports(lib_text):
    """Names `src/lib.rs` re-exports, mapped to the module they come from."""
    names = {}
    for m in re.finditer(r"pub use (\w+)::(\{[^}]*\}|\w+)", lib_text):
        module, items = m.group(1), m.group(2).strip("{}")
        for item in items.split(","):
            item = item.strip().split(" as ")[-1].strip()
            if item:
                names[item] = module
    return names


def paths_after_crate(code):
    """(line, first segment) for each `crate::` path, grouped `use crate::{a, b}` expanded."""
    for m in re.finditer(r"\bcrate::(\{[^}]*\}|\w+)", code):
        line = code.count("\n", 0, m.start()) + 1
        seg = m.group(1)
        if seg.startswith("{"):
            for part in seg.strip("{}").split(","):
                part = part.strip()
                if part:
                    yield line, re.match(r"\w+", part).group(0)
        else:
            yield line, seg


def graph():
    files = []
    for dirpath, _, names in os.walk(ROOT):
        files += [os.path.join(dirpath, f) for f in names if f.endswith(".rs")]
    files.sort()
    with open(os.path.join(ROOT, "lib.rs")) as f:
        lib = strip_comments(f.read())
    modules = set(re.findall(r"^\s*(?:pub )?mod (\w+);", lib, re.M))
    reexports = root_reexports(lib)
    edges = {}  # (from, to) -> "file:line" of the first use
    long_files = []
    for path in files:
        with open(path) as f:
            text = f.read()
        count = text.count("\n")
        rel = os.path.relpath(path, os.path.join(ROOT, ".."))
        if count > MAX_LINES:
            long_files.append((rel, count))
        here = top_module(path)
        if here is None:
            continue
        for line, seg in paths_after_crate(strip_comments(text)):
            target = seg if seg in modules else reexports.get(seg)
            if target in modules and target != here:
                edges.setdefault((here, target), f"{rel}:{line}")
    return modules, edges, long_files


def module_of_file(path, root):
    """("config", "file") for src/config/file.rs, ("config",) for src/config/mod.rs."""
    rel = os.path.relpath(path, root)[: -len(".rs")].split(os.sep)
    if rel[-1] in ("mod", "lib"):
        rel = rel[:-1]
    return tuple(rel)


def without_tests(code):
    """The code before its `#[cfg(test)] mod … {`, if it has one."""
    m = re.search(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{", code)
    return code[: m.start()] if m else code


def use_leaves(tree):
    """Each path of a `use` tree: `a::{b, c::{d, e}}` as [a, b], [a, c, d], [a, c, e]."""
    tree = tree.strip()
    brace = tree.find("{")
    if brace < 0:
        yield [s.strip() for s in tree.split(" as ")[0].split("::") if s.strip()]
        return
    prefix = [s.strip() for s in tree[:brace].split("::") if s.strip()]
    parts, depth, current = [], 0, ""
    for c in tree[brace + 1 : tree.rfind("}")]:
        depth += (c == "{") - (c == "}")
        if c == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += c
    parts.append(current)
    for part in parts:
        if part.strip():
            for leaf in use_leaves(part):
                yield prefix if leaf == ["self"] else prefix + leaf


def file_graph(root):
    """Edges between files of the crate whose sources are `root`:
    (from, to) -> "file:line"."""
    files = {}
    for dirpath, _, names in os.walk(root):
        for name in names:
            if name.endswith(".rs"):
                path = os.path.join(dirpath, name)
                files[module_of_file(path, root)] = path
    code = {m: without_tests(strip_comments(open(p).read())) for m, p in files.items()}
    reexported = {}
    for m, text in code.items():
        names = reexported.setdefault(m, {})
        for use in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", text):
            for leaf in use_leaves(use.group(1)):
                if leaf and leaf[-1] != "*":
                    names[leaf[-1]] = leaf

    def resolve(here, segments, depth=0):
        """The module whose file defines what `segments` names from `here`."""
        if not segments:
            return None
        if segments[0] == "crate":
            at, rest = (), segments[1:]
        elif segments[0] in ("super", "self"):
            at, rest = here, segments
            while rest and rest[0] in ("super", "self"):
                at = at[:-1] if rest[0] == "super" else at
                rest = rest[1:]
        elif here + (segments[0],) in files:
            at, rest = here, segments
        else:
            return None  # another crate, or a name in scope
        for segment in rest:
            if at + (segment,) in files:
                at = at + (segment,)
                continue
            target = reexported.get(at, {}).get(segment)
            if target and depth < 8:
                return resolve(at, target, depth + 1) or at
            break
        return at

    crate = os.path.relpath(root, os.path.join(ROOT, ".."))
    edges = {}
    for here, text in code.items():
        rel = os.path.relpath(files[here], os.path.join(ROOT, ".."))
        paths = []
        for use in re.finditer(r"\buse\s+([^;]+);", text):
            line = text.count("\n", 0, use.start()) + 1
            paths += [(line, leaf) for leaf in use_leaves(use.group(1))]
        for path in re.finditer(r"\b(?:crate|super|self)(?:::\w+)+", text):
            line = text.count("\n", 0, path.start()) + 1
            paths.append((line, path.group(0).split("::")))
        for line, segments in paths:
            there = resolve(here, segments)
            if (
                there is None
                or there[: len(here)] == here
                or here[: len(there)] == there
            ):
                continue
            edges.setdefault(
                (os.path.join(crate, *here), os.path.join(crate, *there)), f"{rel}:{line}"
            )
    return {os.path.join(crate, *m) for m in files}, edges


def cycles(modules, edges):
    """The strongly connected components of more than one module (Tarjan)."""
    succ = {m: sorted(t for (f, t) in edges if f == m) for m in modules}
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in succ[v]:
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
                out.append(sorted(comp))

    for m in sorted(modules):
        if m not in index:
            visit(m)
    return out


def report_cycles(what, nodes, edges):
    """Print every edge (with `--graph`), then each cycle among `nodes` with
    its edges; the cycles."""
    if "--graph" in sys.argv:
        for (f, t), at in sorted(edges.items()):
            print(f"{f} -> {t}  ({at})")
    found = cycles(nodes, edges)
    for comp in found:
        print(f"cycle among{what}: " + ", ".join(comp))
        for (f, t), at in sorted(edges.items()):
            if f in comp and t in comp:
                print(f"  {f} -> {t}  ({at})")
    return found


def main():
    modules, edges, long_files = graph()
    files, file_edges = set(), {}
    for root in FILE_ROOTS:
        crate_files, crate_edges = file_graph(root)
        files |= crate_files
        file_edges.update(crate_edges)
    found = report_cycles("", modules, edges)
    forbidden = sorted((f, t, at) for (f, t), at in edges.items() if t in IMPORTED_BY_NOTHING)
    for f, t, at in forbidden:
        print(f"{f} imports {t}, which nothing may import  ({at})")
    for rel, count in long_files:
        print(f"{rel}: {count} lines (at most {MAX_LINES})")
    file_cycles = report_cycles(" files", files, file_edges)
    if found or forbidden or long_files or file_cycles:
        return 1
    print(
        f"imports: {len(edges)} edges among {len(modules)} modules, no cycle, "
        f"nothing imports {', '.join(IMPORTED_BY_NOTHING)}, no file over {MAX_LINES} lines; "
        f"{len(file_edges)} edges among {len(files)} files, no cycle"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
