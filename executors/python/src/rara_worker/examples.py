"""Built-in capabilities that do real work on local data.

- ``text.stats`` 1.0.0: line, word and character counts and the top words of a text
  (``{"text": ...}`` or ``{"path": ...}``), written as a ``stats.json`` artifact.
- ``dataset.split`` 1.0.0: a deterministic, seeded split of rows (``{"rows": [...]}`` or
  ``{"path": "x.csv" | "x.jsonl"}``) by ratios, one JSONL artifact per split.
- ``sleep`` 1.0.0: sleeps ``seconds`` (0 to 3600), reporting progress when it starts,
  then every second (fraction = elapsed / total) and at the end, and stopping when
  cancelled. Meant for tests and for trying long, detached steps.

``path`` inputs are files below the executor's data directory (``--data-dir`` or
``RARA_WORKER_DATA_DIR`` for ``python -m rara_worker``): a relative path is taken from there,
an absolute one must lie inside it. A path that leaves it (``..``, an absolute path elsewhere,
a symlink pointing out) fails the step permanently with ``PATH_OUTSIDE_DATA_DIR``, so a step's
input cannot make the executor read its other files. Build the registry with
``build_registry(data_dir)``.
"""

from __future__ import annotations

import asyncio
import csv
import json
import math
import random
import re
import time
from collections import Counter
from pathlib import Path
from typing import Any

from rara_worker.capability import CapabilityRegistry
from rara_worker.context import Context
from rara_worker.errors import InvalidInputError, PermanentError

PATH_OUTSIDE_DATA_DIR = "PATH_OUTSIDE_DATA_DIR"

_WORD = re.compile(r"[^\W_]+(?:['’-][^\W_]+)*")
_SPLIT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_CHUNK_ROWS = 1000
SLEEP_PROGRESS_SECONDS = 1.0
"""How often ``sleep`` reports progress."""


class DataDir:
    """The directory ``path`` inputs are read from; nothing outside it is opened."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()

    def resolve(self, raw: str) -> Path:
        """The file ``raw`` names, symlinks resolved, refused unless it lies below the root.

        The error names the field, never the path (inputs are not echoed).
        """
        try:
            resolved = (self.root / raw).resolve()
        except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a NUL byte
            raise InvalidInputError(f'"path" cannot be resolved: {type(exc).__name__}') from exc
        if not resolved.is_relative_to(self.root):
            raise PermanentError(
                PATH_OUTSIDE_DATA_DIR,
                '"path" must name a file below the executor\'s data directory '
                "(--data-dir / RARA_WORKER_DATA_DIR)",
                {"field": "path"},
            )
        return resolved


def _read_text(files: DataDir, input: dict[str, Any]) -> str:
    if isinstance(input.get("text"), str):
        return str(input["text"])
    if isinstance(input.get("path"), str):
        path = files.resolve(input["path"])
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInputError(f"cannot read path: {type(exc).__name__}") from exc
    raise InvalidInputError('input needs "text" or "path" (a string)')


TEXT_STATS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "path": {"type": "string"},
        "top": {"type": "integer", "minimum": 0, "default": 10},
    },
    "oneOf": [{"required": ["text"]}, {"required": ["path"]}],
}


async def text_stats(files: DataDir, ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    """``text.stats``: counts and top words of ``text`` or of the file at ``path``."""
    top = input.get("top", 10)
    if not isinstance(top, int) or top < 0:
        raise InvalidInputError('"top" must be a non-negative integer')
    text = await asyncio.to_thread(_read_text, files, input)
    lines = text.splitlines()
    words: Counter[str] = Counter()
    step = max(1, math.ceil(len(lines) / 10))
    for start in range(0, len(lines), step):
        for line in lines[start : start + step]:
            words.update(w.lower() for w in _WORD.findall(line))
        done = min(len(lines), start + step)
        await ctx.progress(done / len(lines), f"counted {done}/{len(lines)} lines")
    ranked = sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    stats = {
        "lines": len(lines),
        "words": sum(words.values()),
        "distinct_words": len(words),
        "chars": len(text),
        "top_words": [{"word": w, "count": n} for w, n in ranked],
    }
    await ctx.write_artifact(
        "stats.json", json.dumps(stats, indent=2, sort_keys=True) + "\n", "application/json"
    )
    return stats


TEXT_SPLIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "path": {"type": "string"},
        "by": {"enum": ["paragraph", "line"], "default": "paragraph"},
    },
    "oneOf": [{"required": ["text"]}, {"required": ["path"]}],
}


async def text_split(files: DataDir, ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    """``text.split``: the non-blank paragraphs (or lines) of ``text`` or of the file at
    ``path``, as ``parts: [{"index", "text"}]`` for a map step to run over."""
    by = input.get("by", "paragraph")
    if by not in ("paragraph", "line"):
        raise InvalidInputError('"by" must be "paragraph" or "line"')
    text = await asyncio.to_thread(_read_text, files, input)
    pieces = re.split(r"\n\s*\n", text) if by == "paragraph" else text.splitlines()
    parts = [p.strip() for p in pieces if p.strip()]
    await ctx.progress(1.0, f"{len(parts)} {by}s")
    return {"count": len(parts), "parts": [{"index": i, "text": p} for i, p in enumerate(parts)]}


STATS_MERGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "stats": {"type": "array", "items": {"type": "object"}},
        "top": {"type": "integer", "minimum": 0, "default": 10},
    },
    "required": ["stats"],
}


async def stats_merge(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    """``stats.merge``: one ``text.stats`` output from many (a map step's list of them):
    lines, words and characters summed, top words counted over all parts."""
    stats, top = input.get("stats"), input.get("top", 10)
    if not isinstance(stats, list) or not all(isinstance(s, dict) for s in stats):
        raise InvalidInputError('"stats" must be a list of text.stats outputs')
    if not isinstance(top, int) or top < 0:
        raise InvalidInputError('"top" must be a non-negative integer')
    words: Counter[str] = Counter()
    for part in stats:
        for entry in part.get("top_words", []):
            words[str(entry["word"])] += int(entry["count"])
    ranked = sorted(words.items(), key=lambda kv: (-kv[1], kv[0]))[:top]
    await ctx.progress(1.0, f"merged {len(stats)} parts")
    return {
        "parts": len(stats),
        "lines": sum(int(s.get("lines", 0)) for s in stats),
        "words": sum(int(s.get("words", 0)) for s in stats),
        "chars": sum(int(s.get("chars", 0)) for s in stats),
        "top_words": [{"word": w, "count": n} for w, n in ranked],
    }


def _load_rows(files: DataDir, input: dict[str, Any]) -> list[Any]:
    if isinstance(input.get("rows"), list):
        return list(input["rows"])
    raw = input.get("path")
    if not isinstance(raw, str):
        raise InvalidInputError('input needs "rows" (a list) or "path" (.csv or .jsonl)')
    if not raw.endswith((".csv", ".jsonl")):
        raise InvalidInputError('"path" must end in .csv or .jsonl')
    path = files.resolve(raw)
    try:
        with path.open(encoding="utf-8", newline="") as f:
            if raw.endswith(".csv"):
                return list(csv.DictReader(f))
            return [json.loads(line) for line in f if line.strip()]
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InvalidInputError(f"cannot read path: {type(exc).__name__}") from exc


def _split_sizes(total: int, ratios: dict[str, float]) -> dict[str, int]:
    """Largest-remainder rounding: sizes add up to ``total``, ties go to earlier names."""
    exact = {name: total * r for name, r in ratios.items()}
    sizes = {name: math.floor(x) for name, x in exact.items()}
    by_remainder = sorted(ratios, key=lambda n: -(exact[n] - sizes[n]))
    for name in by_remainder[: total - sum(sizes.values())]:
        sizes[name] += 1
    return sizes


def _check_ratios(raw: object) -> dict[str, float]:
    if not isinstance(raw, dict) or not raw:
        raise InvalidInputError('"ratios" must be an object like {"train": 0.8, "test": 0.2}')
    ratios: dict[str, float] = {}
    for name, r in raw.items():
        if not _SPLIT_NAME.fullmatch(name):
            raise InvalidInputError("split names must be 1-64 letters, digits, _ or -")
        if isinstance(r, bool) or not isinstance(r, int | float) or not 0 < r <= 1:
            raise InvalidInputError("each ratio must be a number in (0, 1]")
        ratios[name] = float(r)
    if not math.isclose(sum(ratios.values()), 1.0, abs_tol=1e-6):
        raise InvalidInputError("ratios must add up to 1")
    return ratios


DATASET_SPLIT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "rows": {"type": "array"},
        "path": {"type": "string"},
        "ratios": {"type": "object", "additionalProperties": {"type": "number"}},
        "seed": {"type": "integer", "default": 0},
    },
    "required": ["ratios"],
}


async def dataset_split(files: DataDir, ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    """``dataset.split``: a seeded split of inline rows or of the CSV/JSONL file at ``path``."""
    ratios = _check_ratios(input.get("ratios"))
    seed = input.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise InvalidInputError('"seed" must be an integer')
    rows = await asyncio.to_thread(_load_rows, files, input)
    order = list(range(len(rows)))
    random.Random(seed).shuffle(order)
    sizes = _split_sizes(len(rows), ratios)
    total_chunks = sum(max(1, math.ceil(n / _CHUNK_ROWS)) for n in sizes.values())
    chunks_done, start = 0, 0
    for name, size in sizes.items():
        part = order[start : start + size]
        start += size
        lines: list[str] = []
        for first in range(0, max(size, 1), _CHUNK_ROWS):
            chunk = part[first : first + _CHUNK_ROWS]
            lines.extend(json.dumps(rows[i], sort_keys=True) + "\n" for i in chunk)
            chunks_done += 1
            await ctx.progress(chunks_done / total_chunks, f"{name}: {len(lines)}/{size} rows")
        await ctx.write_artifact(f"{name}.jsonl", "".join(lines), "application/x-ndjson")
    return {"rows": len(rows), "seed": seed, "counts": sizes}


SLEEP_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"seconds": {"type": "number", "minimum": 0, "maximum": 3600}},
    "required": ["seconds"],
}


async def sleep(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
    """``sleep``: sleeps ``seconds``, reporting progress each second, until done or cancelled.

    The reports are paced on the start time, not on the previous report, so a long sleep
    shows one report per elapsed second without drift.
    """
    seconds = input.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not 0 <= seconds <= 3600:
        raise InvalidInputError('"seconds" must be a number from 0 to 3600')
    started = time.monotonic()
    reports = 0
    while (elapsed := time.monotonic() - started) < seconds and not ctx.cancelled.is_set():
        await ctx.progress(elapsed / seconds, f"slept {elapsed:.0f}s")
        reports += 1
        await asyncio.sleep(min(reports * SLEEP_PROGRESS_SECONDS, seconds) - elapsed)
    slept = min(time.monotonic() - started, float(seconds))
    if not ctx.cancelled.is_set():
        await ctx.progress(1.0, f"slept {slept:.0f}s")
    return {"slept_seconds": round(slept, 3), "cancelled": ctx.cancelled.is_set()}


def build_registry(data_dir: Path) -> CapabilityRegistry:
    """The example capabilities, reading ``path`` inputs only below ``data_dir``."""
    files = DataDir(data_dir)
    registry = CapabilityRegistry()

    @registry.capability(
        "text.stats", version="1.0.0", input_schema=TEXT_STATS_SCHEMA,
        description="Count lines, words and characters of a text; list its top words.",
    )
    async def text_stats_below_data_dir(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        return await text_stats(files, ctx, input)

    @registry.capability(
        "text.split", version="1.0.0", input_schema=TEXT_SPLIT_SCHEMA,
        description="Split a text into its paragraphs or lines, for a map step to run over.",
    )
    async def text_split_below_data_dir(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        return await text_split(files, ctx, input)

    registry.capability(
        "stats.merge", version="1.0.0", input_schema=STATS_MERGE_SCHEMA,
        description="Merge text.stats outputs (a map step's list): sums and top words over all.",
    )(stats_merge)

    @registry.capability(
        "dataset.split", version="1.0.0", input_schema=DATASET_SPLIT_SCHEMA,
        description="Split rows (inline, CSV or JSONL) into seeded random parts by ratio.",
    )
    async def dataset_split_below_data_dir(ctx: Context, input: dict[str, Any]) -> dict[str, Any]:
        return await dataset_split(files, ctx, input)

    registry.capability(
        "sleep", version="1.0.0", input_schema=SLEEP_SCHEMA,
        description="Sleep for a number of seconds, reporting progress; honours cancellation.",
    )(sleep)
    return registry
