"""The stages of one work item: export → (quantize) → lower → serialize → load → run → compare.

Worker side (imports torch). ``execute_group`` runs every item of one (case, axes) group: the
module is built, the eager reference computed and ``torch.export`` run once, then shared by every
recipe. Each stage is timed; an exception maps to that stage's failure status. A failure of the
eager model or of ``torch.export`` is FAIL_EXPORT — not the backend's fault.
"""

from __future__ import annotations

import hashlib
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import numpy as np

from harness.backends import get_backend
from harness.env import peak_rss_mb
from harness.errors import first_line
from harness.metrics import compare, latency_stats, timed_calls
from harness.recipes import Recipe
from harness.results import SCHEMA, Record, atomic_write_bytes
from harness.spec.case import Item
from harness.status import Stage, Status


class StageFailure(Exception):
    def __init__(self, stage: Stage, exc: BaseException) -> None:
        super().__init__(str(exc))
        self.stage = stage
        self.exc = exc


@contextmanager
def timed(stage: Stage, times: dict[str, float]) -> Iterator[None]:
    t0 = time.perf_counter()
    try:
        yield
    except Exception as exc:
        times[stage.value] = round(time.perf_counter() - t0, 6)
        raise StageFailure(stage, exc) from exc
    times[stage.value] = round(time.perf_counter() - t0, 6)


def base_record(item: Item, recipe: Recipe, run_id: str) -> Record:
    return {
        "kind": "result", "schema": SCHEMA, "id": item.id, "case": item.case.id, "suite": item.case.suite,
        "op": item.case.op, "tags": list(item.case.tags), "recipe": recipe.name, "backend": recipe.backend,
        "axes": item.axes.as_dict(), "seed": item.seed, "spec_hash": item.case.spec_hash, "run_id": run_id, "attempt": 1,
    }


def root_cause(exc: BaseException) -> BaseException:
    seen = {id(exc)}
    while (nxt := exc.__cause__ or exc.__context__) is not None and id(nxt) not in seen:
        seen.add(id(nxt))
        exc = nxt
    return exc


def error_fields(exc: BaseException) -> dict[str, str]:
    """Type, message and trace tail; a wrapped error (pass managers re-raise) names its root cause."""
    msg = str(exc).strip() or type(exc).__name__
    root = root_cause(exc)
    if root is not exc:
        msg = f"{first_line(msg)} — caused by {type(root).__name__}: {str(root).strip()}"
    frames = traceback.format_exception(type(root), root, root.__traceback__)
    return {"type": type(root).__name__, "message": msg[:4000], "trace": "".join(frames[-8:])[-4000:]}


def finalize(record: Record, recipe: Recipe, key: str) -> Record:
    """Apply strict xfail: a listed item that fails is XFAIL; one that passes is XPASS (a failure)."""
    part = record.get("partition")
    delegated = None if not part or not part.get("partitioned") else part.get("delegated_nodes", 0) > 0
    reason = recipe.xfail_reason(key, delegated)
    if reason is None:
        return record
    status = Status(record["status"])
    if status.is_pass:
        record["status"] = Status.XPASS.value
        record["detail"] = f"expected to fail ({reason}) but passed"
    elif status.is_failure and status not in (Status.ERROR,):
        record["detail"] = f"{status.value}: {record.get('detail', '')} [xfail: {reason}]"
        record["xfail_of"] = status.value  # type: ignore[typeddict-unknown-key]
        record["status"] = Status.XFAIL.value
    return record


def _to_numpy(value: Any) -> np.ndarray:
    import torch

    if isinstance(value, torch.Tensor):
        t = value.detach()
        if t.is_complex():  # compare real and imaginary parts as a trailing dim of 2
            t = torch.view_as_real(t.resolve_conj())
        if t.dtype == torch.bfloat16:
            t = t.float()
        return t.contiguous().numpy()
    return np.asarray(value)


def _dtype_name(value: Any) -> str:
    import torch

    return str(value.dtype).replace("torch.", "") if isinstance(value, torch.Tensor) else type(value).__name__


def _leaves(out: Any) -> list[Any]:
    import torch.utils._pytree as pytree

    return [leaf for leaf in pytree.tree_leaves(out) if leaf is not None]


def reference(built: Any) -> list[Any]:
    import copy

    import torch

    from harness.spec.build import torch_dtype

    with torch.no_grad():
        if built.ref_dtype:
            up = torch_dtype(built.ref_dtype)

            def cast(t: Any) -> Any:
                return t.to(up) if isinstance(t, torch.Tensor) and t.is_floating_point() else t

            return _leaves(copy.deepcopy(built.module).to(up)(*[cast(t) for t in built.run]))
        return _leaves(built.module(*built.run))


class Group:
    """The shared part of a (case, axes) group: built module, reference, exported program."""

    def __init__(self, item: Item) -> None:
        import torch

        from harness.spec.build import build_op
        from harness.spec.build_model import build_model
        from harness.suites.hf_models import build_hf
        from harness.suites.tv_models import build_tv
        from harness.suites.upstream import build_upstream

        self.times: dict[str, float] = {}
        self.failure: StageFailure | None = None
        self.built: Any = None
        self.ref: list[Any] = []
        self.ep: Any = None
        try:
            with timed(Stage.EXPORT, self.times):
                builders = {"model": build_model, "upstream": build_upstream, "hf": build_hf, "tv": build_tv}
                builder = builders.get(item.case.kind, build_op)
                self.built = builder(item.case, item.axes, item.seed)
                self.ref = reference(self.built)
                self.ep = torch.export.export(
                    self.built.module, self.built.example, dynamic_shapes=self.built.dynamic_shapes, strict=False
                )
        except StageFailure as failure:
            self.failure = failure


def run_item(item: Item, recipe: Recipe, group: Group, run_id: str, bundle_dir: str | None = None) -> Record:
    rec = base_record(item, recipe, run_id)
    times = dict(group.times)
    rec["stages"] = times
    t_start = time.perf_counter()
    try:
        if group.failure is not None:
            raise group.failure
        _run_stages(item, recipe, group, rec, times, bundle_dir)
    except StageFailure as failure:
        rec["status"] = failure.stage.failure.value
        rec["error"] = error_fields(failure.exc)
        rec["detail"] = f"{failure.stage.value}: {first_line(rec['error']['message'])}"
    except Exception as exc:
        rec["status"] = Status.ERROR.value
        rec["error"] = error_fields(exc)
        rec["detail"] = f"harness error: {first_line(rec['error']['message'])}"
    rec["duration_s"] = round(time.perf_counter() - t_start + sum(group.times.values()), 6)
    rec["peak_rss_mb"] = round(peak_rss_mb(), 1)
    return finalize(rec, recipe, item.group)


def _run_stages(item: Item, recipe: Recipe, group: Group, rec: Record, times: dict[str, float],
                bundle_dir: str | None = None) -> None:
    backend = get_backend(recipe.backend)
    built = group.built
    ep = group.ep
    if recipe.quantize:
        with timed(Stage.QUANTIZE, times):
            ep = backend.quantize(recipe, ep, built)
    with timed(Stage.LOWER, times):
        lowered, stats = backend.lower(recipe, ep)
    rec["partition"] = stats
    with timed(Stage.SERIALIZE, times):
        blob, blobs = backend.serialize(lowered)
    rec["pte_bytes"] = len(blob)
    rec["pte_sha256"] = hashlib.sha256(blob).hexdigest()
    rec["delegate_blobs"] = blobs
    with timed(Stage.LOAD, times):
        handle = backend.load(blob)
    rec["load_ms"] = round(times[Stage.LOAD.value] * 1000.0, 3)
    with timed(Stage.RUN, times):
        outs, lat = _timed_runs(backend, handle, built.run, recipe.runtime)
    mutations = int(stats.get("input_mutations") or 0)
    outs = outs[mutations:]  # the runtime returns mutated inputs first
    rec["latency_ms"] = lat
    with timed(Stage.COMPARE, times):
        _compare(item, recipe, group, rec, outs)
    if bundle_dir and recipe.backend == "executorch":
        rec["artifacts"] = write_programs(Path(bundle_dir), item.id, blob, built.run, group.ref, outs, mutations)


def _timed_runs(backend: Any, handle: Any, inputs: tuple[Any, ...], cfg: dict[str, Any]) -> tuple[list[Any], dict[str, float]]:
    outs, samples = timed_calls(lambda: backend.run(handle, inputs), int(cfg.get("warmup", 1)), int(cfg.get("repeats", 3)))
    lat: dict[str, float] = {k: round(v, 4) for k, v in latency_stats(samples).items()}
    lat["repeats"] = len(samples)
    return outs, lat


def _compare(item: Item, recipe: Recipe, group: Group, rec: Record, outs: list[Any]) -> None:
    refs = group.ref
    tol = recipe.tolerance(item.axes.dtype)
    case_tol = item.case.spec.get("tolerance") or {}
    if not recipe.quantize:
        tol.update(case_tol)
    elif case_tol.get("shape_only"):
        tol["shape_only"] = True
    dtypes = None
    if not group.built.ref_dtype:
        dtypes = [(_dtype_name(o), _dtype_name(r)) for o, r in zip(outs, refs, strict=False)]
    verdict = compare([_to_numpy(o) for o in outs], [_to_numpy(r) for r in refs], tol, dtypes)
    rec["outputs"] = verdict.stats  # type: ignore[typeddict-item]
    rec["tolerance"] = tol  # type: ignore[typeddict-unknown-key]
    task = getattr(group.built, "task", None)
    if task and verdict.stats and len(outs) == len(refs):
        rec["accuracy"] = _agreement(task, _to_numpy(outs[0]), _to_numpy(refs[0]))
    if not verdict.ok:
        rec["status"] = Status.FAIL_MISMATCH.value
        rec["detail"] = verdict.message[:1000]
        return
    part = rec.get("partition") or {}
    if part.get("partitioned") and part.get("delegated_nodes", 0) == 0:
        rec["status"] = Status.PASS_UNDELEGATED.value
        rec["detail"] = "correct, but nothing was delegated: " + ", ".join(sorted(part.get("undelegated_ops", {})))[:300]
    else:
        rec["status"] = Status.PASS.value
        rec["detail"] = ""


def _agreement(task: str, out: np.ndarray, ref: np.ndarray) -> dict[str, Any]:
    if out.shape != ref.shape or out.ndim == 0:
        return {}
    agree = float(np.mean(np.argmax(out, axis=-1) == np.argmax(ref, axis=-1)))
    key = "top1_agreement" if task == "classifier" else "next_token_agreement"
    return {key: round(agree, 6)}


# Only pure-Python lowering paths are warmed in the parent: a vendor backend could crash the parent
# (which holds the results file), and a runtime with its own thread pool (OpenVINO's TBB) would make
# every later fork unsafe.
WARM_PARTITIONERS = frozenset({"xnnpack"})


def write_programs(directory: Path, item_id: str, blob: bytes, inputs: tuple[Any, ...], refs: list[Any], outs: list[Any],
                   mutations: int) -> dict[str, str]:
    """Write ``<item>.pte`` and, when the case fits the bundled-program format, ``<item>.bpte``: the
    runtime inputs with the eager reference outputs as expected outputs (cast to the program's output
    dtypes), so a device can check the same case. Paths are relative to the run's output directory."""
    import re

    import torch

    name = re.sub(r"[^\w.@-]+", "_", item_id).strip("_")
    pte = directory / f"{name}.pte"
    atomic_write_bytes(pte, blob)
    artifacts = {"pte": f"{directory.name}/{pte.name}"}
    why = None
    if mutations:
        why = "the program returns mutated inputs"
    elif len(refs) != len(outs) or not all(isinstance(r, torch.Tensor) and isinstance(o, torch.Tensor) and r.shape == o.shape
                                           and not r.is_complex() for r, o in zip(refs, outs, strict=False)):
        why = "the reference outputs do not match the program's outputs one to one"
    elif not all(isinstance(x, (torch.Tensor, int, float, bool)) for x in inputs):
        why = "an input is neither a tensor nor a scalar"
    if why:
        artifacts["bpte_skipped"] = why
        return artifacts
    from executorch.devtools import BundledProgram
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from executorch.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer

    expected = [r.detach().to(o.dtype).contiguous() for r, o in zip(refs, outs, strict=True)]
    case = MethodTestCase(inputs=[x.contiguous() if isinstance(x, torch.Tensor) else x for x in inputs],
                          expected_outputs=expected)
    bundled = BundledProgram(None, [MethodTestSuite("forward", [case])], pte_file_path=str(pte))
    bpte = directory / f"{name}.bpte"
    atomic_write_bytes(bpte, serialize_from_bundled_program_to_flatbuffer(bundled))
    artifacts["bpte"] = f"{directory.name}/{bpte.name}"
    return artifacts


def warm_up(recipes: list[Recipe]) -> None:
    """Lower (never load or run) a tiny model once per recipe in the not-yet-forked parent, so the
    state torch and executorch build lazily on first use exists before workers fork. Only built-in
    ExecuTorch recipes whose partitioners are in ``WARM_PARTITIONERS`` (or none). One torch thread:
    no OpenMP pool is started, so forking stays safe. Failures are ignored (the items themselves
    will report them); the global RNG state is left as it was."""
    import torch

    from harness.spec.build import Built

    torch.set_num_threads(1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        module = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval()
        example = (torch.randn(2, 8),)
        try:
            ep = torch.export.export(module, example, strict=False)
        except Exception:
            return
        built = Built(module, example, example, None)
        for recipe in recipes:
            if recipe.backend != "executorch" or not set(recipe.raw.get("partitioners") or []) <= WARM_PARTITIONERS:
                continue
            backend = get_backend(recipe.backend)
            with suppress(Exception):
                lowered, _ = backend.lower(recipe, backend.quantize(recipe, ep, built) if recipe.quantize else ep)
                backend.serialize(lowered)


def execute_group(items: list[Item], recipes: dict[str, Recipe], run_id: str,
                  on_start: Callable[[str], None], emit: Callable[[Record], None], bundle_dir: str | None = None) -> None:
    """Run every item of one group, calling ``on_start(item_id)`` before and ``emit(record)`` after each."""
    group = Group(items[0])
    for item in items:
        on_start(item.id)
        emit(run_item(item, recipes[item.recipe], group, run_id, bundle_dir))
