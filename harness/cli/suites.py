"""``bti list`` and ``bti validate``: what a run would do, without running it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from harness.cli.group import cli
from harness.cli.options import filter_options, filters, recipes_of, suite_options, suites_of


@cli.command("list")
@filter_options
@click.option("--recipes", "list_recipes", is_flag=True, help="List recipes with availability instead of items.")
@click.option("--allow-suite-code", is_flag=True, help="Let opdiff suites' file: paths load from any file they reach.")
@click.option("--coverage", is_flag=True, help="Per operator: cases, dtypes, whether a dynamic-shape variant exists; then the core ATen ops not covered.")
def list_cmd(list_recipes: bool, coverage: bool, **kw: Any) -> None:
    """Print the expanded item ids (op.<op>.<variant>[dtype,shape]@<recipe>), one per line."""
    if list_recipes:
        _print_recipes(kw["recipes"])
        return
    if coverage:
        from harness.report.coverage import render, table
        from harness.suites import load_suites

        cases = load_suites(list(kw["suites"]) or ["ops", "core-ops"], options=suite_options(kw))
        entries = [{"op": c.op, "dtype": d, "shape": s} for c in cases for d in c.dtypes for s in c.shapes]
        click.echo(render(table(entries))[0], nl=False)
        return
    from harness.runner.run import plan

    _, items = plan(suites_of(kw), recipes_of(kw), filters(kw), suite_options=suite_options(kw))
    for item in items:
        click.echo(item.id)


def _print_recipes(names: tuple[str, ...]) -> None:
    from harness.backends import run_gap, unavailable_reason
    from harness.recipes import available_recipe_files, load_recipe

    for name in names or sorted(available_recipe_files()):
        recipe = load_recipe(name)
        reason = unavailable_reason(recipe)
        state = "available" if reason is None else f"UNAVAILABLE: {reason}"
        if reason is None and (gap := run_gap(recipe)):
            state = f"lowers only (LOWERED): {gap}"
        click.echo(f"{recipe.name}\t{state}\t{recipe.description}")


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
def validate(files: tuple[Path, ...]) -> None:
    """Load and expand suite files (or recipe files) without running anything."""
    from harness.cases.contract import SuiteOptions
    from harness.cases.suite import check_ops, load_suite
    from harness.cases.yamlload import load_yaml
    from harness.recipes import parse_recipe
    from harness.suites import file_formats

    formats = file_formats()  # the installed ones' entry points loaded once, not per file
    for path in files:
        doc = load_yaml(path)
        if isinstance(doc, dict) and "backend" in doc:
            recipe = parse_recipe(path)
            unchecked = f"; backend options not checked: {recipe.options_error}" if recipe.options_error else ""
            click.echo(f"{path}: recipe {recipe.name} ok (hash {recipe.hash}){unchecked}")
            continue
        fmt = next((f for f in formats if f.reads(doc, path)), None)
        if fmt is not None:  # a registered format (opdiff's, a vendor's): loaded as `bti run -s` names it
            cases = fmt.load(path, SuiteOptions(named=frozenset({str(path)})))
            check_ops(cases)
            click.echo(f"{path}: {fmt.summary(cases)}")
            continue
        cases = load_suite(path)
        variants = sum(len(c.dtypes) * len(c.shapes) for c in cases)
        ops = {c.op for c in cases}
        click.echo(f"{path}: ok, {len(cases)} cases, {len(ops)} ops, {variants} case×axes variants")


