"""``bti run``: suites × recipes into results.jsonl, then the reports; the exit code is the verdict."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from harness.cli.group import cli
from harness.cli.options import (
    filter_options,
    filters,
    parse_skips,
    recipes_of,
    runtime_option,
    runtime_options,
    suite_options,
    suites_of,
)
from harness.cli.reports import report as report_cmd
from harness.errors import UserError


def _finite(value: float | None, name: str) -> float | None:
    if value is not None and value != value:
        raise click.BadParameter(f"{name}: expected a number of gigabytes, not nan")
    return value


@cli.command()
@filter_options
@click.option("-o", "--out-dir", type=click.Path(path_type=Path), default=Path("out"), show_default=True, help="Where results.jsonl and the reports go.")
@click.option("--jsonl", type=click.Path(path_type=Path), help="Results file (default: OUT_DIR/results.jsonl).")
@click.option("-j", "--jobs", type=click.IntRange(1), default=os.cpu_count() or 1, show_default="CPU count", help="Worker processes.")
@click.option("--timeout", type=click.FloatRange(0.1), default=600.0, show_default=True, help="Seconds per item before TIMEOUT (a case may declare longer: large zoo rows).")
@click.option("--worker-memory", type=click.FloatRange(0.1, 1e6), metavar="GB", callback=lambda _c, _p, v: _finite(v, "--worker-memory"),
              help="A worker above this RSS is killed (its item: CRASH, out of memory); a case declaring more is SKIP. "
              "[default: 90% of RAM / --jobs; BTI_WORKER_MEMORY_GB]")
@click.option("--resume", is_flag=True, help="Continue a killed run: keep recorded items, run the rest.")
@click.option("--reuse/--no-reuse", default=None, help="Reuse cached results of unchanged items. Default: on, off when $CI is set.")
@click.option("--cache-dir", type=click.Path(path_type=Path), help="Result cache (default: $BTI_CACHE_DIR or .bti-cache).")
@click.option("--shard", help="Run shard i/n of the matrix (for a CI matrix); join with `bti merge`.")
@click.option("--durations", type=click.Path(exists=True, path_type=Path), help="A previous results.jsonl to balance shards by duration.")
@click.option("--no-speedups", is_flag=True, help="Disable the guarded export memoizations and GC schedule (see harness/speedups/).")
@click.option("--force-speedups", is_flag=True, help="Run the speedups even on a torch/executorch/torchao stack they were not verified on.")
@click.option("--threads", type=click.IntRange(1), default=1, show_default=True, help="torch threads per worker.")
@click.option("--max-items-per-worker", type=click.IntRange(1), default=400, show_default=True, help="Recycle a worker after this many items.")
@click.option("--max-worker-growth-mb", type=float, default=1024.0, show_default=True, help="Recycle a worker after this RSS growth.")
@click.option("--no-report", is_flag=True, help="Only write the JSONL.")
@click.option("--bundle", is_flag=True, help="Also write each item's device bundle (ExecuTorch: .pte and bundled program, "
              ".bpte: inputs + eager reference outputs) to OUT_DIR/programs/ for `bti bench` or a device. Runs cached items again.")
@click.option("--repro", type=click.IntRange(0), default=10, show_default=True,
              help="Write a standalone script (`bti repro`: torch + executorch, no bti) for each of the first N unexpected "
              "failures on ExecuTorch recipes to OUT_DIR/repro/; 0: none.")
@click.option("--rerun-failures", type=click.IntRange(0, 10), default=0, show_default=True,
              help="Re-run each failing item up to N times in a fresh worker; items whose attempts disagree are FLAKY.")
@click.option("--baseline", help="A recipe whose outputs are the reference instead of eager CPU (added to the run); items "
              "whose baseline failed are BLOCKED. Turns result reuse off.")
@runtime_options
@click.option("--runtime-threads", type=click.IntRange(1), help="The ExecuTorch runtime's thread pool size.")
@click.option("--control", default="portable", show_default=True,
              help="Triage: a failure this recipe (when in the run) shares on the same case is marked upstream.")
@click.option("--upstream-repo", help="Upstream owner/name being tested (recorded in the header).")
@click.option("--upstream-sha", help="Upstream commit (40 hex).")
@click.option("--upstream-pr", type=int, help="Upstream pull request number.")
@click.option("--upstream-package", help="The distribution built from the upstream repo (e.g. executorch): its installed "
              "version and VCS commit go into the header, and a check is posted on --upstream-sha only if they match.")
@click.option("--allow-suite-code", is_flag=True, help="Let opdiff suites' `file:x.py::Name` paths run code from any "
              "file they reach (by default only in the suites named with -s and the files they include from their folder).")
@click.option("--seed", type=int, default=0, show_default=True, help="opdiff suites: the base seed of their inputs (opdiff's --seed).")
@click.option("--sampled-inputs", type=click.IntRange(1, 1000), default=1, show_default=True,
              help="opdiff suites: independently sampled input sets per test, each run and compared (opdiff's --num-sampled-inputs).")
@click.option("--repeats", type=click.IntRange(1), help="Timed runs per item, for every recipe (its runtime.repeats; opdiff's --repeats); none after a warm call of 10 s.")
@click.option("--warmup", type=click.IntRange(0), help="Untimed runs before them, for every recipe (its runtime.warmup).")
@click.option("--allow-unverified", is_flag=True, help="Exit 0 even where a recipe verified nothing (every item UNAVAILABLE, "
              "LOWERED, SKIP or BLOCKED): for sweeps that list recipes whose runtime is not on every runner.")
@click.option("--skips", "skips", multiple=True, metavar="ID:RECIPE[;…]",
              help="SKIP these items (opdiff's --skips: id or id* prefix, then a recipe or *); repeatable.")
def run(**kw: Any) -> None:
    """Run suites × recipes; write results.jsonl, then the reports. Exit 1 on any unexpected failure, or where a
    recipe verified nothing (unless --allow-unverified)."""
    from harness.runner.run import RunOptions, execute
    from harness.settings import resolve, use

    out_dir: Path = kw["out_dir"]
    jsonl: Path = kw["jsonl"] or out_dir / "results.jsonl"
    settings = resolve(cache_dir=kw["cache_dir"], reuse=kw["reuse"], speedups=False if kw["no_speedups"] else None,
                       force_speedups=kw["force_speedups"] or None, item_timeout_s=kw["timeout"],
                       worker_memory_gb=kw["worker_memory"])
    upstream: dict[str, Any] = {k: kw[f"upstream_{k}"] for k in ("repo", "sha", "pr") if kw[f"upstream_{k}"] is not None}
    if kw["upstream_package"]:
        from harness.env import installed

        upstream["installed"] = installed(kw["upstream_package"])
    opts = RunOptions(
        suites=suites_of(kw), recipes=recipes_of(kw), out=jsonl, settings=settings, filters=filters(kw), jobs=kw["jobs"],
        resume=kw["resume"], shard=kw["shard"], durations=kw["durations"], upstream=upstream,
        threads=kw["threads"], max_items=kw["max_items_per_worker"], max_growth_mb=kw["max_worker_growth_mb"],
        bundle_dir=(out_dir / "programs") if kw["bundle"] else None, argv=sys.argv[1:],
        control=kw["control"] or None, rerun_failures=kw["rerun_failures"], baseline=kw["baseline"],
        runtime=runtime_option(kw), runtime_threads=kw["runtime_threads"], suite_options=suite_options(kw),
        skips=parse_skips(kw["skips"]), warmup=kw["warmup"], repeats=kw["repeats"],
    )
    bar = _Bar() if sys.stderr.isatty() else None  # quiet when not a terminal (CI logs)
    try:
        with use(settings):
            result = execute(opts, progress=bar)
    finally:
        if bar:
            bar.close()
    if kw["repro"]:  # the suite files this command was given (trusted: never paths read back from the results)
        _write_repros(jsonl, out_dir / "repro", kw["repro"], tuple(s for s in opts.suites if s.endswith((".yaml", ".yml"))))
    if not kw["no_report"]:
        # Reports come from the JSONL alone: exactly `bti report` (its options and environment
        # variables, e.g. $GITHUB_STEP_SUMMARY), run in this process to save an interpreter start.
        # The job summary is `bti report --step-summary`'s business (the composite action calls it): not
        # appended here too, even when $GITHUB_STEP_SUMMARY is set.
        try:
            report_cmd.main([str(jsonl), "--out-dir", str(out_dir), "--step-summary", os.devnull, "--quiet"], standalone_mode=False)
        except UserError as exc:  # a report failed: still give the verdict, then exit 2 naming the writer
            _verdict(jsonl, result.executed, result.reused, kw["allow_unverified"])
            raise exc from None
    code = _verdict(jsonl, result.executed, result.reused, kw["allow_unverified"])
    raise SystemExit(code)


def _write_repros(jsonl: Path, directory: Path, limit: int, suites: tuple[str, ...]) -> None:
    """``bti repro`` for the run's unexpected failures (ExecuTorch recipes): what the PR comment and the portal link."""
    from harness.repro import write_failures

    written, skipped = write_failures(jsonl, directory, limit, suites)
    if written:
        click.echo(f"bti: {len(written)} standalone repro script(s) in {directory} (torch + executorch, no bti)", err=True)
    if skipped:
        click.echo(f"bti: no repro script for {len(skipped)} failure(s), e.g. {skipped[0]}", err=True)


class _Bar:
    """click's progress bar over the items of the run, showing the last item's status."""

    def __init__(self) -> None:
        self.bar: Any = None

    def start(self, total: int) -> None:
        self.bar = click.progressbar(length=max(total, 1), label="bti", file=sys.stderr, show_pos=True, show_eta=True,
                                     item_show_func=lambda rec: f"{rec['status']} {rec['id']}"[:70] if rec else "")
        self.bar.__enter__()

    def advance(self, record: Any) -> None:
        if self.bar is not None:
            self.bar.update(1, record)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.__exit__(None, None, None)


def _verdict(jsonl: Path, executed: int, reused: int, allow_unverified: bool = False) -> int:
    """1 on any unexpected failure, or where a recipe of the run verified nothing (unless ``allow_unverified``)."""
    from collections import Counter

    from harness.report.summary import unverified
    from harness.results import read_latest, status_of

    header, latest = read_latest(jsonl)
    counts = Counter(status_of(r) for r in latest)
    fails = sum(n for s, n in counts.items() if s.is_failure)
    summary = ", ".join(f"{n} {s.value}" for s, n in sorted(counts.items(), key=lambda kv: kv[0].value))
    click.echo(f"bti: {len(latest)} items ({executed} executed, {reused} reused): {summary} -> {jsonl}", err=True)
    empty = unverified(dict(header or {}), latest)
    for s in empty:
        then = "allowed (--allow-unverified)" if allow_unverified else "exit 1 (--allow-unverified to accept it)"
        click.echo(f"bti: nothing verified on {s.name} ({s.unverified_reason()}): {then}", err=True)
    return 1 if fails or (empty and not allow_unverified) else 0


