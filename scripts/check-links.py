#!/usr/bin/env python3
"""Check the documentation's links (run by scripts/check-docs.sh, so by `make lint`).

- every relative link and image in README.md, ARCHITECTURE.md, BENCHMARKS.md and docs/**/*.md
  resolves to a file or directory of the repository;
- every `#anchor` (in the same page or another Markdown page) names a heading of that page, by
  the slug rule GitHub and mdBook share (lowercase; letters, digits, `_` and `-` kept; spaces
  become `-`; everything else dropped; a repeated slug gets `-1`, `-2`, ...);
- every page under docs/src is listed in docs/src/SUMMARY.md;
- every path in backticks in ARCHITECTURE.md that looks like a repository file (`shared/...`,
  `functions/...`, `cli/...`, `tools/...`, `scripts/...`, `migrations/...`, `docs/...`)
  exists (`path::item` is checked as `path`; `{a,b}` and `*` are expanded).

Links inside fenced code blocks and inline code are not links. External links (with a scheme)
are not fetched. Prints one line per problem and exits 1 if there is any.
"""

import glob
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOP_PAGES = ["README.md", "ARCHITECTURE.md", "BENCHMARKS.md"]
ARCH_PREFIXES = ("shared/", "functions/", "cli/", "tools/", "scripts/", "migrations/", "docs/")

INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def pages():
    found = [ROOT / p for p in TOP_PAGES if (ROOT / p).exists()]
    found += sorted((ROOT / "docs").rglob("*.md"))
    return found


def prose_lines(text):
    """(line number, line) of the lines outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.split("\n"), 1):
        stripped = line.lstrip()
        marker = re.match(r"(`{3,}|~{3,})", stripped)
        if marker:
            if fence is None:
                fence = marker.group(1)[0] * len(marker.group(1))
                continue
            if stripped.startswith(fence):
                fence = None
                continue
        if fence is None:
            yield number, line


def slug(heading):
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = text.replace("`", "")
    text = re.sub(r"<[^>]+>", "", text)
    out = []
    for ch in text.strip():
        if ch.isalnum() or ch in "_-":
            out.append(ch.lower())
        elif ch.isspace():
            out.append("-")
    return "".join(out)


_anchors = {}


def anchors(path):
    if path not in _anchors:
        seen = {}
        found = set()
        for _, line in prose_lines(path.read_text(encoding="utf-8")):
            m = re.match(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if not m:
                continue
            base = slug(m.group(2))
            n = seen.get(base, 0)
            seen[base] = n + 1
            found.add(base if n == 0 else f"{base}-{n}")
        _anchors[path] = found
    return _anchors[path]


def links(path):
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        m = REFERENCE_DEF.match(line)
        if m:
            yield number, m.group(1)
            continue
        for m in INLINE_LINK.finditer(CODE_SPAN.sub(lambda c: " " * len(c.group(0)), line)):
            yield number, m.group(1)


def check_link(page, number, target, problems):
    if SCHEME.match(target) or target.startswith("//"):
        return
    file_part, _, anchor = target.partition("#")
    where = f"{page.relative_to(ROOT)}:{number}"
    if file_part:
        resolved = (page.parent / file_part).resolve()
        if not resolved.exists():
            problems.append(f"{where}: broken link {target} (no file {os.path.relpath(resolved, ROOT)})")
            return
    else:
        resolved = page
    if anchor and resolved.suffix == ".md" and resolved.is_file():
        if anchor not in anchors(resolved):
            problems.append(f"{where}: broken anchor {target} (no heading with slug #{anchor} in "
                            f"{os.path.relpath(resolved, ROOT)})")


def check_summary(problems):
    src = ROOT / "docs" / "src"
    summary = src / "SUMMARY.md"
    if not summary.exists():
        problems.append("docs/src/SUMMARY.md: missing")
        return
    listed = set()
    for _, target in links(summary):
        listed.add((src / target.partition("#")[0]).resolve())
    for page in sorted(src.rglob("*.md")):
        if page != summary and page.resolve() not in listed:
            problems.append(f"{page.relative_to(ROOT)}: not listed in docs/src/SUMMARY.md")


def expand_braces(path):
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    out = []
    for part in m.group(1).split(","):
        out += expand_braces(path[: m.start()] + part + path[m.end():])
    return out


def check_architecture_paths(problems):
    arch = ROOT / "ARCHITECTURE.md"
    if not arch.exists():
        problems.append("ARCHITECTURE.md: missing")
        return
    for number, line in prose_lines(arch.read_text(encoding="utf-8")):
        for m in CODE_SPAN.finditer(line):
            text = m.group(2).strip()
            if not text.startswith(ARCH_PREFIXES) or " " in text:
                continue
            path = text.split("::")[0].rstrip(".,;:")
            for candidate in expand_braces(path):
                if "*" in candidate:
                    ok = bool(glob.glob(str(ROOT / candidate), recursive=True))
                else:
                    ok = (ROOT / candidate).exists()
                if not ok:
                    problems.append(f"ARCHITECTURE.md:{number}: `{text}` names {candidate}, which does not exist")


def main():
    problems = []
    for page in pages():
        for number, target in links(page):
            check_link(page, number, target, problems)
    check_summary(problems)
    check_architecture_paths(problems)
    for problem in problems:
        print(problem)
    checked = len(pages())
    if problems:
        print(f"check-links: {len(problems)} problem(s) in {checked} pages", file=sys.stderr)
        return 1
    print(f"check-links: {checked} pages, every link, anchor and path resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
