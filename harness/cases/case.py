"""Case and work-item contracts (torch-free).

* ``Case``: a module factory description plus seeded inputs plus metadata. ``spec`` is a JSON-able
  description, enough for a worker to rebuild the module and inputs; its hash keys the cache.
* ``Item``: (case, recipe, axes). Its id is stable and readable:
  ``op.add.bcast_rank4[float16,dynamic]@xnnpack``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

FLOAT_DTYPES = ("float32", "float16", "bfloat16")
INT_DTYPES = ("int8", "uint8", "int16", "int32", "int64")
ALL_DTYPES = (*FLOAT_DTYPES, *INT_DTYPES, "bool")
SHAPES = ("static", "dynamic")


def stable_hash(obj: Any, length: int = 16) -> str:
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:length]


UNINITIALIZED = "uninitialized"  # a case tag: its outputs are uninitialized memory (torch.empty*): a quantizing recipe skips it


_SCHEDULING = ("costs", "timeouts")  # figures per recipe a new measurement of any row may change on every row


@dataclass(frozen=True)
class Case:
    id: str  # "op.add.bcast_rank4" or "model.mlp.base"
    suite: str
    kind: str  # "op" | "model"
    spec: dict[str, Any] = field(hash=False, compare=False)
    op: str | None = None  # "aten::add.Tensor"
    tags: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ("float32",)
    shapes: tuple[str, ...] = ("static",)
    source: str = ""  # file:line or python module
    op_loc: str = field(default="", hash=False, compare=False)  # where `op:` is written (for errors)

    @property
    def spec_hash(self) -> str:
        """The case's identity (a cache key part; history groups by it), less ``costs`` and ``timeouts``: scheduling
        figures per recipe that a new measurement of any row may change on every row (harness.suites.case_cost)."""
        spec = {k: v for k, v in self.spec.items() if k not in _SCHEDULING} if isinstance(self.spec, dict) else self.spec
        return stable_hash({"id": self.id, "kind": self.kind, "spec": spec})


@dataclass(frozen=True)
class Axes:
    dtype: str
    shape: str  # "static" | "dynamic"

    def __str__(self) -> str:
        return f"[{self.dtype},{self.shape}]"

    def as_dict(self) -> dict[str, str]:
        return {"dtype": self.dtype, "shape": self.shape}


@dataclass(frozen=True)
class Item:
    case: Case
    recipe: str
    axes: Axes

    @property
    def id(self) -> str:
        return f"{self.case.id}{self.axes}@{self.recipe}"

    @property
    def group(self) -> str:
        """Items sharing export and reference: same case and axes, any recipe."""
        return f"{self.case.id}{self.axes}"

    @property
    def seed(self) -> int:
        return seed_for(self.group)


def seed_for(key: str) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
