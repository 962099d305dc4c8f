"""Core ATen operator coverage (torch-free): which core ops the cases exercise.

An op counts as covered by a results file when an item *targets* it (the case's ``op``). The
list of core ops is ``harness/suites/core_aten_ops.txt`` (regenerate with scripts/gen_core_ops.py).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

CORE_LIST = Path(__file__).resolve().parent.parent / "suites" / "core_aten_ops.txt"


def normalize(op: str) -> str:
    """``aten::add.Tensor``, ``aten.add.Tensor``, ``aten::abs`` → ``aten::add.Tensor`` / ``aten::abs.default``."""
    if op.startswith("aten.") and "::" not in op:
        op = "aten::" + op[len("aten."):]
    if op.startswith("aten::") and "." not in op[len("aten::"):]:
        op += ".default"
    return op


def core_ops() -> list[str]:
    return [line.strip() for line in CORE_LIST.read_text().splitlines() if line.strip() and not line.startswith("#")]


def table(entries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``entries``: {op, dtype, shape} per item (or case × axes). Returns op → {items, dtypes, dynamic}."""
    out: dict[str, dict[str, Any]] = defaultdict(lambda: {"items": 0, "dtypes": set(), "dynamic": False})
    for e in entries:
        if not e.get("op"):
            continue
        row = out[normalize(e["op"])]
        row["items"] += 1
        row["dtypes"].add(e["dtype"])
        row["dynamic"] = row["dynamic"] or e["shape"] == "dynamic"
    return out


def render(rows: dict[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    core = core_ops()
    covered = [op for op in core if op in rows]
    missing = [op for op in core if op not in rows]
    lines = [f"# Core ATen coverage: {len(covered)}/{len(core)} core ops have cases", "",
             "| op | items | dtypes | dynamic |", "|---|---:|---|---|"]
    for op in sorted(rows):
        r = rows[op]
        mark = "" if op in core else " (non-core)"
        lines.append(f"| `{op}`{mark} | {r['items']} | {', '.join(sorted(r['dtypes']))} | {'yes' if r['dynamic'] else 'no'} |")
    lines += ["", f"## Not yet covered ({len(missing)})", ""] + [f"- `{op}`" for op in missing]
    data = {"core_total": len(core), "covered": covered, "missing": missing,
            "ops": {op: {**r, "dtypes": sorted(r["dtypes"])} for op, r in sorted(rows.items())}}
    return "\n".join(lines) + "\n", data


def write(records: Sequence[Any], out_dir: Path) -> dict[str, Path]:
    entries = [{"op": r.get("op"), **(r.get("axes") or {})} for r in records]
    text, data = render(table(entries))
    out_dir.mkdir(parents=True, exist_ok=True)
    md, js = out_dir / "coverage.md", out_dir / "coverage.json"
    md.write_text(text)
    js.write_text(json.dumps(data, indent=1, sort_keys=True))
    return {"coverage.md": md, "coverage.json": js}
