"""Reports from the JSONL alone. Nothing under ``harness.report`` imports torch or executorch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from harness.errors import UserError, first_line
from harness.results import read_results


class ReportError(UserError):
    """A report could not be written (the others were, and the results file is intact)."""

    def __init__(self, message: str, paths: dict[str, Path] | None = None) -> None:
        super().__init__(message)
        self.paths = paths or {}

__all__ = ["write_reports"]


FORMATS = ("junit", "md", "csv", "badge", "html", "opdiff")


def write_reports(jsonl: Path, out_dir: Path, formats: tuple[str, ...] = FORMATS) -> dict[str, Path]:
    """Write each wanted report on its own: one that fails does not stop the others, and the error
    (raised after all ran) names each writer that failed. The JSONL is never touched."""
    from harness.report import badge, csvout, dashboard, junit, markdown, opdiff
    from harness.results import atomic_write_text

    header, records = read_results(jsonl)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ReportError(f"{out_dir}: cannot create the report directory: {exc.strerror}") from None
    paths: dict[str, Path] = {}
    h = dict(header)

    def text(kind: str, name: str, render: Callable[[], str]) -> Callable[[], None]:
        def write() -> None:
            atomic_write_text(out_dir / name, render())
            paths[kind] = out_dir / name
        return write

    def write_junit() -> None:
        junit.write(h, records, out_dir / "junit.xml")
        paths["junit"] = out_dir / "junit.xml"

    writers: dict[str, Callable[[], None]] = {
        "junit": write_junit,
        "md": text("md", "summary.md", lambda: markdown.render(h, records)),
        "csv": text("csv", "results.csv", lambda: csvout.render(records)),
        "badge": lambda: paths.update(badge.write(h, records, out_dir)),
        "html": text("html", "dashboard.html", lambda: dashboard.render(h, records)),
        "opdiff": text("opdiff", "opdiff.jsonl", lambda: opdiff.render(h, records)),
    }
    failed: list[str] = []
    for kind in formats:
        try:
            writers[kind]()
        except Exception as exc:  # each writer on its own: the others still get written
            failed.append(f"{kind}: {type(exc).__name__}: {first_line(str(exc)) or 'no message'}")
    if failed:
        done = ", ".join(paths) or "none"
        raise ReportError(f"report writer(s) failed: {'; '.join(failed)} (written: {done}; the JSONL is intact)", paths)
    return paths
