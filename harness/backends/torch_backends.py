"""Eager torch devices and ``torch.compile`` as backends: "does this run on my device, and agree with the CPU?"

``torch-eager`` (stages: lower, load, run; no quantize, no serialize): the case's eager module, deep-copied
and moved to ``device:``, run there; inputs go to the device and outputs must come back on it.
Recipe keys: ``device`` (``cpu``, ``cuda``, ``cuda:1``, ``mps``, ``xpu``, ``hpu``, or a PrivateUse1 name such
as ``npu``), ``import`` (packages whose import registers the device, e.g. ``[torch_npu]``; imported in
the parent before workers fork) and ``autocast`` (``float16`` | ``bfloat16``: run under ``torch.autocast``
on that device).

``torch-compile`` (same stages): ``torch.compile(module, backend=, mode=)`` on ``device:``; the first call,
in the lower stage, compiles, so the lower time is the compile time. Graph breaks and the number of
graphs are recorded as its partition stats (the analogue of delegation). Inductor's cache lives under
bti's cache directory (``$BTI_CACHE_DIR/inductor``). Recipe keys: ``compiler`` (the ``torch.compile``
backend, default ``inductor``),
``mode``, ``dynamic``, ``fullgraph``, ``device``.

A device is resolved as ``torch.<type>`` (``torch.cuda``, ``torch.xpu``, or the PrivateUse1 module, whose
name ``torch._C._get_privateuse1_backend_name()`` gives); it is UNAVAILABLE with the reason when that
module is absent or ``is_available()`` is false. The device module's ``synchronize()`` ends every run, so
the latency of an asynchronous device is the real one.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.backends import BaseBackend, Where, check_keys
from harness.errors import RecipeError

if TYPE_CHECKING:
    from harness.recipes import Recipe

AUTOCAST = ("float16", "bfloat16")
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def _device(raw: Mapping[str, Any], where: Where) -> str:
    device = raw.get("device", "cpu")
    kind, _, index = device.partition(":") if isinstance(device, str) else ("", "", "")
    if not kind or kind != kind.strip():
        raise RecipeError(f"{where('device')}: `device` takes a torch device name such as cpu, cuda:0 or npu")
    if index and not index.isdigit():
        raise RecipeError(f"{where('device')}: device index {index!r} is not a number")
    return str(device)


def device_module(device: str) -> tuple[Any, str | None]:
    """``(torch.<type>, None)``, or ``(None, why)`` when the device cannot be used here."""
    import torch

    kind = device.split(":", 1)[0]
    if kind == "cpu":
        return None, None
    private = torch._C._get_privateuse1_backend_name()
    module = getattr(torch, kind, None)
    if module is None or not hasattr(module, "is_available"):
        hint = f" (this process's PrivateUse1 device is {private!r})" if private != "privateuseone" else ""
        return None, f"device module torch.{kind} is absent: no backend for {kind!r} is installed{hint}"
    try:
        available = bool(module.is_available())
    except Exception as exc:
        return None, f"torch.{kind}.is_available() failed: {type(exc).__name__}: {exc}"
    if not available:
        build = ""
        if kind == "cuda" and torch.version.cuda is None:
            build = f" (this torch {torch.__version__} is a CPU-only build)"
        return None, f"torch.{kind}.is_available() is False: no {kind} device here{build}"
    if ":" in device:
        count = getattr(module, "device_count", lambda: 1)()
        if int(device.split(":", 1)[1]) >= count:
            return None, f"{device} does not exist ({count} {kind} device(s) here)"
    return module, None


def _to_device(values: tuple[Any, ...], device: str) -> list[Any]:
    import torch

    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def _check_on_device(outs: list[Any], device: str) -> list[Any]:
    import torch

    kind = device.split(":", 1)[0]
    for i, o in enumerate(outs):
        if isinstance(o, torch.Tensor) and o.device.type != kind:
            raise RuntimeError(f"output[{i}] came back on {o.device}, not on {device}")
    return outs


@dataclass(frozen=True)
class EagerOptions:
    device: str = "cpu"
    autocast: str | None = None
    imports: tuple[str, ...] = ()  # modules whose import registers the device (torch_npu, …)


def import_device_modules(modules: tuple[str, ...]) -> str | None:
    """Import the packages that register a device; the reason when one cannot be imported."""
    import importlib

    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:
            return f"device package {name!r} cannot be imported: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    return None


@dataclass
class OnDevice:
    """A callable on a device, with how to call it. The inputs are moved to the device once per input
    tuple (the runner passes the same tuple to every timed call), so latency is the call, not the copy."""

    fn: Any
    device: str
    autocast: str | None = None
    moved: tuple[tuple[Any, ...], list[Any]] | None = None  # (the input tuple, its tensors on the device)
    sync: Any = None

    def args(self, inputs: tuple[Any, ...]) -> list[Any]:
        if self.moved is None or self.moved[0] is not inputs:
            self.moved = (inputs, _to_device(inputs, self.device))
        return self.moved[1]

    def synchronize(self) -> None:
        if self.sync is None:
            module = device_module(self.device)[0] if not self.device.startswith("cpu") else None
            self.sync = getattr(module, "synchronize", None) or (lambda: None)
        self.sync()


def _call(handle: OnDevice, inputs: tuple[Any, ...]) -> list[Any]:
    import contextlib

    import torch

    args = handle.args(inputs)
    kind = handle.device.split(":", 1)[0]
    cast = (torch.autocast(kind, dtype=getattr(torch, handle.autocast)) if handle.autocast
            else contextlib.nullcontext())
    with torch.no_grad(), cast:
        out = handle.fn(*args)
    handle.synchronize()  # an asynchronous device has finished when the call returns
    from harness.judge import leaves as _leaves

    outs = _check_on_device(_leaves(out), handle.device)
    if handle.autocast:  # autocast is judged on values: its lower-precision outputs go back to the inputs' dtype
        # (a model fed token ids has no floating input: the recipe runs on the float32 cases); only outputs in the
        # autocast dtype: one the op asked for itself (`x.to(torch.float16)` under bf16 autocast) stays as it is
        dtype = next((a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), torch.float32)
        low = getattr(torch, handle.autocast)
        outs = [o.to(dtype) if isinstance(o, torch.Tensor) and o.dtype == low else o for o in outs]
    return outs


class TorchEagerBackend(BaseBackend):
    name = "torch-eager"
    needs_export = False
    accuracy_rule = "dynamo"  # models are judged as PyTorch's dynamo benchmarks judge a device

    def parse_options(self, raw: Mapping[str, Any], where: Where) -> EagerOptions:
        check_keys(raw, {"device", "autocast", "import"}, where, self.name)
        autocast = raw.get("autocast")
        if autocast is not None and autocast not in AUTOCAST:
            raise RecipeError(f"{where('autocast')}: `autocast` takes {' or '.join(AUTOCAST)}")
        imports = raw.get("import") or []
        if not isinstance(imports, list) or not all(isinstance(m, str) and m for m in imports):
            raise RecipeError(f"{where('import')}: `import` takes a list of module names (the packages that register the device)")
        return EagerOptions(_device(raw, where), autocast, tuple(imports))

    def unavailable_reason(self, recipe: Recipe) -> str | None:
        """Imports the device's packages first (parent side, before workers fork: they inherit the device)."""
        return import_device_modules(recipe.options.imports) or device_module(recipe.options.device)[1]

    def warm(self, recipe: Recipe, lower: bool) -> None:
        import torch  # noqa: F401

    def lower(self, recipe: Recipe, ep: Any, built: Any) -> tuple[Any, dict[str, Any] | None]:
        from harness.builders.build import copy_module

        opts: EagerOptions = recipe.options
        module = copy_module(built.module).to(opts.device)
        return OnDevice(module, opts.device, opts.autocast), None

    def load(self, recipe: Recipe, lowered: Any, blob: bytes | None) -> OnDevice:
        return lowered  # type: ignore[no-any-return]

    def run(self, handle: OnDevice, inputs: tuple[Any, ...]) -> list[Any]:
        return _call(handle, inputs)


@dataclass(frozen=True)
class CompileOptions:
    device: str = "cpu"
    backend: str = "inductor"
    mode: str | None = None
    dynamic: bool | None = None
    fullgraph: bool = False


class TorchCompileBackend(BaseBackend):
    name = "torch-compile"
    needs_export = False
    accuracy_rule = "dynamo"

    def parse_options(self, raw: Mapping[str, Any], where: Where) -> CompileOptions:
        check_keys(raw, {"device", "compiler", "mode", "dynamic", "fullgraph"}, where, self.name)
        backend = raw.get("compiler", "inductor")
        if not isinstance(backend, str) or not backend:
            raise RecipeError(f"{where('compiler')}: `compiler` names a torch.compile backend (inductor, eager, aot_eager, …)")
        mode = raw.get("mode")
        if mode is not None and mode not in COMPILE_MODES:
            raise RecipeError(f"{where('mode')}: `mode` takes {', '.join(COMPILE_MODES)}")
        for flag in ("dynamic", "fullgraph"):
            if flag in raw and raw[flag] is not None and not isinstance(raw[flag], bool):
                raise RecipeError(f"{where(flag)}: `{flag}` takes true or false")
        return CompileOptions(_device(raw, where), backend, mode, raw.get("dynamic"), bool(raw.get("fullgraph", False)))

    def unavailable_reason(self, recipe: Recipe) -> str | None:
        import shutil

        opts: CompileOptions = recipe.options
        why = device_module(opts.device)[1]
        if why:
            return why
        if opts.backend == "inductor" and opts.device.startswith("cpu") and not (shutil.which("g++") or shutil.which("clang++")):
            return "inductor's CPU backend needs a C++ compiler (g++ or clang++) on PATH"
        return None

    def warm(self, recipe: Recipe, lower: bool) -> None:
        """Inductor's caches under bti's cache directory, and no compile worker pool (forked workers). Importing
        ``executorch.exir`` already set ``TORCHINDUCTOR_CACHE_DIR`` to torch's machine-wide default (torch._dynamo's
        package cache asks for the directory at import), so a value equal to that default is replaced: only one the
        user chose is kept."""
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir

        from harness.runner.cache import default_dir

        if os.environ.get("TORCHINDUCTOR_CACHE_DIR", default_cache_dir()) == default_cache_dir():
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = str((default_dir() / "inductor").resolve())
        os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

    def lower(self, recipe: Recipe, ep: Any, built: Any) -> tuple[Any, dict[str, Any] | None]:
        import torch
        from torch._dynamo.utils import counters

        from harness.builders.build import copy_module

        opts: CompileOptions = recipe.options
        self.warm(recipe, lower=False)
        torch._dynamo.reset()
        counters.clear()
        module = copy_module(built.module).to(opts.device)
        compiled = torch.compile(module, backend=opts.backend, mode=opts.mode, dynamic=opts.dynamic,
                                 fullgraph=opts.fullgraph)
        handle = OnDevice(compiled, opts.device)
        _call(handle, built.example)  # the first call compiles: the lower stage's time is the compile time
        breaks = {str(reason)[:200]: n for reason, n in counters["graph_break"].items()}
        stats = {"partitioned": False, "compiler": opts.backend, "graphs": int(counters["stats"]["unique_graphs"]),
                 "graph_breaks": sum(breaks.values()), "graph_break_reasons": dict(sorted(breaks.items())[:10])}
        return handle, stats

    def load(self, recipe: Recipe, lowered: Any, blob: bytes | None) -> OnDevice:
        return lowered  # type: ignore[no-any-return]

    def run(self, handle: OnDevice, inputs: tuple[Any, ...]) -> list[Any]:
        return _call(handle, inputs)
