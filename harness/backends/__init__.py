"""Backend plugins: a small Protocol, an explicit registry, and the ``bti.backends`` entry points.

A backend turns an exported program into something runnable. The runner composes the stages;
backends never see the runner. Contract (all methods may raise; the runner maps the exception to
the failing stage's status):

* ``unavailable_reason(recipe)`` — parent side, cheap, no torch compute: ``None`` when the
  backend can run here, else a one-line reason naming the missing SDK, package or runtime.
* ``quantize(recipe, ep, built)`` → ExportedProgram (identity when the recipe has no ``quantize``).
* ``lower(recipe, ep)`` → (lowered, partition stats dict).
* ``serialize(lowered)`` → (program bytes, list of delegate blobs ``{"backend", "bytes"}``).
* ``load(blob)`` → a handle (keep every object the runtime needs alive inside it).
* ``run(handle, inputs)`` → list of output tensors.

Third-party backends register with an entry point in the ``bti.backends`` group, pointing at a
class with that interface, or a recipe names ``backend: package.module:Class`` directly.
"""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, Protocol

from harness.errors import RecipeError

if TYPE_CHECKING:
    from harness.recipes import Recipe


class Backend(Protocol):
    name: str

    def unavailable_reason(self, recipe: Recipe) -> str | None: ...
    def quantize(self, recipe: Recipe, ep: Any, built: Any) -> Any: ...
    def lower(self, recipe: Recipe, ep: Any) -> tuple[Any, dict[str, Any]]: ...
    def serialize(self, lowered: Any) -> tuple[bytes, list[dict[str, Any]]]: ...
    def load(self, blob: bytes) -> Any: ...
    def run(self, handle: Any, inputs: tuple[Any, ...]) -> list[Any]: ...


BUILTIN: dict[str, str] = {
    "executorch": "harness.backends.executorch:ExecuTorchBackend",
}


def _import(target: str, what: str) -> Any:
    module_name, _, attr = target.partition(":")
    try:
        return getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise RecipeError(f"backend {what!r} cannot be loaded from {target}: {exc}") from None


@cache
def get_backend(name: str) -> Backend:
    """Registry, then entry points, then ``module:Class``."""
    if name in BUILTIN:
        return _import(BUILTIN[name], name)()  # type: ignore[no-any-return]
    for ep in entry_points(group="bti.backends"):
        if ep.name == name:
            return ep.load()()  # type: ignore[no-any-return]
    if ":" in name:
        return _import(name, name)()  # type: ignore[no-any-return]
    known = sorted({*BUILTIN, *(e.name for e in entry_points(group="bti.backends"))})
    raise RecipeError(f"unknown backend {name!r}", hint=f"registered backends: {', '.join(known)}")


def unavailable_reason(recipe: Recipe) -> str | None:
    """Check the recipe's ``requires`` and the backend's own check. Never raises for a missing SDK."""
    import importlib.util
    import os

    req = recipe.raw.get("requires") or {}
    for var in req.get("env") or []:
        if not os.environ.get(var):
            return f"environment variable {var} is not set (the {recipe.name} SDK location)"
    for mod in req.get("modules") or []:
        try:
            found = importlib.util.find_spec(mod) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return f"python package {mod!r} is not installed"
    try:
        backend = get_backend(recipe.backend)
    except RecipeError as exc:
        return exc.one_line()
    return backend.unavailable_reason(recipe)
