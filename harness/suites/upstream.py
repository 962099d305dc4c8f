"""Adapter: the ExecuTorch backend test suite's operator tests as bti cases
(``bti run --suite executorch-upstream-ops``).

Each upstream pytest function calls ``test_runner.lower_and_run_model(model, inputs, ...)`` one
or more times. bti calls those functions with a *collecting* runner that records each
``(model, inputs, dynamic_shapes)`` instead of lowering it; every recorded call becomes one case
(``op.<file op>.<function>[_<param id>]_<n>``). Discovery runs in a child process (the tests build
models and tensors, and the bti parent must not compute before it forks workers): forked from a
``bti run`` parent that has already imported torch and executorch (0.2 s), else a fresh
interpreter (5 s, mostly imports, e.g. for ``bti list``). A worker later
re-runs the same function under the case seed and picks its call by index, so inputs are
deterministic. Tests the upstream suite skips (``unittest.skip``/``pytest.skip``) are left out.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import json
import os
import pkgutil
import subprocess
import sys
from functools import cache
from typing import Any

from harness.cases.case import Case
from harness.errors import UserError, first_line

PACKAGE = "executorch.backends.test.suite.operators"
SUITE = "executorch-upstream-ops"


class _FloatFlow:
    """What an upstream test reads of its flow (``test_runner._flow``): a test that builds another model for a
    quantizing flow (test_lstm: ``flow.quantize`` picks a quantizable LSTM) gets its float model, the one every
    recipe lowers, quantizing ones included."""

    name = "bti"
    backend = "bti"
    quantize = False


class _Collector:
    """Stands in for the upstream ``test_runner`` fixture and records what it is asked to run."""

    _flow = _FloatFlow()

    def __init__(self) -> None:
        self.calls: list[tuple[Any, Any, Any]] = []

    def lower_and_run_model(self, model: Any, inputs: Any, generate_random_test_inputs: bool = True, dynamic_shapes: Any = None) -> None:
        self.calls.append((model, inputs, dynamic_shapes))


def _param_sets(fn: Any) -> list[tuple[str, dict[str, Any]]]:
    """Expand ``@pytest.mark.parametrize`` marks (a product over several marks) into (id, kwargs)."""
    axes: list[list[tuple[str, dict[str, Any]]]] = []
    for mark in getattr(fn, "pytestmark", []) or []:
        if mark.name != "parametrize":
            continue
        names, values = mark.args[0], mark.args[1]
        names = [n.strip() for n in names.split(",")] if isinstance(names, str) else list(names)
        ids = mark.kwargs.get("ids")
        axis = []
        for i, value in enumerate(values):
            value = getattr(value, "values", value)  # pytest.param(...)
            vals = tuple(value) if len(names) > 1 else (value[0] if isinstance(value, tuple) and len(value) == 1 else value,)
            label = ids(vals[0]) if callable(ids) else (ids[i] if isinstance(ids, list) else str(i))
            axis.append((str(label), dict(zip(names, vals, strict=True))))
        axes.append(axis)
    if not axes:
        return [("", {})]
    return [("-".join(p[0] for p in combo), {k: v for p in combo for k, v in p[1].items()}) for combo in itertools.product(*axes)]


def _test_functions(module: Any) -> list[tuple[str, Any]]:
    return [(name, fn) for name, fn in sorted(vars(module).items())
            if name.startswith("test_") and callable(fn) and "test_runner" in inspect.signature(fn).parameters]


def _run_test(fn: Any, kwargs: dict[str, Any], seed: int) -> list[tuple[Any, Any, Any]]:
    import torch

    torch.manual_seed(seed)
    collector = _Collector()
    fn(test_runner=collector, **kwargs)
    return collector.calls


def _skip_types() -> tuple[type[BaseException], ...]:
    import unittest

    import _pytest.outcomes

    return (unittest.SkipTest, _pytest.outcomes.Skipped)


def collect() -> list[dict[str, Any]]:
    """Discovery (subprocess side): one descriptor per recorded lower_and_run_model call."""
    import torch

    torch.set_num_threads(1)
    package = importlib.import_module(PACKAGE)
    skips = _skip_types()
    out: list[dict[str, Any]] = []
    for info in pkgutil.iter_modules(package.__path__):
        if not info.name.startswith("test_"):
            continue
        module = importlib.import_module(f"{PACKAGE}.{info.name}")
        for fname, fn in _test_functions(module):
            for index, (pid, kwargs) in enumerate(_param_sets(fn)):
                try:
                    calls = _run_test(fn, kwargs, 0)
                except skips:
                    continue
                except Exception as exc:
                    out.append({"module": info.name, "function": fname, "param_index": index, "param_id": pid, "call": 0,
                                "broken": f"{type(exc).__name__}: {exc}"[:300], "dtype": "float32", "dynamic": False})
                    continue
                for n, (_, inputs, dyn) in enumerate(calls):
                    floats = [t.dtype for t in _tensors(inputs) if t.is_floating_point()]
                    dtype = str((floats or [t.dtype for t in _tensors(inputs)] or [torch.float32])[0]).replace("torch.", "")
                    out.append({"module": info.name, "function": fname, "param_index": index, "param_id": pid, "call": n,
                                "dtype": dtype, "dynamic": dyn is not None})
    return out


def _tensors(inputs: Any) -> list[Any]:
    import torch
    import torch.utils._pytree as pytree

    return [x for x in pytree.tree_leaves(inputs) if isinstance(x, torch.Tensor)]


def _collect_into(conn: Any) -> None:
    """Forked discovery child: send ("ok", descriptors) or ("error", message), print nothing."""
    import warnings

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.dup2(devnull, 2)
    warnings.filterwarnings("ignore")
    try:
        conn.send(("ok", collect()))
    except BaseException as exc:  # reported to the parent as one line
        conn.send(("error", f"{type(exc).__name__}: {first_line(str(exc))}"))


_STARTED: tuple[Any, Any] | None = None  # (process, receiver) of a discovery child started early


def _fork_discovery() -> tuple[Any, Any]:
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    receiver, sender = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_collect_into, args=(sender,), daemon=True)
    proc.start()
    sender.close()
    return proc, receiver


def start_discovery() -> None:
    """In a warm ``bti run`` parent: fork the discovery child now, so that the parent's warm-up runs
    on the other core while the child collects (``_descriptors`` then only receives)."""
    global _STARTED
    if _STARTED is None and "executorch.exir" in sys.modules and not _descriptors.cache_info().currsize:
        _STARTED = _fork_discovery()


def _descriptors_forked() -> list[dict[str, Any]]:
    global _STARTED
    (proc, receiver), _STARTED = _STARTED or _fork_discovery(), None
    try:
        kind, payload = receiver.recv()
    except EOFError:
        kind, payload = "error", "the discovery process died"
    proc.join()
    if kind != "ok":
        raise UserError(f"cannot collect the upstream ExecuTorch operator tests: {payload} (exit {proc.exitcode})")
    return payload  # type: ignore[no-any-return]


@cache
def _descriptors() -> list[dict[str, Any]]:
    if "executorch.exir" in sys.modules:  # a warm `bti run` parent
        return _descriptors_forked()
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    res = subprocess.run([sys.executable, "-m", "harness.suites.upstream"], capture_output=True, text=True, env=env,
                         stdin=subprocess.DEVNULL)
    if res.returncode != 0:
        tail = (res.stderr.strip().splitlines() or ["no output"])[-1]
        raise UserError(f"cannot collect the upstream ExecuTorch operator tests: {tail}")
    found: list[dict[str, Any]] = json.loads(res.stdout.strip().splitlines()[-1])
    return found


def upstream_cases() -> list[Case]:
    cases = []
    for d in _descriptors():
        op = d["module"][len("test_"):]
        variant = d["function"][len("test_"):]
        if variant.startswith(op + "_"):
            variant = variant[len(op) + 1:]
        variant = f"{variant}_{d['param_id']}" if d["param_id"] else variant
        spec = {k: d[k] for k in ("module", "function", "param_index", "call")}
        if d.get("broken"):
            spec["broken"] = d["broken"]
        cases.append(Case(
            id=f"upstream.{op}.{variant}_{d['call']}".replace("[", "_").replace("]", "_"), suite=SUITE, kind="upstream",
            spec=spec, op=None, tags=("upstream", op), dtypes=(d["dtype"],), shapes=("dynamic" if d["dynamic"] else "static",),
            source=f"{PACKAGE}.{d['module']}::{d['function']}",
        ))
    return cases


def build_upstream(case: Case, axes: Any, seed: int) -> Any:
    from harness.cases.contract import Built

    spec = case.spec
    if spec.get("broken"):
        raise RuntimeError(f"the upstream test itself fails: {spec['broken']}")
    module = importlib.import_module(f"{PACKAGE}.{spec['module']}")
    fn = getattr(module, spec["function"])
    _, kwargs = _param_sets(fn)[spec["param_index"]]
    model, inputs, dyn = _run_test(fn, kwargs, seed)[spec["call"]]
    inputs = tuple(inputs) if isinstance(inputs, (list, tuple)) else (inputs,)
    return Built(model.eval(), inputs, inputs, dyn, flat_dynamic_shapes=dyn)


if __name__ == "__main__":
    import warnings

    warnings.filterwarnings("ignore")
    print(json.dumps(collect()))
