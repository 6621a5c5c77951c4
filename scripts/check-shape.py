#!/usr/bin/env python3
"""The code's shape, checked (`make lint`; ARCHITECTURE.md "Shape rules").

- No production `.rs` file over 400 lines.
- No production function over 80 lines (from its `fn` line to its closing brace).
- No module cycle inside a crate: no two modules (files) that are not ancestor and descendant
  of each other reach one another through `crate::` / `super::` paths.

Production code is every `.rs` file under a crate's `src/`, except `tests.rs` files, files
under a `tests/` folder inside `src/`, and the bodies of `#[cfg(test)]` modules. Exceptions
are listed in ARCHITECTURE.md, section "Exceptions to the shape rules", one table row each:
`| path | reason |` for a file, `| path::function | reason |` for a function.

    scripts/check-shape.py            # check; exit 1 on a finding not listed as an exception
    scripts/check-shape.py --report   # print every file and function over the bounds, and the cycles
"""

import os
import re
import sys
from pathlib import Path

MAX_FILE_LINES = 400
MAX_FN_LINES = 80
ROOT = Path(__file__).resolve().parent.parent
CRATE_DIRS = ["shared", "functions", "tools"]

FN_RE = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?(?:extern\s+\"[^\"]*\"\s+)?fn\s+([A-Za-z_][A-Za-z0-9_]*)")
CFG_TEST_RE = re.compile(r"^\s*#\[cfg\(test\)\]")


def crates():
    found = [ROOT / "cli"]
    for d in CRATE_DIRS:
        base = ROOT / d
        if base.is_dir():
            found += sorted(p for p in base.iterdir() if (p / "Cargo.toml").is_file())
    return [c for c in found if (c / "src").is_dir()]


def production_files(crate):
    for path in sorted((crate / "src").rglob("*.rs")):
        rel = path.relative_to(crate / "src")
        if path.name == "tests.rs" or "tests" in rel.parts[:-1] or path.name == "pb.rs":
            continue
        yield path


def strip_line(line):
    """The line without its string literals and // comment, for brace counting."""
    line = re.sub(r"'(?:\\.|[^'\\])'", "''", line)  # char literals such as '{'
    line = re.sub(r'"(?:\\.|[^"\\])*"', '""', line)
    return line.split("//", 1)[0]


def functions(lines):
    """(name, first line index, line count) of every fn outside #[cfg(test)] modules."""
    out = []
    depth = 0
    skip_until_depth = None
    pending_cfg_test = False
    stack = []  # (name, start, depth at which it opened)
    for i, raw in enumerate(lines):
        line = strip_line(raw)
        if skip_until_depth is None and CFG_TEST_RE.match(raw):
            pending_cfg_test = True
        m = FN_RE.match(line) if skip_until_depth is None else None
        if m and "{" in line[m.end():] or (m and not line.rstrip().endswith(";")):
            stack.append([m.group(1), i, depth, False])
        opened = line.count("{")
        closed = line.count("}")
        if pending_cfg_test and opened:
            if re.match(r"^\s*(pub\s+)?mod\s", line):
                skip_until_depth = depth
            pending_cfg_test = False
        for entry in stack:
            if not entry[3] and opened and entry[1] <= i:
                entry[3] = True
        depth += opened - closed
        if skip_until_depth is not None and depth <= skip_until_depth:
            skip_until_depth = None
        while stack and stack[-1][3] and depth <= stack[-1][2]:
            name, start, _, _ = stack.pop()
            out.append((name, start, i - start + 1))
        # a signature without a body (trait method) never opens: drop it at its `;`
        if stack and not stack[-1][3] and line.rstrip().endswith(";"):
            stack.pop()
    return out


def module_path(crate, path):
    rel = path.relative_to(crate / "src").with_suffix("")
    parts = list(rel.parts)
    if parts[-1] in ("lib", "main"):
        parts = parts[:-1]
    elif parts[-1] == "mod":
        parts = parts[:-1]
    return tuple(parts)


def expand_groups(text):
    """`crate::a::{b, c::d}` and `super::{x, y}` written out as `crate::a::b crate::a::c::d ...`."""
    out = []
    for m in re.finditer(r"\b((?:crate|super)(?:::[A-Za-z_][A-Za-z0-9_]*)*)::\{", text):
        start = m.end()
        depth, i = 1, start
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        inner = text[start : i - 1]
        parts, depth, cur = [], 0, ""
        for ch in inner:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += {"{": 1, "}": -1}.get(ch, 0)
            cur += ch
        parts.append(cur)
        for part in parts:
            part = part.strip()
            if part and part != "self":
                out.append(expand_groups(f"{m.group(1)}::{part}") if "{" in part else f"{m.group(1)}::{part}")
    return text + "\n" + "\n".join(out)


def module_edges(crate, files):
    modules = {module_path(crate, f): f for f in files}
    edges = {m: set() for m in modules}
    for mod, f in modules.items():
        text = f.read_text(errors="replace")
        text = re.sub(r"(?s)#\[cfg\(test\)\]\s*mod\s+\w+\s*\{.*", "", text)
        text = expand_groups(text)
        targets = []
        for m in re.finditer(r"\bcrate((?:::[A-Za-z_][A-Za-z0-9_]*)+)", text):
            targets.append(tuple(m.group(1).strip(":").split("::")))
        for m in re.finditer(r"\b((?:super::)+)((?:[A-Za-z_][A-Za-z0-9_]*::?)*)", text):
            ups = m.group(1).count("super")
            base = mod[: len(mod) - ups] if ups <= len(mod) else ()
            rest = tuple(p for p in m.group(2).split("::") if p)
            targets.append(base + rest)
        for t in targets:
            # the longest prefix that is a module (file)
            for k in range(len(t), -1, -1):
                if t[:k] in modules:
                    target = t[:k]
                    break
            if target == mod:
                continue
            if target == mod[: len(target)] or mod == target[: len(mod)]:
                continue  # ancestor or descendant
            edges[mod].add(target)
    return edges


def cycles(edges):
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
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

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            visit(v)
    return out


def exceptions():
    arch = ROOT / "ARCHITECTURE.md"
    allowed = set()
    if not arch.is_file():
        return allowed
    inside = False
    for line in arch.read_text().splitlines():
        if line.startswith("## "):
            inside = "Exceptions to the shape rules" in line
            continue
        if inside:
            m = re.match(r"^\|\s*`([^`]+)`\s*\|", line)
            if m:
                allowed.add(m.group(1))
    return allowed


def main():
    report = "--report" in sys.argv
    allowed = exceptions()
    findings = []
    for crate in crates():
        files = list(production_files(crate))
        for f in files:
            rel = str(f.relative_to(ROOT))
            lines = f.read_text(errors="replace").splitlines()
            if len(lines) > MAX_FILE_LINES:
                findings.append((rel, f"{rel}: {len(lines)} lines (over {MAX_FILE_LINES})"))
            for name, start, count in functions(lines):
                if count > MAX_FN_LINES:
                    findings.append((f"{rel}::{name}", f"{rel}:{start + 1}: fn {name} is {count} lines (over {MAX_FN_LINES})"))
        for comp in cycles(module_edges(crate, files)):
            names = ", ".join("::".join(m) or "(root)" for m in comp)
            key = f"{crate.relative_to(ROOT)} cycle"
            findings.append((key, f"{crate.relative_to(ROOT)}: module cycle: {names}"))
    bad = 0
    for key, text in findings:
        listed = key in allowed
        if report or not listed:
            print(("  (listed) " if listed else "") + text)
        bad += not listed
    if bad and not report:
        print(f"check-shape: {bad} finding(s) not listed in ARCHITECTURE.md \"Exceptions to the shape rules\"", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
