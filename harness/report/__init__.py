"""Reports from the JSONL alone. Nothing under ``harness.report`` imports torch or executorch."""

from __future__ import annotations

from pathlib import Path

from harness.results import read_results

__all__ = ["write_reports"]


FORMATS = ("junit", "md", "csv", "badge", "html")


def write_reports(jsonl: Path, out_dir: Path, formats: tuple[str, ...] = FORMATS) -> dict[str, Path]:
    from harness.report import badge, csvout, dashboard, junit, markdown
    from harness.results import atomic_write_text

    header, records = read_results(jsonl)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths: dict[str, Path] = {}
    if "junit" in formats:
        paths["junit"] = out_dir / "junit.xml"
        junit.write(header, records, paths["junit"])
    if "md" in formats:
        paths["md"] = out_dir / "summary.md"
        atomic_write_text(paths["md"], markdown.render(header, records))
    if "csv" in formats:
        paths["csv"] = out_dir / "results.csv"
        atomic_write_text(paths["csv"], csvout.render(records))
    if "badge" in formats:
        paths.update(badge.write(header, records, out_dir))
    if "html" in formats:
        paths["html"] = out_dir / "dashboard.html"
        atomic_write_text(paths["html"], dashboard.render(header, records))
    return paths
