"""Content-addressed result cache.

Key: the case spec hash, the item id, the recipe hash, the torch/executorch/bti versions and the
seed. A changed recipe (new hash) re-runs only its own items; anything else is reused. Only
deterministic outcomes are stored (not TIMEOUT, CRASH or ERROR). One small JSON file per key under
``$BTI_CACHE_DIR`` (default ``.bti-cache/``), written atomically.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from harness.recipes import Recipe
from harness.results import Record, atomic_write_text, dumps
from harness.spec.case import Item, stable_hash
from harness.status import Status

_UNCACHED = {Status.TIMEOUT, Status.CRASH, Status.ERROR}


def default_dir() -> Path:
    return Path(os.environ.get("BTI_CACHE_DIR") or ".bti-cache")


class ResultCache:
    def __init__(self, root: Path, versions: dict[str, str]) -> None:
        self.root = root
        self.versions = {k: versions.get(k, "") for k in ("torch", "executorch", "bti")}

    def key(self, spec_hash: str, item_id: str, recipe: Recipe, seed: int) -> str:
        return stable_hash({"spec": spec_hash, "id": item_id, "recipe": recipe.hash,
                            "versions": self.versions, "seed": seed}, length=32)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, item: Item, recipe: Recipe) -> Record | None:
        path = self._path(self.key(item.case.spec_hash, item.id, recipe, item.seed))
        try:
            rec: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return rec if rec.get("id") == item.id else None  # type: ignore[return-value]

    def put(self, recipe: Recipe, record: Record) -> None:
        if Status(record["status"]) in _UNCACHED or "spec_hash" not in record:
            return
        key = self.key(record["spec_hash"], record["id"], recipe, record["seed"])
        atomic_write_text(self._path(key), dumps(record))
