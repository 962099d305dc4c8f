"""Status badges: an SVG via anybadge plus the shields.io endpoint JSON (torch-free)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from harness.report.summary import RecipeSummary, by_recipe
from harness.results import Record, atomic_write_text
from harness.status import Status

# pass-rate floor (%) -> colour; the first floor reached wins
THRESHOLDS: tuple[tuple[float, str], ...] = ((95.0, "brightgreen"), (80.0, "yellowgreen"), (50.0, "orange"), (0.0, "red"))
_HEX = {"brightgreen": "#4c1", "yellowgreen": "#a4a61d", "orange": "#fe7d37", "red": "#e05d44", "lightgrey": "#9f9f9f"}


def colour(passed: int, ran: int) -> str:
    if ran == 0:
        return "lightgrey"
    rate = 100.0 * passed / ran
    return next(c for floor, c in THRESHOLDS if rate >= floor)


def badge_fields(summaries: list[RecipeSummary], label: str) -> dict[str, Any]:
    passed = sum(s.passed for s in summaries)
    ran = sum(s.ran for s in summaries)
    lowered = sum(s.counts[Status.LOWERED] for s in summaries)
    fallback = sum(s.fallback for s in summaries)
    delegated = sum(s.delegated or 0 for s in summaries)  # recipes without a partitioner delegate nothing
    message = f"{passed}/{ran}" + (f" ({delegated} delegated)" if fallback else "") if ran else \
        "nothing verified" + (f": {lowered} lowered, not run here" if lowered else "")
    return {"schemaVersion": 1, "label": label, "message": message, "color": colour(passed, ran)}


def svg(fields: dict[str, Any]) -> str:
    import anybadge

    badge = anybadge.Badge(label=fields["label"], value=fields["message"], default_color=_HEX[fields["color"]])
    return str(badge.badge_svg_text)


def write(header: dict[str, Any], records: Sequence[Record], out_dir: Path) -> dict[str, Path]:
    """``badge.svg``/``badge.json`` for the whole run, plus ``badge-<recipe>.{svg,json}`` per recipe."""
    summaries = by_recipe(header, records)
    suites = "+".join(Path(s).stem if s.endswith((".yaml", ".yml")) else s for s in header.get("suites") or []) or "bti"
    targets = [("badge", list(summaries.values()), f"bti {suites}")]
    # a recipe name comes from the results file (untrusted): it never becomes a path outside out_dir
    targets += [(f"badge-{re.sub(r'[^A-Za-z0-9._-]', '-', name).lstrip('.') or 'recipe'}", [s], f"{name} {suites}")
                for name, s in summaries.items()]
    paths: dict[str, Path] = {}
    for stem, group, label in targets:
        fields = badge_fields(group, label)
        paths[f"{stem}.json"] = out_dir / f"{stem}.json"
        atomic_write_text(paths[f"{stem}.json"], json.dumps(fields, sort_keys=True) + "\n")
        paths[f"{stem}.svg"] = out_dir / f"{stem}.svg"
        atomic_write_text(paths[f"{stem}.svg"], svg(fields))
    return paths
