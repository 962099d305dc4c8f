"""``bti run``: plan the matrix, settle what needs no worker, run the rest in the pool.

Parent-side order matters: recipes and suites are loaded, UNAVAILABLE / SKIP / cached items are
written at once, then torch and executorch are imported (warm) and workers are forked.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import importlib
import os
import shutil
import sys
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from harness.backends import unavailable_reason
from harness.cases.case import Item
from harness.cases.contract import SuiteOptions
from harness.errors import UserError
from harness.providers import ProviderSpec
from harness.recipes import Recipe, load_recipe, with_counts, with_provider
from harness.results import SCHEMA, Header, Record, ResultsWriter, latest_by_id, read_results, repair_tail
from harness.runner.cache import ResultCache
from harness.runner.matrix import Filters, expand, groups_of, parse_shard, shard
from harness.settings import Settings
from harness.status import Status
from harness.verdict import GroupContext


@dataclass
class RunOptions:
    suites: list[str]
    recipes: list[str]
    out: Path
    settings: Settings  # cache directory and reuse, speedups, the item timeout (harness.settings)
    filters: Filters = field(default_factory=Filters)
    jobs: int = 2
    resume: bool = False
    shard: str | None = None
    durations: Path | None = None
    upstream: dict[str, Any] = field(default_factory=dict)
    threads: int = 1
    max_items: int = 400
    max_growth_mb: float = 1024.0
    bundle_dir: Path | None = None  # write each item's device bundle (.pte and .bpte) here (cache lookups skipped)
    argv: list[str] = field(default_factory=list)
    control: str | None = "portable"  # triage: a failure this recipe shares is "upstream" (used when in the run)
    baseline: str | None = None  # this recipe's outputs are the reference (added to the run; no cache reuse)
    rerun_failures: int = 0  # re-run each failing item up to N times, each in a fresh worker
    runtime: tuple[str, ProviderSpec] | None = None  # --runtime: where the ExecuTorch recipes' programs run
    runtime_threads: int | None = None
    suite_options: SuiteOptions | None = None  # how suite files load: the ones named, code, seed, sampled inputs
    skips: tuple[tuple[str, str], ...] = ()  # --skips: (case id or prefix*, recipe or *) pairs, SKIP
    warmup: int | None = None  # --warmup / --repeats: every recipe's runtime counts
    repeats: int | None = None


@dataclass(frozen=True)
class RunResult:
    executed: int  # items that ran in a worker
    reused: int  # items whose cached result was reused


def plan(suites: list[str], recipe_names: list[str], filters: Filters, check: bool = True,
         suite_options: SuiteOptions | None = None) -> tuple[list[Recipe], list[Item]]:
    """``suite_options``: how suite files load; the CLI names the suite files it was given, so the code they name may
    run."""
    from harness.suites import load_suites

    recipes = [load_recipe(n) for n in recipe_names]
    names = [r.name for r in recipes]
    if len(set(names)) != len(names):
        raise UserError(f"recipe given twice: {', '.join(names)}")
    cases = load_suites(suites, check=check, options=suite_options, patterns=filters.patterns)
    return recipes, expand(cases, recipes, filters)


class Progress(Protocol):
    def start(self, total: int) -> None: ...
    def advance(self, record: Record) -> None: ...


def execute(opts: RunOptions, progress: Progress | None = None) -> RunResult:
    from harness.speedups import configure, parent_gc, plan
    from harness.versions import check_stack

    stack = check_stack()  # a broken or mismatched install: one line, exit 2, before any file is touched
    for warning in stack.warnings:
        print(f"bti: warning: {warning}", file=sys.stderr)
    speedups = plan(opts.settings.speedups, opts.settings.force_speedups)
    configure(speedups)
    if speedups.notice():
        print(f"bti: {speedups.notice()}", file=sys.stderr)
    with parent_gc(opts.settings.speedups):
        return _execute(opts, progress)


@dataclass
class _Plan:
    """What a run will do: its recipes, its groups of items (sharded), and who is control and baseline."""

    recipes: dict[str, Recipe]
    groups: list[list[Item]]
    control: str | None
    baseline: str | None


def _execute(opts: RunOptions, progress: Progress | None) -> RunResult:
    _warm_while_discovering(opts)
    p = _plan_run(opts)
    header = _header(opts, p)
    cache = None
    if opts.settings.reuse and not p.baseline:
        cache = ResultCache(opts.settings.cache_dir, header["versions"], tuple(header["speedups"]["active"]))
    writer, previous, settled, todo = _settle_all(opts, p, header, cache)
    records: list[Record] = []

    def record(rec: Record) -> None:
        writer.write(rec)
        records.append(rec)
        if cache is not None and not rec.get("cached") and not (opts.rerun_failures and Status(rec["status"]).is_failure):
            cache.put(p.recipes[rec["recipe"]], rec)  # with reruns, a failure is cached once its attempts are settled
        if progress:
            progress.advance(rec)

    if progress:
        progress.start(len(settled) + sum(len(g) for g in todo))
    with writer:
        for rec in settled:
            writer.write(rec)
            records.append(rec)
            if progress:
                progress.advance(rec)
        if todo:
            contexts = _contexts(list(latest_by_id([*previous, *settled]).values()), p.control, p.baseline)
            _run_pool(opts, p.recipes, header["run_id"], todo, record, p.control, contexts, baseline=p.baseline)
            if opts.rerun_failures:
                _rerun(opts, p.recipes, header["run_id"], records, todo, writer, cache, p.control, p.baseline)
    return RunResult(executed=sum(len(g) for g in todo), reused=sum(bool(r.get("cached")) for r in settled))


def _warm_while_discovering(opts: RunOptions) -> None:
    """Upstream discovery forks a child of its own: the parent imports and warms up on the other core meanwhile
    (for the recipes asked for; any other recipe an item needs is warmed before the pool starts)."""
    from harness.suites import prefetch, warm_discovery

    if not warm_discovery(opts.suites):
        return
    asked = [load_recipe(n) for n in opts.recipes]
    warm_imports(asked, opts.settings.speedups)
    if opts.settings.speedups:
        from harness.stages import warm_up

        prefetch(opts.suites)
        warm_up(asked)


def _plan_run(opts: RunOptions) -> _Plan:
    """Recipes (the baseline added), items, and this shard's groups of them. No items: one line, exit 2."""
    names = list(opts.recipes)
    if opts.baseline and opts.baseline not in names and load_recipe(opts.baseline).name not in names:
        names.insert(0, opts.baseline)
    recipes, items = plan(opts.suites, names, opts.filters, check=False, suite_options=opts.suite_options)  # ops checked in _settle_all, if run
    if opts.runtime is not None or opts.runtime_threads:
        recipes = [_with_runtime(r, opts) for r in recipes]
    recipes = [with_counts(r, opts.warmup, opts.repeats) for r in recipes]
    if not items:
        raise UserError("no work items match the given suites, recipes and filters", hint="try `bti list`")
    by_name = {r.name: r for r in recipes}
    groups = groups_of(items)
    shard_spec = parse_shard(opts.shard)
    if shard_spec:
        groups = shard(groups, *shard_spec, durations=_durations(opts.durations), split=not opts.baseline)
    return _Plan(by_name, groups, opts.control if opts.control in by_name else None,
                 load_recipe(opts.baseline).name if opts.baseline else None)


def _header(opts: RunOptions, p: _Plan) -> Header:
    """The results file's first line: what ran, on what software, with which speedups."""
    from harness.env import versions
    from harness.speedups import current_plan
    from harness.versions import header_versions

    vers = {**versions(), "torchao": header_versions().get("torchao", "not installed")}
    recipes = list(p.recipes.values())
    return {
        "kind": "header", "schema": SCHEMA, "run_id": uuid.uuid4().hex[:12],
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "versions": vers, "recipes": {r.name: r.hash for r in recipes},
        "recipe_info": {r.name: {"backend": r.backend, "description": r.description, "setup": r.setup,
                               "unavailable": unavailable_reason(r), **({"facts": facts} if (facts := r.facts()) else {})}
                        for r in recipes},
        "suites": list(opts.suites), "upstream": opts.upstream, "shard": opts.shard, "argv": opts.argv,
        "control": p.control, "rerun_failures": opts.rerun_failures, "baseline": p.baseline,
        "packages": header_versions(), "speedups": current_plan().header(),
    }


def _settle_all(opts: RunOptions, p: _Plan, header: Header,
                cache: ResultCache | None) -> tuple[ResultsWriter, list[Record], list[Record], list[list[Item]]]:
    """Open the results file (``--resume``: keep what it has) and settle every item that needs no worker
    (UNAVAILABLE, SKIP, a cached result). Returns the writer, the earlier run's records, the settled records and
    the groups left to run. A problem found here (an unknown op) stops the run before the file is truncated."""
    from harness.cases.suite import check_ops

    unavailable = {name: info["unavailable"] for name, info in header["recipe_info"].items()}
    memory_gb = opts.settings.worker_memory_limit_gb(opts.jobs)  # once: it reads the machine's RAM
    done: set[str] = set()
    previous: list[Record] = []  # --resume: what the earlier run recorded (the control's, the baseline's status)
    writer: ResultsWriter | None = None
    try:
        if opts.resume and opts.out.exists() and opts.out.stat().st_size:
            writer = ResultsWriter(opts.out, None)  # lock first, then repair and read
            repair_tail(opts.out)
            _, previous = read_results(opts.out)
            done = {r["id"] for r in previous}
        settled: list[Record] = []
        todo: list[list[Item]] = []
        for group in p.groups:
            pending = []
            for item in group:
                if item.id in done:
                    continue
                rec = _settle(item, p.recipes[item.recipe], unavailable, None if opts.bundle_dir else cache, header["run_id"],
                              p.control, reuse_failures=not opts.rerun_failures, skips=opts.skips,
                              memory_gb=memory_gb)
                if rec is None:
                    pending.append(item)
                else:
                    settled.append(rec)
            if pending:
                todo.append(pending)
        # Only items that will run need their ops resolved (imports torch)
        check_ops(list({it.case.id: it.case for group in todo for it in group}.values()))
    except BaseException:
        if writer is not None:
            writer.close()
        raise
    return writer or ResultsWriter(opts.out, header, truncate=True), previous, settled, todo


def _contexts(records: list[Record], control: str | None, baseline: str | None) -> dict[str, GroupContext]:
    """Per group, the control's and the baseline's status, from records already written."""
    out: dict[str, GroupContext] = {}
    for r in records:
        GroupContext.note(out, r, control, baseline)
    return out


def _skipped(item: Item, skips: tuple[tuple[str, str], ...]) -> str | None:
    """``--skips`` (opdiff's option): an id matches exactly, or by prefix when the pattern ends in ``*``; the recipe by name or ``*``."""
    for pattern, recipe in skips:
        hit = item.case.id.startswith(pattern[:-1]) if pattern.endswith("*") else item.case.id == pattern
        if hit and recipe in ("*", item.recipe):
            return f"--skips {pattern}:{recipe}"
    return None


def _source_skip(item: Item, recipe: Recipe) -> str | None:
    """The case source's own SKIP for this item (OpInfo: a dtype not listed for the device type, a skip decorator)."""
    from harness.suites import case_judgement

    return case_judgement(item.case, item.axes.dtype, recipe).skip


def _settle(item: Item, recipe: Recipe, unavailable: dict[str, str | None], cache: ResultCache | None,
            run_id: str, control: str | None, reuse_failures: bool = True,
            skips: tuple[tuple[str, str], ...] = (), memory_gb: float = 0.0) -> Record | None:
    from harness.verdict import Outcome, decide

    spec = item.case.spec
    reason = unavailable[recipe.name] or spec.get("unavailable") or _missing_source(spec.get("requires") or [])
    status = None
    if reason:
        status = Status.UNAVAILABLE
    else:
        reason = recipe.skip_reason(item) or _skipped(item, skips) or _source_skip(item, recipe) or _memory_skip(item, recipe, memory_gb)
        status = Status.SKIP if reason else None
    if status is not None:
        return decide(item, recipe, Outcome(fixed=status, fixed_detail=reason or ""), run_id, control_recipe=control)
    if cache is not None:
        hit = cache.get(item, recipe)
        if hit is not None and (reuse_failures or not Status(hit["status"]).is_failure):  # --rerun-failures runs them
            from harness.verdict import reused

            return reused(hit, run_id)
    return None


@functools.cache
def _import_error(package: str) -> str | None:
    """Why an optional model source cannot be used here (imported for real: an installed package
    can still fail to import, e.g. a CUDA torchvision beside the CPU torch)."""
    try:
        importlib.import_module(package)
    except Exception as exc:
        return f"model source {package!r} is unavailable: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    return None


def _memory_skip(item: Item, recipe: Recipe, limit: float) -> str | None:
    """SKIP, before anything is built, a case that declares more memory than one worker may use: it would only be
    killed half-way. ``memory_gb`` in its spec; on a backend that runs the module itself, without an exported program
    (``needs_export`` False: an eager device, torch.compile), ``memory_gb_without_export`` where that is given."""
    from harness.backends import get_backend

    spec = item.case.spec
    key = "memory_gb"
    if "memory_gb_without_export" in spec and not get_backend(recipe.backend).needs_export:
        key = "memory_gb_without_export"
    need, said = spec.get(key), f"declared: {key} for {recipe.backend}"
    floors = spec.get("memory_floors")
    if floors and isinstance(need, (int, float)):  # measured on this recipe and version pair: more than estimated
        from harness.versions import cached_version, release

        here = release(cached_version("executorch"))
        floor = floors.get(f"{recipe.name}@{here}")
        if isinstance(floor, (int, float)) and floor > need:
            pair = (f"executorch {here}" if get_backend(recipe.backend).runs_programs  # an eager recipe: keyed by its pair
                    else f"the executorch {here} pair (torch {release(cached_version('torch'))} here)")
            need, said = floor, f"measured: a worker killed past it on {recipe.name} with {pair}"
    if limit and isinstance(need, (int, float)) and need > limit:
        return (f"needs about {need:g} GB per worker ({said}), above the worker memory "
                f"limit of {limit:g} GB (--worker-memory, BTI_WORKER_MEMORY_GB; fewer --jobs give each worker more)")
    return None


def _missing_source(packages: list[str]) -> str | None:
    return next((err for err in map(_import_error, packages) if err), None)


def _durations(path: Path | None) -> dict[str, float]:
    if path is None:
        return {}
    _, recs = read_results(path)
    return {r["id"]: float(r.get("duration_s") or 0.0) for r in recs}


def _with_runtime(recipe: Recipe, opts: RunOptions) -> Recipe:
    """``--runtime``/``--runtime-threads`` apply to the recipes whose programs run on a runtime (ExecuTorch)."""
    from harness.backends import get_backend

    if recipe.options_error is not None or not get_backend(recipe.backend).runs_programs:
        return recipe
    own = str((recipe.raw.get("runtime") or {}).get("provider") or "pybind")
    text, spec = opts.runtime if opts.runtime is not None else (own, recipe.runtime.provider or ProviderSpec())
    if spec.kind == "runner":  # the cache key names the binary itself: a rebuilt runner runs the items again
        from harness.providers import runner_command

        exe = shutil.which(runner_command(spec.target)[0]) or runner_command(spec.target)[0]
        st = os.stat(exe)
        text = f"{text} ({exe} {st.st_size} {st.st_mtime_ns})"
    return with_provider(recipe, text, spec, opts.runtime_threads)


def warm_imports(recipes: list[Recipe], speedups: bool) -> None:
    """Import (never compute) everything workers need, so forked workers start warm."""
    from harness.quiet import quiet

    quiet()
    import torch  # noqa: F401

    import harness.stages  # noqa: F401
    from harness.backends import get_backend

    for r in recipes:
        if r.options_error is None:
            with contextlib.suppress(Exception):  # the items will report a backend that cannot start
                get_backend(r.backend).warm(r, lower=False)
    if speedups:
        from harness.speedups import enable_all

        enable_all()


def _run_pool(opts: RunOptions, recipes: dict[str, Recipe], run_id: str, todo: list[list[Item]],
              record: Callable[[Record], None], control: str | None, contexts: dict[str, GroupContext],
              attempt: int = 1, baseline: str | None = None) -> None:
    from harness.runner.pool import Pool, PoolConfig

    warm_imports(list(recipes.values()), opts.settings.speedups)
    if opts.settings.speedups:
        from harness.speedups import gc_policy
        from harness.stages import warm_up

        warm_up([recipes[name] for name in dict.fromkeys(it.recipe for group in todo for it in group)])
        from harness.suites import is_model_kind

        if any(is_model_kind(it.case.kind) for group in todo for it in group):  # operators rarely match the patterns
            from harness.speedups import prebuild_xnnpack_patterns

            prebuild_xnnpack_patterns()  # models: built once here, not in each worker (speedup 9)
        gc_policy.SPEEDUP.enable()  # the heap frozen just before the workers fork
    cfg = PoolConfig(jobs=max(1, opts.jobs), timeout=opts.settings.item_timeout_s, run_id=run_id, threads=opts.threads,
                     max_items=opts.max_items, max_growth_mb=opts.max_growth_mb,
                     # absolute: a delegate that changes the worker's directory must not move the next item's files
                     log_dir=str((opts.out.parent / "logs").absolute()),
                     bundle_dir=str(opts.bundle_dir.absolute()) if opts.bundle_dir else None,
                     control=control, attempt=attempt, baseline=baseline,
                     memory_limit_mb=opts.settings.worker_memory_limit_gb(opts.jobs) * 1024)
    pool = Pool(cfg, recipes, record, contexts)
    try:
        pool.run(todo)
    except KeyboardInterrupt:
        print("bti: interrupted; results so far are in the JSONL (`--resume` continues)", file=sys.stderr)
        raise


def _rerun(opts: RunOptions, recipes: dict[str, Recipe], run_id: str, records: list[Record], todo: list[list[Item]],
           writer: ResultsWriter, cache: ResultCache | None, control: str | None,
           baseline: str | None) -> None:
    """``--rerun-failures N``: each failing item runs again, up to N times, each time in a fresh pool
    (fresh workers). Every attempt is written; the last line of an item is its final record, with
    all attempts listed, FLAKY when they disagree (``harness.verdict.settle_attempts``)."""
    from harness.verdict import settle_attempts

    items = {it.id: it for group in todo for it in group}
    history: dict[str, list[Record]] = {}
    for rec in records:
        if rec["id"] in items:
            history.setdefault(rec["id"], []).append(rec)
    for attempt in range(2, opts.rerun_failures + 2):
        failing = [i for i, recs in history.items() if Status(recs[-1]["status"]).reruns]
        if not failing:
            break
        groups = groups_of([items[i] for i in failing])
        fresh: list[Record] = []
        _run_pool(opts, recipes, run_id, groups, fresh.append, control,
                           _contexts(list(latest_by_id(records).values()), control, baseline), attempt, baseline)
        for rec in fresh:
            history[rec["id"]].append(rec)
            final = settle_attempts(history[rec["id"]])
            writer.write(final)
            records.append(final)
            if Status(final["status"]) is Status.FLAKY:
                history[rec["id"]].append(final)  # settled: no further attempt
    if cache is not None:
        for recs in history.values():
            if recs[-1]["status"] != Status.FLAKY.value:
                cache.put(recipes[recs[-1]["recipe"]], recs[-1])
