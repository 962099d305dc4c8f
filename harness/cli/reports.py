"""``bti report``, ``bti compare``, ``bti portal`` and ``bti merge``: from results files, never importing torch."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from harness.cli.group import cli
from harness.cli.options import compare_opts, read_results_file, thresholds, with_options
from harness.errors import UserError


def _tables(latest: Sequence[Any], info: dict[str, Any], out_dir: Path, support: bool, models: bool) -> dict[str, Path]:
    """support.md/csv (operator × recipe) and models.md/csv (model × recipe), as asked."""
    from harness.results import atomic_write_text

    written: dict[str, Path] = {}
    texts: list[tuple[str, str]] = []
    if support:
        from harness.report import support as sup

        texts += [("support.md", sup.render_md(latest)), ("support.csv", sup.render_csv(latest))]
    if models:
        from harness.report import models as mod

        texts += [("models.md", mod.render_md(latest, info)), ("models.csv", mod.render_csv(latest))]
    for name, text in texts:
        atomic_write_text(out_dir / name, text)
        written[name.replace(".", "-")] = out_dir / name
    return written


@cli.command()
@click.argument("jsonl", type=click.Path(path_type=Path))
@click.option("-o", "--out-dir", type=click.Path(path_type=Path), default=Path("out"), show_default=True)
@click.option("--format", "formats", default="junit,md,csv,badge,html", show_default=True,
              help="Comma-separated: junit, md, csv, badge, html (dashboard.html), opdiff (opdiff.jsonl: opdiff's results "
              "format, for its measure/report_*.py scripts).")
@click.option("--step-summary", type=click.Path(path_type=Path), envvar="GITHUB_STEP_SUMMARY", help="Append the Markdown summary here (default: $GITHUB_STEP_SUMMARY).")
@click.option("--github-output", type=click.Path(path_type=Path), help="Append passed=, failed=, total=, unverified= (recipes that verified nothing) lines here ($GITHUB_OUTPUT).")
@click.option("--coverage", is_flag=True, help="Also write coverage.md/coverage.json: the core ATen ops these results cover and miss.")
@click.option("--readme-table", "readme", type=click.Path(path_type=Path),
              help="Fill the accelerator × model and op × backend tables between the bti:models / bti:ops markers of this file.")
@click.option("--support", is_flag=True, help="Also write support.md/support.csv: operator × recipe, the dtypes that pass, "
              "fail (first failing sample), are expected to fail or are skipped.")
@click.option("--models", is_flag=True, help="Also write models.md/models.csv: model × recipe, ✅/❌/xfail with agreement with "
              "the CPU reference and latency relative to torch-cpu, and each recipe's setup notes.")
@click.option("--upstream-bugs", is_flag=True, help="Also write upstream-bugs.md: the expected failures whose rule names a bug "
              "outside bti and the unexpected failures, one section per root cause with its owner, recipes, versions, items "
              "and standalone repro.")
@click.option("--other-results", multiple=True, type=click.Path(path_type=Path),
              help="With --upstream-bugs: results of other versions (repeatable); where the same items pass names the "
              "first version that no longer fails.")
@click.option("--quiet", is_flag=True)
def report(jsonl: Path, out_dir: Path, formats: str, step_summary: Path | None, github_output: Path | None, coverage: bool,
           readme: Path | None, support: bool, models: bool, upstream_bugs: bool, other_results: tuple[Path, ...],
           quiet: bool) -> None:
    """Write JUnit XML, Markdown, CSV, badges and an HTML dashboard from a results JSONL. Never imports torch."""
    from harness.report import formats as known_formats
    from harness.report import write_reports

    wanted = tuple(f.strip() for f in formats.split(",") if f.strip())
    bad = set(wanted) - set(known_formats(wanted))
    if bad:
        raise UserError(f"unknown report format(s): {', '.join(sorted(bad))}")
    from harness.report import ReportError

    failed: ReportError | None = None
    try:
        paths = write_reports(jsonl, out_dir, wanted)
    except ReportError as exc:  # the others were written: the job summary and outputs still follow
        failed, paths = exc, exc.paths
    latest: Sequence[Any] = []
    header: Any = {}
    if coverage or github_output or readme or support or models:
        from harness.results import read_records

        header, latest = read_records(jsonl, latest=True)  # read once for all, parsed again on each pass
    if coverage:
        from harness.report import coverage as cov

        paths.update(cov.write(latest, out_dir))
    info = header.get("recipe_info") if isinstance(header.get("recipe_info"), dict) else {}  # untrusted: a mapping or nothing
    paths.update(_tables(latest, info, out_dir, support, models))
    if upstream_bugs:
        from harness.report import upstream

        paths["upstream-bugs"] = upstream.write(jsonl, list(other_results), out_dir)
    if readme:
        from harness.report.tables import update_readme

        for name in update_readme(readme, latest, info):
            paths[f"readme-{name}"] = readme
    if step_summary and "md" in paths:
        with step_summary.open("a", encoding="utf-8") as fh:
            fh.write(paths["md"].read_text(encoding="utf-8"))
    if github_output:
        from harness.github.events import write_github_output
        from harness.report.summary import unverified
        from harness.results import status_of

        write_github_output(str(github_output), {"passed": str(sum(status_of(r).is_pass for r in latest)),
                                                 "failed": str(sum(status_of(r).is_failure for r in latest)),
                                                 "total": str(len(latest)),
                                                 # recipe names come from the results (untrusted): plain names only
                                                 "unverified": ",".join(re.sub(r"[^A-Za-z0-9._-]", "-", s.name)[:80]
                                                                        for s in unverified(dict(header), latest))})
    if not quiet:
        for kind, path in paths.items():
            click.echo(f"{kind}\t{path}")
    if failed is not None:
        raise failed


@cli.command("compare")
@click.argument("base", type=click.Path(path_type=Path))
@click.argument("head", type=click.Path(path_type=Path))
@with_options(compare_opts)
@click.option("--json", "json_out", type=click.Path(path_type=Path), help="Write the comparison as JSON.")
@click.option("--markdown", "md_out", type=click.Path(path_type=Path), help="Write the PR-comment body here.")
@click.option("--key", default="bti", show_default=True, help="Comment key (for --markdown).")
def compare_cmd(base: Path, head: Path, sqnr_drop: float, latency_ratio: float, json_out: Path | None, md_out: Path | None, key: str) -> None:
    """Compare a base run with a head run. Exit 1 on new failures or numeric drift."""
    from harness.report import comment
    from harness.report.compare import compare

    _, base_recs = read_results_file(base)
    head_header, head_recs = read_results_file(head)
    result = compare(base_recs, head_recs, thresholds(sqnr_drop, latency_ratio))
    for name, n in result.counts().items():
        click.echo(f"{name}\t{n}")
    if json_out:
        json_out.write_text(json.dumps({"counts": result.counts(), **result.as_dict()}, indent=1, sort_keys=True))
    if md_out:
        md_out.write_text(comment.render(key, head_header, head_recs, result, base_records=base_recs))
    raise SystemExit(1 if result.regressed else 0)


@cli.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--out-dir", type=click.Path(path_type=Path), default=Path("site"), show_default=True)
@click.option("--keep-history", type=click.Path(path_type=Path), metavar="DIR",
              help="Also keep a compact copy (.jsonl.gz) of every input run here: pass DIR again next time for the history.")
@click.option("--history-days", type=click.FloatRange(1), default=90, show_default=True,
              help="With --keep-history: drop copies of runs older than this (before the newest run).")
@click.option("--title", default="bti portal", show_default=True)
@click.option("--support-results", "support", multiple=True, type=click.Path(path_type=Path),
              help="Results (files or directories) for the operator support page only, not the matrix, item pages or "
              "history: an OpInfo sweep's 134,567 items per recipe. Repeatable.")
def portal(runs: tuple[Path, ...], out_dir: Path, keep_history: Path | None, history_days: float, title: str,
           support: tuple[Path, ...]) -> None:
    """Build a static site from many results files or directories (shards, recipes, days): the accelerator ×
    model matrix, a page per item, history (pass rate, regressions, failure age against the 72-hour rule,
    flakiness) and plots. No server, no network: open site/index.html or publish it on GitHub Pages."""
    from harness.report.portal import build

    site = build(list(runs), out_dir, keep_history, title, history_days, list(support))
    click.echo(f"portal\t{site.index} ({site.items} items, {site.runs} runs, {site.columns} columns, {site.seconds:.1f} s)")


@cli.command()
@click.argument("inputs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="The merged results.jsonl.")
def merge(inputs: tuple[Path, ...], output: Path) -> None:
    """Join shard results (from `bti run --shard i/n`) into one JSONL, and the shards' repro scripts (repro/ beside each)
    into repro/ beside it. Never imports torch."""
    from harness.repro import gather
    from harness.runner.merge import merge as do_merge

    _, records = do_merge(list(inputs), output)
    scripts = gather(list(inputs), {str(r.get("id")) for r in records}, output.parent / "repro")
    click.echo(f"merged {len(inputs)} file(s), {len(records)} items -> {output}"
               + (f"; {scripts} repro script(s) -> {output.parent / 'repro'}" if scripts else ""))


