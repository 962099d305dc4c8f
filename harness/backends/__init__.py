"""Backend plugins: a small Protocol, an explicit registry, and the ``bti.backends`` entry points.

A backend takes an exported program to outputs. It declares which optional stages it has; the runner
composes them and never asks which backend it is:

    export (bti) → [quantize] → lower → [serialize] → load → run → compare (bti)

* ``stages`` — the optional stages it has: ``Stage.QUANTIZE`` (used only when its options quantize)
  and ``Stage.SERIALIZE`` (it produces program bytes). An eager device has neither; inductor has no
  bytes; ONNX Runtime has both.
* ``parse_options(raw, where)`` — the recipe keys bti does not own (see ``harness.recipes``), parsed
  into a frozen options object (``recipe.options``). Unknown keys and bad values raise ``RecipeError``
  with ``where(key)`` (the recipe's file:line). An options object may have ``quantized`` and
  ``scheme`` attributes (e.g. ``int8``): they pick the ``quantized`` tolerance and the capability.
* ``unavailable_reason(recipe)`` — parent side, cheap, no torch compute: ``None`` when the backend
  can run here, else a one-line reason naming the missing SDK, package, device or runtime.
* ``warm(recipe, lower)`` — parent side, before workers fork: import what workers need, and with
  ``lower=True`` also lower a tiny model once, if that is fork-safe for this backend.
* ``needs_export`` — False when ``lower`` uses only ``built.module`` (an eager device, ``torch.compile``):
  bti then skips ``torch.export`` for it, and a case that does not export still runs there.
* ``quantize(recipe, ep, built)`` → ExportedProgram.
* ``lower(recipe, ep, built)`` → (lowered, partition stats or None). Stats: ``partitioned``,
  ``delegated_nodes``, ``undelegated_nodes``, ``total_nodes``, ``delegated_pct``, ``delegated_ops``,
  ``undelegated_ops`` (op name → count).
* ``serialize(recipe, lowered)`` → (program bytes, delegate blobs ``[{"backend", "bytes"}]``).
* ``load(recipe, lowered, blob)`` → a handle; ``blob`` is None for a backend without SERIALIZE.
* ``run(handle, inputs)`` → list of outputs, on the backend's device. It must return tensors (or
  Python scalars) and must not write into ``inputs``: either is a run failure, the backend's fault.
* ``bundle(recipe, directory, name, lowered, blob, inputs, refs, outs)`` → files written for a device
  (``{"pte": path, "bpte": path}``, or ``{"bundle_skipped": why}``).

* ``execute(handle, inputs, warmup, repeats)`` → (outputs, latencies in ms, facts): what the runner calls.
  ``BaseBackend``'s calls ``run`` warmup + repeats times in process. A backend whose programs can run elsewhere
  (ExecuTorch: ``runs_programs = True``) loads and runs through the recipe's runtime provider
  (``harness.providers``), which times its own runs; ``facts`` carries what it measured (``load_ms``,
  ``memory_mb``). ``run`` is then called only through the pybind provider, never under ``--runtime runner``.
* ``accuracy_rule`` — ``"dynamo"`` to judge whole models by dynamo's benchmark rule unless a recipe says
  otherwise (the eager-device and ``torch.compile`` backends); None for allclose.

A model item is run once more through ``execute`` (no warm-up, one run) and compared bit for bit
(``accuracy.deterministic``), wherever its program runs.

``BaseBackend`` gives the optional parts defaults. Third-party backends register with an entry point
in the ``bti.backends`` group, pointing at a class with that interface, or a recipe names
``backend: package.module:Class`` directly.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Mapping
from functools import cache
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from harness.errors import RecipeError
from harness.status import Stage

if TYPE_CHECKING:
    from harness.judge import QuantizedReference
    from harness.recipes import Recipe, Requires

Where = Callable[..., str]  # where(key=None) -> "file:line"


class Backend(Protocol):
    """Everything the runner reads from a backend (``BaseBackend`` gives each optional part its default).

    One instance per backend name per process: in a worker it serves every recipe that names it, so state kept
    on ``self`` between ``lower`` and ``run`` belongs to the item in hand (workers run one item at a time)."""

    name: str
    stages: frozenset[Stage]
    needs_export: bool  # False: lower() works from ``built.module`` and never reads ``ep`` (no torch.export)
    runs_programs: bool  # True: load/run go through a runtime provider (``execute``); ``bti run --runtime`` applies
    accuracy_rule: str | None  # a model's default rule when its recipe names none: "dynamo" or None (allclose)

    def parse_options(self, raw: Mapping[str, Any], where: Where) -> Any: ...
    def unavailable_reason(self, recipe: Recipe) -> str | None: ...
    def warm(self, recipe: Recipe, lower: bool) -> None: ...
    def quantize(self, recipe: Recipe, ep: Any, built: Any) -> Any: ...
    def quantized_reference(self, recipe: Recipe, quantized: Any, inputs: tuple[Any, ...]) -> QuantizedReference: ...
    def lower(self, recipe: Recipe, ep: Any, built: Any) -> tuple[Any, dict[str, Any] | None]: ...
    def serialize(self, recipe: Recipe, lowered: Any) -> tuple[bytes, list[dict[str, Any]]]: ...
    def load(self, recipe: Recipe, lowered: Any, blob: bytes | None) -> Any: ...
    def run(self, handle: Any, inputs: tuple[Any, ...]) -> list[Any]: ...
    def execute(self, handle: Any, inputs: tuple[Any, ...], warmup: int,
                repeats: int) -> tuple[list[Any], list[float], dict[str, Any]]: ...
    def bundle(self, recipe: Recipe, directory: Path, name: str, lowered: Any, blob: bytes | None,
               inputs: tuple[Any, ...], refs: list[Any], outs: list[Any]) -> dict[str, str]: ...


class BaseBackend:
    """Defaults for the optional parts: no options, no optional stages, nothing to warm or bundle."""

    name = "base"
    stages: frozenset[Stage] = frozenset()
    runs_programs = False  # True: its programs run through runtime providers (``bti run --runtime``)
    needs_export = True  # False: lower() works from ``built.module`` and never reads ``ep`` (no torch.export)
    accuracy_rule: str | None = None  # "dynamo": models are judged by dynamo's benchmark rule unless a recipe says

    def parse_options(self, raw: Mapping[str, Any], where: Where) -> Any:
        if raw:
            keys = sorted(map(str, raw))
            raise RecipeError(f"{where(keys[0])}: unknown recipe key(s) for backend {self.name}: {', '.join(keys)}")
        return None

    def unavailable_reason(self, recipe: Recipe) -> str | None:
        return None

    def warm(self, recipe: Recipe, lower: bool) -> None:
        return None

    def quantize(self, recipe: Recipe, ep: Any, built: Any) -> Any:
        raise NotImplementedError(f"backend {self.name} does not quantize")

    def quantized_reference(self, recipe: Recipe, quantized: Any, inputs: tuple[Any, ...]) -> QuantizedReference:
        """What ``quantize`` returned, run in eager PyTorch on ``inputs``: the reference a quantized recipe's outputs
        are held to, with each output's dequantize scale (``harness.judge``). The default takes a
        ``torch.export.ExportedProgram`` or an ``fx.GraphModule``; a backend whose quantize returns something else
        overrides it, or returns ``QuantizedReference(error=...)`` (then the outputs are held to fp32 alone)."""
        from harness.judge import quantized_reference

        return quantized_reference(quantized, inputs)

    def serialize(self, recipe: Recipe, lowered: Any) -> tuple[bytes, list[dict[str, Any]]]:
        raise NotImplementedError(f"backend {self.name} has no serialize stage")

    def run(self, handle: Any, inputs: tuple[Any, ...]) -> list[Any]:
        raise NotImplementedError(f"backend {self.name} does not run programs")

    def execute(self, handle: Any, inputs: tuple[Any, ...], warmup: int,
                repeats: int) -> tuple[list[Any], list[float], dict[str, Any]]:
        """``warmup`` untimed and ``repeats`` timed calls of ``run`` in this process: (the last outputs, the
        latencies in ms, no provider facts). A backend that runs its programs elsewhere overrides it."""
        from harness.metrics import LONG_CALL_S, timed_calls

        outs, samples = timed_calls(lambda: self.run(handle, inputs), warmup, repeats, LONG_CALL_S)
        return outs, samples, {}  # as run returned them: the run stage checks the contract (a list of tensors)

    def bundle(self, recipe: Recipe, directory: Path, name: str, lowered: Any, blob: bytes | None,
               inputs: tuple[Any, ...], refs: list[Any], outs: list[Any]) -> dict[str, str]:
        return {"bundle_skipped": f"backend {self.name} writes no device bundle"}


def check_keys(raw: Mapping[str, Any], allowed: set[str] | frozenset[str], where: Where, backend: str) -> None:
    """Reject keys a backend does not know, naming the first one's line."""
    unknown = sorted(str(k) for k in set(raw) - set(allowed))
    if unknown:
        raise RecipeError(f"{where(unknown[0])}: unknown recipe key(s) for backend {backend}: {', '.join(unknown)} "
                          f"(it takes: {', '.join(sorted(allowed)) or 'none'})")


BUILTIN: dict[str, str] = {
    "executorch": "harness.backends.executorch:ExecuTorchBackend",
    "torch-eager": "harness.backends.torch_backends:TorchEagerBackend",
    "torch-compile": "harness.backends.torch_backends:TorchCompileBackend",
    "onnxruntime": "harness.backends.onnxruntime:OnnxRuntimeBackend",
}


def _import(target: str, what: str) -> Any:
    module_name, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except Exception as exc:
        raise RecipeError(f"backend {what!r} cannot be loaded from {target}: {type(exc).__name__}: {exc}") from None


#: what a backend object must have: every member of the ``Backend`` Protocol (``BaseBackend`` has all but lower and load)
REQUIRED = tuple(sorted({*Backend.__annotations__, *(k for k, v in vars(Backend).items() if callable(v) and not k.startswith("_"))}))


@cache
def get_backend(name: str) -> Backend:
    """Registry, then entry points, then ``module:Class``; an object that lacks part of the Protocol is refused."""
    if name in BUILTIN:
        return _checked(_import(BUILTIN[name], name)(), name, BUILTIN[name])
    for ep in entry_points(group="bti.backends"):
        if ep.name == name:
            try:
                backend = ep.load()()
            except Exception as exc:  # a broken plugin is the plugin's problem: its items are UNAVAILABLE
                raise RecipeError(f"backend {name!r} cannot be loaded from {ep.value}: {type(exc).__name__}: {exc}") from None
            return _checked(backend, name, ep.value)
    if ":" in name:
        return _checked(_import(name, name)(), name, name)
    known = sorted({*BUILTIN, *(e.name for e in entry_points(group="bti.backends"))})
    raise RecipeError(f"unknown backend {name!r}", hint=f"registered backends: {', '.join(known)}")


def _checked(backend: Any, name: str, where: str) -> Backend:
    missing = [a for a in REQUIRED if not hasattr(backend, a)]
    if missing:
        raise RecipeError(f"backend {name!r} from {where} lacks {', '.join(missing)}",
                          hint="subclass harness.backends.BaseBackend, which has every optional part")
    return backend  # type: ignore[no-any-return]


def unavailable_reason(recipe: Recipe) -> str | None:
    """Check the recipe's ``requires`` and the backend's own check. Never raises for a missing SDK."""
    if recipe.options_error:
        return recipe.options_error
    gap = requirement_gap(recipe.requires)
    if gap:
        return gap
    try:
        backend = get_backend(recipe.backend)
    except RecipeError as exc:
        return exc.one_line()
    return backend.unavailable_reason(recipe)


def run_gap(recipe: Recipe) -> str | None:
    """Why this machine cannot run the recipe's programs, though it lowers them (``run_requires``), else None."""
    gap = requirement_gap(recipe.run_requires)
    if gap and recipe.run_requires.note:
        return f"{gap} ({recipe.run_requires.note})"
    return gap


def requirement_gap(req: Requires) -> str | None:
    """The first requirement that does not hold here, in words, else None."""
    import importlib.util

    if req.platforms and sys.platform not in req.platforms:
        return f"runs on {' or '.join(req.platforms)}, not {sys.platform}"
    for exe in req.executables:
        if not find_executable(exe):
            return f"executable {exe!r} is not on PATH"
    for var in req.env:  # an SDK's location first: it says more than the module the SDK would bring
        if not os.environ.get(var):
            return f"environment variable {var} is not set"
    for mod in req.modules:
        try:
            found = importlib.util.find_spec(mod) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return f"python package {mod!r} is not installed"
    if req.runtime_backends:
        have = _runtime_backends()
        missing = [b for b in req.runtime_backends if b not in have]
        if missing:
            return (f"{', '.join(missing)} not registered in this executorch runtime "
                    f"(registered: {', '.join(sorted(have))})")
    return None


def find_executable(name: str) -> str | None:
    """``name`` on PATH, else beside this interpreter: where pip puts a package's executables (a venv's ``bin``,
    which a venv used without activating leaves off PATH)."""
    import shutil
    import sysconfig

    return shutil.which(name) or shutil.which(name, path=sysconfig.get_path("scripts") or os.path.dirname(sys.executable))


def _runtime_backends() -> set[str]:
    try:
        from executorch.runtime import Runtime
    except ImportError:
        return set()
    return set(Runtime.get().backend_registry.registered_backend_names)
