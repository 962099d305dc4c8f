"""Content-addressed result cache.

Key: the case spec hash, the item id, the recipe hash, the seed, the bti version, the versions of
every package a verdict can depend on (torch, executorch, torchao, openvino, nncf, transformers, …;
``harness.env.VERDICT_PACKAGES``), the speedups that ran, the hash of bti's own code (``harness_code``: its
version stays 0.1.0 while the code changes) and the backend's own code: its distribution's version for a plugin,
or the hash of its source file when it is not installed as a distribution (a ``module:Class`` on the path).
A changed recipe (new hash) re-runs only its own items; anything else is reused. Only
deterministic outcomes are stored (not TIMEOUT, CRASH or ERROR). One small JSON file per key under
``$BTI_CACHE_DIR`` (default ``.bti-cache/``), written atomically.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from harness.cases.case import Item, stable_hash
from harness.recipes import Recipe
from harness.results import Record, atomic_write_text, dumps, lowered_xpass
from harness.status import Status


def default_dir() -> Path:
    """The cache directory of the settings (``--cache-dir`` > ``$BTI_CACHE_DIR`` > ``.bti-cache``), absolute."""
    from harness.settings import current

    return current().cache_dir


class ResultCache:
    def __init__(self, root: Path, versions: dict[str, str], speedups: tuple[str, ...] = ()) -> None:
        from harness.env import verdict_versions

        self.root = root
        # bti's version stays 0.1.0 while its code changes: the code itself is in the key, for every backend
        self.versions = {**verdict_versions(), "bti": versions.get("bti", ""), "bti_code": harness_code()}
        if speedups:  # the speedups that ran (verified identity-preserving, but a forced one may not be)
            self.versions["speedups"] = ",".join(speedups)
        self._backend_code: dict[str, str] = {}

    def backend_code(self, recipe: Recipe) -> str:
        """What identifies the backend's code: bti's own version for a built-in backend, else the
        plugin's distribution version, else the hash of the module's source file."""
        name = recipe.backend
        if name not in self._backend_code:
            self._backend_code[name] = _backend_code(name)
        return self._backend_code[name]

    def key(self, spec_hash: str, item_id: str, recipe: Recipe, seed: int, source_facts: Mapping[str, Any] | None = None) -> str:
        parts = {"spec": spec_hash, "id": item_id, "recipe": recipe.hash, "backend": self.backend_code(recipe),
                 "versions": self.versions, "seed": seed}
        # a machine fact the recipe's rules, or the case source's rules for the item (``source_facts``: the zoo's), are
        # limited to (``when:``): a cache shared between machines of two kinds must not carry one's expected failure
        # to the other
        facts = {**recipe.facts(), **(source_facts or {})}
        if facts:
            parts["facts"] = facts
        return stable_hash(parts, length=32)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, item: Item, recipe: Recipe) -> Record | None:
        from harness.suites import case_facts

        path = self._path(self.key(item.case.spec_hash, item.id, recipe, item.seed, case_facts(item.case, item.axes.dtype, recipe)))
        try:
            rec: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return rec if rec.get("id") == item.id else None  # type: ignore[return-value]

    def put(self, recipe: Recipe, record: Record) -> None:
        if not Status(record["status"]).is_verdict or "spec_hash" not in record:
            return
        if lowered_xpass(record):  # its program never ran: it runs where its runtime appears, as a LOWERED item does
            return
        key = self.key(record["spec_hash"], record["id"], recipe, record["seed"], record.get("facts"))
        atomic_write_text(self._path(key), dumps(record))


def _backend_code(name: str) -> str:
    import hashlib
    import importlib
    import inspect
    from importlib.metadata import entry_points

    from harness.backends import BUILTIN
    from harness.env import module_distribution

    if name in BUILTIN:  # its code is bti's own, which the key holds (harness_code)
        return "builtin"
    target = next((ep.value for ep in entry_points(group="bti.backends") if ep.name == name), name)
    module = target.partition(":")[0]
    dist = module_distribution(module)
    if dist:
        return dist
    try:
        source = inspect.getsourcefile(importlib.import_module(module))
        return "sha256:" + hashlib.sha256(Path(source or "").read_bytes()).hexdigest()[:16]
    except Exception:
        return "unknown"


def harness_code(root: Path | None = None) -> str:
    """A hash of bti's own code and data (every file under ``harness/`` but caches): a record computed by other
    code is not reused. About 100 small files: a few milliseconds, once per run."""
    import hashlib

    root = root or Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]
