"""The ``bti`` command line. ``main(argv)`` is the one exit point: user errors exit 2 with one line."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click

from harness import __version__
from harness.errors import UserError

DEFAULT_RECIPES = ("portable", "xnnpack")


def _filter_options(fn: Any) -> Any:
    opts = [
        click.option("-s", "--suite", "suites", multiple=True, help="Suite name (ops, models, smoke…) or a suite .yaml; repeatable. Default: ops + models."),
        click.option("-r", "--recipe", "recipes", multiple=True, help="Recipe name or .yaml path; repeatable. Default: portable + xnnpack."),
        click.option("-k", "--filter", "patterns", multiple=True, help="Glob on case id, case[axes] or item id; repeatable (any)."),
        click.option("--exclude", multiple=True, help="Glob of items to leave out; repeatable."),
        click.option("--op", "ops", multiple=True, help="Operator: add, aten::add or aten::add.Tensor; repeatable."),
        click.option("--tag", "tags", multiple=True, help="Case tag; repeatable (any)."),
        click.option("--dtype", "dtypes", multiple=True, help="Only this dtype axis value; repeatable."),
        click.option("--shape", "shapes", multiple=True, type=click.Choice(["static", "dynamic"]), help="Only this shape axis value."),
    ]
    for opt in reversed(opts):
        fn = opt(fn)
    return fn


def _filters(kw: dict[str, Any]) -> Any:
    from harness.runner.matrix import Filters

    return Filters(patterns=tuple(kw["patterns"]), ops=tuple(kw["ops"]), tags=tuple(kw["tags"]),
                   dtypes=tuple(kw["dtypes"]), shapes=tuple(kw["shapes"]), exclude=tuple(kw["exclude"]))


def _suites(kw: dict[str, Any]) -> list[str]:
    from harness.suites import DEFAULT_SUITES

    return list(kw["suites"]) or list(DEFAULT_SUITES)


def _recipes(kw: dict[str, Any]) -> list[str]:
    return list(kw["recipes"]) or list(DEFAULT_RECIPES)


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="bti")
def cli() -> None:
    """bti — export, quantize, lower, run and compare PyTorch models and operators on ExecuTorch backends."""


@cli.command()
@_filter_options
@click.option("-o", "--out-dir", type=click.Path(path_type=Path), default=Path("out"), show_default=True, help="Where results.jsonl and the reports go.")
@click.option("--jsonl", type=click.Path(path_type=Path), help="Results file (default: OUT_DIR/results.jsonl).")
@click.option("-j", "--jobs", type=click.IntRange(1), default=os.cpu_count() or 1, show_default="CPU count", help="Worker processes.")
@click.option("--timeout", type=click.FloatRange(0.1), default=600.0, show_default=True, help="Seconds per item before TIMEOUT.")
@click.option("--resume", is_flag=True, help="Continue a killed run: keep recorded items, run the rest.")
@click.option("--reuse/--no-reuse", default=None, help="Reuse cached results of unchanged items. Default: on, off when $CI is set.")
@click.option("--cache-dir", type=click.Path(path_type=Path), help="Result cache (default: $BTI_CACHE_DIR or .bti-cache).")
@click.option("--shard", help="Run shard i/n of the matrix (for a CI matrix); join with `bti merge`.")
@click.option("--durations", type=click.Path(exists=True, path_type=Path), help="A previous results.jsonl to balance shards by duration.")
@click.option("--no-speedups", is_flag=True, help="Disable the guarded export memoizations and GC schedule (see harness/speedups.py).")
@click.option("--force-speedups", is_flag=True, help="Run the speedups even on a torch/executorch/torchao stack they were not verified on.")
@click.option("--threads", type=click.IntRange(1), default=1, show_default=True, help="torch threads per worker.")
@click.option("--max-items-per-worker", type=click.IntRange(1), default=400, show_default=True, help="Recycle a worker after this many items.")
@click.option("--max-worker-growth-mb", type=float, default=1024.0, show_default=True, help="Recycle a worker after this RSS growth.")
@click.option("--no-report", is_flag=True, help="Only write the JSONL.")
@click.option("--bundle", is_flag=True, help="Also write each item's device bundle (ExecuTorch: .pte and bundled program, "
              ".bpte: inputs + eager reference outputs) to OUT_DIR/programs/ for `bti bench` or a device. Runs cached items again.")
@click.option("--rerun-failures", type=click.IntRange(0, 10), default=0, show_default=True,
              help="Re-run each failing item up to N times in a fresh worker; items whose attempts disagree are FLAKY.")
@click.option("--baseline", help="A recipe whose outputs are the reference instead of eager CPU (added to the run); items "
              "whose baseline failed are BLOCKED. Turns result reuse off.")
@click.option("--runtime", "runtime_spec", metavar="SPEC",
              help="Where ExecuTorch programs run: pybind (in the worker; default), runner[:PATH] (an executor_runner-style "
              "binary; `bti runner build`), or command:TEMPLATE (reaches a device, e.g. command:'adb -s {serial} shell "
              "/data/local/tmp/bti_runner {args}'). See harness/providers.py.")
@click.option("--runtime-push", metavar="TEMPLATE", help="command provider: copy a file to the device ({local} {remote}).")
@click.option("--runtime-pull", metavar="TEMPLATE", help="command provider: copy an output back ({remote} {local}).")
@click.option("--runtime-remote-dir", metavar="DIR", help="command provider: the device directory files are pushed to.")
@click.option("--runtime-var", "runtime_vars", multiple=True, metavar="NAME=VALUE", help="A {NAME} for the templates (e.g. serial=…).")
@click.option("--runtime-threads", type=click.IntRange(1), help="The ExecuTorch runtime's thread pool size.")
@click.option("--control", default="portable", show_default=True,
              help="Triage: a failure this recipe (when in the run) shares on the same case is marked upstream.")
@click.option("--upstream-repo", help="Upstream owner/name being tested (recorded in the header).")
@click.option("--upstream-sha", help="Upstream commit (40 hex).")
@click.option("--upstream-pr", type=int, help="Upstream pull request number.")
@click.option("--upstream-package", help="The distribution built from the upstream repo (e.g. executorch): its installed "
              "version and VCS commit go into the header, and a check is posted on --upstream-sha only if they match.")
def run(**kw: Any) -> None:
    """Run suites × recipes; write results.jsonl, then the reports. Exit 1 on any unexpected failure."""
    from harness.runner.cache import default_dir
    from harness.runner.run import RunOptions, execute

    out_dir: Path = kw["out_dir"]
    jsonl: Path = kw["jsonl"] or out_dir / "results.jsonl"
    reuse = kw["reuse"] if kw["reuse"] is not None else not os.environ.get("CI")
    upstream: dict[str, Any] = {k: kw[f"upstream_{k}"] for k in ("repo", "sha", "pr") if kw[f"upstream_{k}"] is not None}
    if kw["upstream_package"]:
        from harness.env import installed

        upstream["installed"] = installed(kw["upstream_package"])
    if kw["cache_dir"]:
        os.environ["BTI_CACHE_DIR"] = str(kw["cache_dir"])  # backends' own caches (inductor's) follow it
    opts = RunOptions(
        suites=_suites(kw), recipes=_recipes(kw), out=jsonl, filters=_filters(kw), jobs=kw["jobs"],
        timeout=kw["timeout"], resume=kw["resume"], cache_dir=(kw["cache_dir"] or default_dir()) if reuse else None,
        shard=kw["shard"], durations=kw["durations"], upstream=upstream, speedups=not kw["no_speedups"],
        force_speedups=kw["force_speedups"],
        threads=kw["threads"], max_items=kw["max_items_per_worker"], max_growth_mb=kw["max_worker_growth_mb"],
        bundle_dir=(out_dir / "programs") if kw["bundle"] else None, argv=sys.argv[1:],
        control=kw["control"] or None, rerun_failures=kw["rerun_failures"], baseline=kw["baseline"],
        runtime=_runtime_option(kw), runtime_threads=kw["runtime_threads"],
    )
    bar = _Bar() if sys.stderr.isatty() else None  # quiet when not a terminal (CI logs)
    try:
        result = execute(opts, progress=bar)
    finally:
        if bar:
            bar.close()
    if not kw["no_report"]:
        # Reports come from the JSONL alone: exactly `bti report` (its options and environment
        # variables, e.g. $GITHUB_STEP_SUMMARY), run in this process to save an interpreter start.
        # The job summary is `bti report --step-summary`'s business (the composite action calls it): not
        # appended here too, even when $GITHUB_STEP_SUMMARY is set.
        try:
            report.main([str(jsonl), "--out-dir", str(out_dir), "--step-summary", os.devnull, "--quiet"], standalone_mode=False)
        except UserError as exc:  # a report failed: still give the verdict, then exit 2 naming the writer
            _verdict(jsonl, result.executed, result.reused)
            raise exc from None
    code = _verdict(jsonl, result.executed, result.reused)
    raise SystemExit(code)


def _runtime_option(kw: dict[str, Any]) -> tuple[str, Any] | None:
    """``--runtime`` and its companions, checked (bad ones: one line, exit 2)."""
    from harness.providers import parse_spec

    spec = kw.get("runtime_spec")
    extras = [k for k in ("runtime_push", "runtime_pull", "runtime_remote_dir") if kw.get(k)] + (["runtime_var"] if kw.get("runtime_vars") else [])
    if spec is None:
        if extras:
            raise UserError(f"--{extras[0].replace('_', '-')} needs --runtime command:TEMPLATE")
        return None
    variables = {}
    for v in kw.get("runtime_vars") or ():
        name, eq, value = v.partition("=")
        if not eq or not name.isidentifier():
            raise UserError(f"--runtime-var takes NAME=VALUE, not {v!r}")
        variables[name] = value
    try:
        parsed = parse_spec(spec, kw.get("runtime_push"), kw.get("runtime_pull"), kw.get("runtime_remote_dir"), variables)
        if parsed.kind == "runner":
            from harness.providers import runner_command

            runner_command(parsed.target)  # no runner binary: say so before any work
    except ValueError as exc:
        raise UserError(f"--runtime: {exc}") from None
    return spec, parsed


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


def _verdict(jsonl: Path, executed: int, reused: int) -> int:
    from collections import Counter

    from harness.results import read_latest, status_of

    _, latest = read_latest(jsonl)
    counts = Counter(status_of(r) for r in latest)
    fails = sum(n for s, n in counts.items() if s.is_failure)
    summary = ", ".join(f"{n} {s.value}" for s, n in sorted(counts.items(), key=lambda kv: kv[0].value))
    click.echo(f"bti: {len(latest)} items ({executed} executed, {reused} reused): {summary} -> {jsonl}", err=True)
    return 1 if fails else 0


@cli.command("list")
@_filter_options
@click.option("--recipes", "list_recipes", is_flag=True, help="List recipes with availability instead of items.")
@click.option("--coverage", is_flag=True, help="Per operator: cases, dtypes, whether a dynamic-shape variant exists; then the core ATen ops not covered.")
def list_cmd(list_recipes: bool, coverage: bool, **kw: Any) -> None:
    """Print the expanded item ids (op.<op>.<variant>[dtype,shape]@<recipe>), one per line."""
    if list_recipes:
        _print_recipes(kw["recipes"])
        return
    if coverage:
        from harness.report.coverage import render, table
        from harness.suites import load_suites

        cases = load_suites(list(kw["suites"]) or ["ops", "core-ops"])
        entries = [{"op": c.op, "dtype": d, "shape": s} for c in cases for d in c.dtypes for s in c.shapes]
        click.echo(render(table(entries))[0], nl=False)
        return
    from harness.runner.run import plan

    _, items = plan(_suites(kw), _recipes(kw), _filters(kw))
    for item in items:
        click.echo(item.id)


def _print_recipes(names: tuple[str, ...]) -> None:
    from harness.backends import unavailable_reason
    from harness.recipes import available_recipe_files, load_recipe

    for name in names or sorted(available_recipe_files()):
        recipe = load_recipe(name)
        reason = unavailable_reason(recipe)
        state = "available" if reason is None else f"UNAVAILABLE: {reason}"
        click.echo(f"{recipe.name}\t{state}\t{recipe.description}")


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
def validate(files: tuple[Path, ...]) -> None:
    """Load and expand suite files (or recipe files) without running anything."""
    from harness.cases.suite import load_suite
    from harness.cases.yamlload import load_yaml
    from harness.recipes import parse_recipe

    for path in files:
        doc = load_yaml(path)
        if isinstance(doc, dict) and "backend" in doc:
            recipe = parse_recipe(path)
            unchecked = f"; backend options not checked: {recipe.options_error}" if recipe.options_error else ""
            click.echo(f"{path}: recipe {recipe.name} ok (hash {recipe.hash}){unchecked}")
            continue
        cases = load_suite(path)
        variants = sum(len(c.dtypes) * len(c.shapes) for c in cases)
        ops = {c.op for c in cases}
        click.echo(f"{path}: ok, {len(cases)} cases, {len(ops)} ops, {variants} case×axes variants")


@cli.command()
@click.argument("jsonl", type=click.Path(path_type=Path))
@click.option("-o", "--out-dir", type=click.Path(path_type=Path), default=Path("out"), show_default=True)
@click.option("--format", "formats", default="junit,md,csv,badge,html", show_default=True,
              help="Comma-separated: junit, md, csv, badge, html (dashboard.html).")
@click.option("--step-summary", type=click.Path(path_type=Path), envvar="GITHUB_STEP_SUMMARY", help="Append the Markdown summary here (default: $GITHUB_STEP_SUMMARY).")
@click.option("--github-output", type=click.Path(path_type=Path), help="Append passed=, failed=, total= lines here ($GITHUB_OUTPUT).")
@click.option("--coverage", is_flag=True, help="Also write coverage.md/coverage.json: the core ATen ops these results cover and miss.")
@click.option("--readme-table", "readme", type=click.Path(path_type=Path),
              help="Fill the accelerator × model and op × backend tables between the bti:models / bti:ops markers of this file.")
@click.option("--quiet", is_flag=True)
def report(jsonl: Path, out_dir: Path, formats: str, step_summary: Path | None, github_output: Path | None, coverage: bool,
           readme: Path | None, quiet: bool) -> None:
    """Write JUnit XML, Markdown, CSV, badges and an HTML dashboard from a results JSONL. Never imports torch."""
    from harness.report import FORMATS, write_reports

    wanted = tuple(f.strip() for f in formats.split(",") if f.strip())
    bad = set(wanted) - set(FORMATS)
    if bad:
        raise UserError(f"unknown report format(s): {', '.join(sorted(bad))}")
    from harness.report import ReportError

    failed: ReportError | None = None
    try:
        paths = write_reports(jsonl, out_dir, wanted)
    except ReportError as exc:  # the others were written: the job summary and outputs still follow
        failed, paths = exc, exc.paths
    latest: list[Any] = []
    if coverage or github_output or readme:
        from harness.results import read_latest

        _, latest = read_latest(jsonl)  # read once for both
    if coverage:
        from harness.report import coverage as cov

        paths.update(cov.write(latest, out_dir))
    if readme:
        from harness.report.tables import update_readme

        for name in update_readme(readme, latest):
            paths[f"readme-{name}"] = readme
    if step_summary and "md" in paths:
        with step_summary.open("a", encoding="utf-8") as fh:
            fh.write(paths["md"].read_text(encoding="utf-8"))
    if github_output:
        from harness.github.events import write_github_output
        from harness.results import status_of

        write_github_output(str(github_output), {"passed": str(sum(status_of(r).is_pass for r in latest)),
                                                 "failed": str(sum(status_of(r).is_failure for r in latest)),
                                                 "total": str(len(latest))})
    if not quiet:
        for kind, path in paths.items():
            click.echo(f"{kind}\t{path}")
    if failed is not None:
        raise failed


def _runtime_options(f: Any) -> Any:
    for opt in reversed([
        click.option("--runtime", "runtime_spec", metavar="SPEC", help="pybind (default), runner[:PATH] or command:TEMPLATE "
                     "(see `bti run --runtime`)."),
        click.option("--runtime-push", metavar="TEMPLATE", help="command provider: copy a file to the device ({local} {remote})."),
        click.option("--runtime-pull", metavar="TEMPLATE", help="command provider: copy an output back ({remote} {local})."),
        click.option("--runtime-remote-dir", metavar="DIR", help="command provider: the device directory files go to."),
        click.option("--runtime-var", "runtime_vars", multiple=True, metavar="NAME=VALUE", help="A {NAME} for the templates."),
    ]):
        f = opt(f)
    return f


def _tolerance_options(f: Any) -> Any:
    for opt in reversed([
        click.option("--atol", type=click.FloatRange(0), help="Absolute tolerance."),
        click.option("--rtol", type=click.FloatRange(0), help="Relative tolerance."),
        click.option("--sqnr-db", type=float, help="SQNR floor in dB (quantized programs)."),
        click.option("--cosine", type=click.FloatRange(-1, 1), help="Cosine-similarity floor."),
    ]):
        f = opt(f)
    return f


@cli.command()
@click.argument("program", type=click.Path(path_type=Path))
@click.argument("other", required=False, type=click.Path(path_type=Path))
@click.option("--method", default="forward", show_default=True)
@click.option("--warmup", type=click.IntRange(0), default=3, show_default=True, help="Untimed runs first.")
@click.option("--repeats", type=click.IntRange(1), default=20, show_default=True, help="Timed runs.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed for inputs generated for a .pte.")
@click.option("--reference", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="For a .pte: an exported program (torch.export.save) to compare outputs against.")
@_tolerance_options
@click.option("--recipe", help="Take the accuracy criteria from this recipe's tolerances (quantized: its SQNR floor).")
@click.option("--threads", type=click.IntRange(1), help="The ExecuTorch runtime's thread pool size.")
@_runtime_options
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
    runtime = _runtime_option(kw)
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
@_runtime_options
@click.option("--threads", type=click.IntRange(1), help="The ExecuTorch runtime's thread pool size.")
@_tolerance_options
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
    runtime = _runtime_option(kw)
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


@cli.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--out-dir", type=click.Path(path_type=Path), default=Path("site"), show_default=True)
@click.option("--keep-history", type=click.Path(path_type=Path), metavar="DIR",
              help="Also keep a compact copy (.jsonl.gz) of every input run here: pass DIR again next time for the history.")
@click.option("--history-days", type=click.FloatRange(1), default=90, show_default=True,
              help="With --keep-history: drop copies of runs older than this (before the newest run).")
@click.option("--title", default="bti portal", show_default=True)
def portal(runs: tuple[Path, ...], out_dir: Path, keep_history: Path | None, history_days: float, title: str) -> None:
    """Build a static site from many results files or directories (shards, recipes, days): the accelerator ×
    model matrix, a page per item, history (pass rate, regressions, failure age against the 72-hour rule,
    flakiness) and plots. No server, no network: open site/index.html or publish it on GitHub Pages."""
    from harness.report.portal import build

    site = build(list(runs), out_dir, keep_history, title, history_days)
    click.echo(f"portal\t{site.index} ({site.items} items, {site.runs} runs, {site.columns} columns, {site.seconds:.1f} s)")


@cli.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="The merged results.jsonl.")
def merge(inputs: tuple[Path, ...], output: Path) -> None:
    """Join shard results (from `bti run --shard i/n`) into one JSONL. Never imports torch."""
    from harness.runner.merge import merge as do_merge

    _, records = do_merge(list(inputs), output)
    click.echo(f"merged {len(inputs)} file(s), {len(records)} items -> {output}")


def _register() -> None:
    from harness.github.cli import register

    register(cli)


_register()


def main(argv: list[str] | None = None) -> int:
    from harness.quiet import quiet

    quiet()
    try:
        cli.main(args=argv, prog_name="bti", standalone_mode=False)
    except UserError as exc:
        click.echo(f"bti: error: {exc.one_line()}", err=True)
        return 2
    except click.exceptions.Abort:
        click.echo("bti: aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return 2
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    except KeyboardInterrupt:
        return 130
    return 0
