"""``bti merge``: join shard results into one JSONL equal to an unsharded run (torch-free).

Shards must come from the same recipes (same content hashes) and be disjoint. Records are
written in item-id order so merged files are byte-stable whatever order the shards finished in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.errors import ResultsError
from harness.results import Header, Records, ResultsWriter, read_records
from harness.runner.matrix import parse_shard


def _check_shards(inputs: list[Path], headers: list[Header]) -> None:
    """Every shard 1..n named by the headers is present exactly once (a shard whose job died is named)."""
    shards = [h.get("shard") for h in headers]
    if not any(shards):
        return
    if not all(shards):
        raise ResultsError("cannot merge sharded and unsharded results: " + ", ".join(
            f"{p} ({s or 'unsharded'})" for p, s in zip(inputs, shards, strict=True)))
    seen: dict[int, Path] = {}
    counts = set()
    for path, spec in zip(inputs, shards, strict=True):
        i, n = parse_shard(str(spec)) or (0, 0)
        counts.add(n)
        if i in seen:
            raise ResultsError(f"{path}: shard {spec} is also in {seen[i]}")
        seen[i] = path
    if len(counts) > 1:
        raise ResultsError(f"shards come from different splits: {', '.join(f'/{n}' for n in sorted(counts))}")
    total = counts.pop()
    missing = [f"{i}/{total}" for i in range(1, total + 1) if i not in seen]
    if missing:
        raise ResultsError(f"missing shard(s) {', '.join(missing)}: got {len(seen)} of {total}; "
                           "the job of a missing shard died before uploading its results")


def merge(inputs: list[Path], out: Path) -> tuple[Header, Records]:
    """Each record is carried as the line it was read as (checked by ``read_records``), never held as a dict: 134,000
    records merge in ~0.4 GB."""
    if not inputs:
        raise ResultsError("bti merge needs at least one results file")
    headers: list[Header] = []
    records: dict[str, bytes] = {}
    origin: dict[str, Path] = {}
    for path in inputs:
        header, recs = read_records(path)
        if headers and header.get("recipes") != headers[0].get("recipes"):
            raise ResultsError(f"{path}: recipes or recipe hashes differ from {inputs[0]}; shards must run the same recipes")
        headers.append(header)
        for rec, line in recs.strict_lines():
            if rec in records and origin[rec] != path:  # the same file given twice: its records once
                raise ResultsError(f"{path}: item {rec} is also in {origin[rec]}; shards must be disjoint")
            records[rec] = line
            origin[rec] = path
    _check_shards(inputs, headers)
    first = headers[0]
    merged: Header = {**first, "shard": None}
    merged["merged_from"] = [{"run_id": h.get("run_id"), "shard": h.get("shard")} for h in headers]
    info: dict[str, dict[str, Any]] = {}
    for h in headers:
        info.update(h.get("recipe_info") or {})
    if info:
        merged["recipe_info"] = info
    ordered = Records([records[k] for k in sorted(records)])
    if out.exists():
        out.unlink()
    with ResultsWriter(out, merged) as writer:
        for line in ordered.lines():
            writer.write_line(line)
    return merged, ordered
