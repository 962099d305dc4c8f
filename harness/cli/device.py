"""``bti bench``, ``bti verify`` and ``bti runner build``: programs on a runtime or a device."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from harness.cli.group import cli
from harness.cli.options import runtime_option, runtime_options, tolerance_options
from harness.cli.reports import report
from harness.errors import UserError


@cli.command()
@click.argument("program", type=click.Path(path_type=Path))
@click.argument("other", required=False, type=click.Path(path_type=Path))
@click.option("--method", default="forward", show_default=True)
@click.option("--warmup", type=click.IntRange(0), default=3, show_default=True, help="Untimed runs first.")
@click.option("--repeats", type=click.IntRange(1), default=20, show_default=True, help="Timed runs.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for inputs generated for a .pte.")
@click.option("--reference", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="For a .pte: an exported program (torch.export.save) to compare outputs against.")
@tolerance_options
@click.option("--recipe", help="Take the accuracy criteria from this recipe's tolerances (quantized: its SQNR floor).")
@click.option("--threads", type=click.IntRange(1), help="The ExecuTorch runtime's thread pool size.")
@runtime_options
@click.option("--json", "json_out", type=click.Path(path_type=Path), help="Also write the measurements here as JSON.")
@click.option("--markdown", "md_out", type=click.Path(path_type=Path), help="Also write a Markdown table here (for a job summary).")
def bench(program: Path, other: Path | None, method: str, warmup: int, repeats: int, seed: int, reference: Path | None,
          json_out: Path | None, md_out: Path | None, recipe: str | None, threads: int | None, **kw: Any) -> None:
    """Load time, latency, memory and accuracy of a .pte or a bundled .bpte on an ExecuTorch runtime; with two
    programs (A B), both run interleaved on the same inputs and bti prints the latency ratio with its 95 %
    interval and how far their outputs agree.

    Accuracy criteria: --atol/--rtol/--sqnr-db/--cosine, else --recipe's tolerances, else the tolerance the
    item was judged by (the card `bti run --bundle` writes beside the .bpte), else atol = rtol = 1e-3. A .bpte
    brings its inputs and expected outputs and (with atol/rtol, in process) is also checked by the runtime's
    own bundled-program verification. Exit 1 when an accuracy check fails.
    """
    from harness.bench import bench as do_bench
    from harness.bench import markdown, render
    from harness.quiet import quiet
    from harness.results import atomic_write_text, dumps

    quiet()
    runtime = runtime_option(kw)
    tol = {k: kw[k] for k in ("atol", "rtol", "sqnr_db", "cosine")}
    total = (warmup + repeats)
    bar = click.progressbar(length=total, label="bench", file=sys.stderr) if sys.stderr.isatty() and total >= 200 else None
    try:
        result = do_bench(program, method=method, warmup=warmup, repeats=repeats, seed=seed, reference=reference, tol=tol,
                          recipe=recipe, runtime=runtime[1] if runtime else None, threads=threads, other=other,
                          progress=bar.update if bar is not None else None)
    finally:
        if bar is not None:
            bar.render_finish()
    click.echo(render(result))
    for path, text in ((json_out, dumps(result) + "\n"), (md_out, markdown(result))):
        if path is None:
            continue
        if not path.parent.is_dir():
            raise UserError(f"cannot write {path}: no directory {path.parent}")
        try:
            atomic_write_text(path, text)
        except OSError as exc:
            raise UserError(f"cannot write {path}: {exc.strerror or exc}") from None
    if not result["ok"]:
        raise SystemExit(1)


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@runtime_options
@click.option("--threads", type=click.IntRange(1), help="The ExecuTorch runtime's thread pool size.")
@tolerance_options
@click.option("--results", type=click.Path(path_type=Path), help="The results.jsonl the bundles came from (tolerances, "
              "ids). Default: the one beside their programs/ directory, if any.")
@click.option("--warmup", type=click.IntRange(0), default=1, show_default=True)
@click.option("--repeats", type=click.IntRange(1), default=3, show_default=True)
@click.option("--timeout", type=click.FloatRange(0.1), default=600.0, show_default=True, help="Seconds per bundle (runner, command).")
@click.option("-o", "--out-dir", type=click.Path(path_type=Path), default=Path("out-verify"), show_default=True)
@click.option("--no-report", is_flag=True, help="Only write the JSONL.")
def verify(paths: tuple[Path, ...], threads: int | None, results: Path | None, warmup: int, repeats: int, timeout: float,
           out_dir: Path, no_report: bool, **kw: Any) -> None:
    """Run bundled programs (.bpte files, or directories of them) through a runtime provider and check each
    against the outputs it carries, with the tolerance its item was judged by. Writes OUT_DIR/results.jsonl
    (the normal results format: every report and publisher works on it) and the reports. Exit 1 on any failure."""
    from harness.providers import ProviderSpec, RunOptions
    from harness.quiet import quiet
    from harness.verify import verify as do_verify

    quiet()
    runtime = runtime_option(kw)
    spec = runtime[1] if runtime else ProviderSpec()
    override = {k: float(kw[k]) for k in ("atol", "rtol", "sqnr_db", "cosine") if kw[k] is not None}
    jsonl = out_dir / "results.jsonl"
    records = do_verify(list(paths), spec, jsonl, RunOptions(warmup, repeats, threads, timeout), results, override,
                        sys.argv[1:])
    if not no_report:
        report.main([str(jsonl), "--out-dir", str(out_dir), "--step-summary", os.devnull, "--quiet"], standalone_mode=False)
    from harness.status import Status

    failed = [r for r in records if Status(r["status"]).is_failure]
    click.echo(f"bti verify: {len(records)} bundle(s) through {spec.kind}: {len(records) - len(failed)} passed, "
               f"{len(failed)} failed -> {jsonl}")
    for r in failed[:20]:
        click.echo(f"  {r['status']} {r['id']}: {r.get('detail', '')[:160]}")
    raise SystemExit(1 if failed else 0)


@cli.group()
def runner() -> None:
    """The C++ runner (`bti_runner`) the runner and command providers start."""


@runner.command("build")
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Where the binary goes (default: $BTI_CACHE_DIR/runner/bti_runner).")
def runner_build(output: Path | None) -> None:
    """Build bti_runner from the headers and libraries the installed executorch wheel ships (needs a C++ compiler
    and CMake)."""
    from harness.runner_build import build

    path = build(output)
    click.echo(str(path))


