"""Reports from the JSONL alone. Nothing under ``harness.report`` imports torch or executorch."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from harness.errors import UserError, first_line
from harness.results import read_records


class ReportError(UserError):
    """A report could not be written (the others were, and the results file is intact)."""

    def __init__(self, message: str, paths: dict[str, Path] | None = None) -> None:
        super().__init__(message)
        self.paths = paths or {}

__all__ = ["write_reports"]


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {first_line(str(exc)) or 'no message'}"


def _forked(write: Callable[[], None]) -> Callable[[], str | None] | None:
    """Start ``write()`` in a forked child (it shares the records read so far, copy-on-write); the callable returned
    waits for it and gives its error, or None. None when no child can be started: the caller writes in-process."""
    try:
        rfd, wfd = os.pipe()
    except OSError:
        return None
    try:
        pid = os.fork()
    except OSError:
        os.close(rfd)
        os.close(wfd)
        return None
    if pid == 0:  # the child: never returns, whatever happens in it
        code = 1
        try:
            os.close(rfd)
            try:
                write()
                message, code = b"", 0
            except BaseException as exc:  # reported to the parent as that writer's failure
                message = _why(exc).encode("utf-8", "replace")
            os.write(wfd, message)
        finally:
            os._exit(code)
    os.close(wfd)

    def wait() -> str | None:
        with os.fdopen(rfd, "rb") as r:
            message = r.read().decode("utf-8", "replace")
        _, status = os.waitpid(pid, 0)
        if os.WIFSIGNALED(status):
            return f"its process was killed by signal {os.WTERMSIG(status)}"
        return message or (None if os.WEXITSTATUS(status) == 0 else "its process failed without a message")
    return wait


BTI_FORMATS = ("junit", "md", "csv", "badge", "html")


def formats(wanted: tuple[str, ...] = ()) -> tuple[str, ...]:
    """bti's own report formats, then the case sources' own results formats (``harness.suites.report_formats``;
    a registered source's own only when ``wanted`` names a format the built-ins lack)."""
    from harness.suites import report_formats

    return (*BTI_FORMATS, *report_formats(tuple(w for w in wanted if w not in BTI_FORMATS)))


def _source_format(render: Callable[..., object], header: dict[str, object], records: object) -> Callable[[], str]:
    """A case source's own results format as a writer's render step: ``render(header, records)``'s text."""
    return lambda: str(render(header, records))


def write_reports(jsonl: Path, out_dir: Path, formats: tuple[str, ...] = BTI_FORMATS) -> dict[str, Path]:
    """Write each wanted report on its own: one that fails does not stop the others, and the error
    (raised after all ran) names each writer that failed. The JSONL is never touched. Each writer makes its own
    passes over the records, one record at a time (``Records``)."""
    from harness.report import badge, csvout, dashboard, junit, markdown
    from harness.results import atomic_write_text
    from harness.suites import report_formats, resolve_ref

    header, records = read_records(jsonl)
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
    }
    for kind, (name, ref) in report_formats(tuple(f for f in formats if f not in writers)).items():  # the sources' own
        if kind in formats:
            writers[kind] = text(kind, name, _source_format(resolve_ref(ref), h, records))
    failed: list[str] = []
    # JUnit, the slowest writer (~40 % of the time at 134,000 records), runs in a forked child beside the others
    child = _forked(write_junit) if "junit" in formats and len(formats) > 1 and hasattr(os, "fork") else None
    for kind in formats:
        if child is not None and kind == "junit":
            continue
        try:
            writers[kind]()
        except Exception as exc:  # each writer on its own: the others still get written
            failed.append(f"{kind}: {_why(exc)}")
    if child is not None:
        error = child()
        if error is None:
            paths["junit"] = out_dir / "junit.xml"
        else:
            failed.insert(0, f"junit: {error}")
            junit.remove_partial(out_dir / "junit.xml")  # a child killed mid-write leaves its parts
    if failed:
        done = ", ".join(paths) or "none"
        raise ReportError(f"report writer(s) failed: {'; '.join(failed)} (written: {done}; the JSONL is intact)", paths)
    return paths
