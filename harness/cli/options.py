"""Options and helpers more than one command shares: filters, runtime providers, tolerances, comparisons."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from harness.errors import UserError

DEFAULT_RECIPES = ("portable", "xnnpack")
F = TypeVar("F", bound=Callable[..., Any])


def filter_options(fn: Any) -> Any:
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


def filters(kw: dict[str, Any]) -> Any:
    from harness.runner.matrix import Filters

    return Filters(patterns=tuple(kw["patterns"]), ops=tuple(kw["ops"]), tags=tuple(kw["tags"]),
                   dtypes=tuple(kw["dtypes"]), shapes=tuple(kw["shapes"]), exclude=tuple(kw["exclude"]))


def suites_of(kw: dict[str, Any]) -> list[str]:
    from harness.suites import DEFAULT_SUITES

    return list(kw["suites"]) or list(DEFAULT_SUITES)


def suite_options(kw: dict[str, Any]) -> Any:
    """How suite files load for this command: the files it was given by name may run the code they name."""
    from harness.cases.contract import SuiteOptions

    return SuiteOptions(named=frozenset(kw.get("suites") or ()), allow_code=bool(kw.get("allow_suite_code")),
                         seed=int(kw.get("seed") or 0), samples=int(kw.get("sampled_inputs") or 1))


def parse_skips(values: tuple[str, ...] | list[str]) -> tuple[tuple[str, str], ...]:
    """opdiff's ``--skips 'id:backend;id:backend'`` (an id, or a prefix ending in *; a recipe, or *)."""
    out = []
    for value in values:
        for part in value.split(";"):
            if not part.strip():
                continue
            tid, sep, recipe = part.strip().rpartition(":")
            if not sep or not tid or not recipe:
                raise UserError(f"--skips {part.strip()!r}: expected ID:RECIPE (RECIPE may be *), e.g. op_gather_dim1:xnnpack")
            out.append((tid, recipe))
    return tuple(out)


def recipes_of(kw: dict[str, Any]) -> list[str]:
    return list(kw["recipes"]) or list(DEFAULT_RECIPES)


def runtime_options(f: Any) -> Any:
    for opt in reversed([
        click.option("--runtime", "runtime_spec", metavar="SPEC",
                     help="Where ExecuTorch programs run: pybind (in process; default), runner[:PATH] (an executor_runner-style "
                     "binary; `bti runner build`), or command:TEMPLATE (reaches a device, e.g. command:'adb -s {serial} shell "
                     "/data/local/tmp/bti_runner {args}'). See harness/providers.py."),
        click.option("--runtime-push", metavar="TEMPLATE", help="command provider: copy a file to the device ({local} {remote})."),
        click.option("--runtime-pull", metavar="TEMPLATE", help="command provider: copy an output back ({remote} {local})."),
        click.option("--runtime-remote-dir", metavar="DIR", help="command provider: the device directory files go to."),
        click.option("--runtime-var", "runtime_vars", multiple=True, metavar="NAME=VALUE", help="A {NAME} for the templates."),
    ]):
        f = opt(f)
    return f


def tolerance_options(f: Any) -> Any:
    for opt in reversed([
        click.option("--atol", type=click.FloatRange(0), help="Absolute tolerance."),
        click.option("--rtol", type=click.FloatRange(0), help="Relative tolerance."),
        click.option("--sqnr-db", type=float, help="SQNR floor in dB (quantized programs)."),
        click.option("--cosine", type=click.FloatRange(-1, 1), help="Cosine-similarity floor."),
    ]):
        f = opt(f)
    return f


def runtime_option(kw: dict[str, Any]) -> tuple[str, Any] | None:
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


def read_results_file(path: Path) -> tuple[dict[str, Any], list[Any]]:
    from harness.results import read_latest

    header, records = read_latest(path)
    return dict(header), list(records)


def thresholds(sqnr_drop: float, latency_ratio: float) -> Any:
    from harness.report.compare import Thresholds

    return Thresholds(sqnr_drop_db=sqnr_drop, latency_ratio=latency_ratio)


compare_opts = [
    click.option("--sqnr-drop", type=float, default=3.0, show_default=True, help="dB of min-SQNR drop that counts as drift."),
    click.option("--latency-ratio", type=float, default=1.5, show_default=True, help="Median latency ratio that counts as a regression."),
]


def with_options(opts: list[Any]) -> Callable[[F], F]:
    def deco(fn: F) -> F:
        for opt in reversed(opts):
            fn = opt(fn)
        return fn
    return deco


