"""Expand cases × recipes × axes into work items; filter; shard (torch-free)."""

from __future__ import annotations

import fnmatch
import functools
from collections.abc import Iterable
from dataclasses import dataclass, field

from harness.cases.case import Axes, Case, Item
from harness.cases.ops import op_short_name
from harness.errors import UserError
from harness.recipes import Recipe


@dataclass(frozen=True)
class Filters:
    patterns: tuple[str, ...] = ()  # fnmatch on case id, group id or item id
    ops: tuple[str, ...] = ()  # "add", "aten::add.Tensor", "aten::add"
    tags: tuple[str, ...] = ()
    dtypes: tuple[str, ...] = ()
    shapes: tuple[str, ...] = ()
    exclude: tuple[str, ...] = field(default=())

    def keep(self, item: Item) -> bool:
        keys = (item.case.id, item.group, item.id)
        if self.patterns and not self._patterns.any(keys):
            return False
        if self.exclude and self._exclude.any(keys):
            return False
        if self.ops and not _op_matches(item.case, self.ops):
            return False
        if self.tags and not set(self.tags) & set(item.case.tags):
            return False
        if self.dtypes and item.axes.dtype not in self.dtypes:
            return False
        return not (self.shapes and item.axes.shape not in self.shapes)

    @functools.cached_property
    def _patterns(self) -> _Globs:
        return _Globs(self.patterns)

    @functools.cached_property
    def _exclude(self) -> _Globs:
        return _Globs(self.exclude)


class _Globs:
    """Globs, each also matching its own text (an item id pasted from a report, ``op.add.x[float32,static]@xnnpack``,
    matches though its brackets read as a character class), indexed by their literal prefix: a glob can match only a
    key its prefix (the text before its first ``*``, ``?`` or ``[``) begins, so a key is tried against the globs under
    its own prefixes, not against every glob. ``bti run -k`` with the 2,241 ids of a rerun list kept 2,241 of 5,580
    items in 26 s when each item tried every glob, in 0.5 s indexed."""

    def __init__(self, patterns: tuple[str, ...]) -> None:
        self.exact = frozenset(patterns)
        self.by_prefix: dict[str, list[str]] = {}
        for p in dict.fromkeys(patterns):
            cut = min((i for i in (p.find(c) for c in "*?[") if i >= 0), default=-1)
            if cut >= 0:  # no wildcard: equality (above) is its only match
                self.by_prefix.setdefault(p[:cut], []).append(p)

    def any(self, keys: tuple[str, ...]) -> bool:
        for key in keys:
            if key in self.exact:
                return True
            for n in range(len(key) + 1):
                for p in self.by_prefix.get(key[:n], ()):
                    if fnmatch.fnmatchcase(key, p):
                        return True
        return False


def _op_matches(case: Case, ops: tuple[str, ...]) -> bool:
    if case.op is None:
        return False
    full = case.op  # aten::add.Tensor
    base = full.split(".")[0]  # aten::add
    short = case.id.split(".")[1] if case.id.startswith("op.") else op_short_name(full)  # add
    return any(o in (full, base, short) for o in ops)


def expand(cases: Iterable[Case], recipes: list[Recipe], filters: Filters = Filters()) -> list[Item]:
    """Items in a stable order: case order, then dtype, shape, recipe (recipes of a group adjacent)."""
    out = []
    for case in cases:
        for dtype in case.dtypes:
            for shape in case.shapes:
                axes = Axes(dtype, shape)
                for recipe in recipes:
                    item = Item(case, recipe.name, axes)
                    if filters.keep(item):
                        out.append(item)
    return out


def groups_of(items: list[Item]) -> list[list[Item]]:
    """Items sharing a (case, axes) group, in first-seen order."""
    by: dict[str, list[Item]] = {}
    for item in items:
        by.setdefault(item.group, []).append(item)
    return list(by.values())


def parse_shard(text: str | None) -> tuple[int, int] | None:
    if not text:
        return None
    try:
        i, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise UserError(f"--shard {text!r}: expected i/n, e.g. 1/4") from None
    if not 1 <= i <= n:
        raise UserError(f"--shard {text!r}: need 1 <= i <= n")
    return i, n


def shard(groups: list[list[Item]], index: int, count: int, durations: dict[str, float] | None = None,
          split: bool = True) -> list[list[Item]]:
    """Deterministic, disjoint, balanced: longest-processing-time-first over groups.

    Cost of a group is the summed recorded duration of its items when ``durations`` (item id →
    seconds, from a previous run) knows them, else the estimate for each item's case on its recipe
    (``harness.suites.case_cost``: an operator item about 1 s, a small model 10, a real-size Hugging Face model 120, a
    zoo row on the portable kernels many times its figure on XNNPACK). ``split``: see ``_balance``.
    """
    return shards(groups, count, durations, split)[index - 1]


def shards(groups: list[list[Item]], count: int, durations: dict[str, float] | None = None,
           split: bool = True) -> list[list[list[Item]]]:
    """Every shard's groups at once (``shard`` is one of them), from one balance."""
    groups, owner, _ = _balance(groups, count, durations, split)
    out: list[dict[str, list[Item]]] = [{} for _ in range(count)]
    for g, target in zip(groups, owner, strict=True):  # a split group's parts that land on one shard run together again
        out[target].setdefault(g[0].group, []).extend(g)
    return [list(parts.values()) for parts in out]


def shard_loads(groups: list[list[Item]], count: int, durations: dict[str, float] | None = None,
                split: bool = True) -> list[float]:
    """Each shard's estimated seconds as ``shard`` balances them: a plan's check against its jobs' time limit."""
    return _balance(groups, count, durations, split)[2]


def _balance(groups: list[list[Item]], count: int, durations: dict[str, float] | None,
             split: bool = True) -> tuple[list[list[Item]], list[int], list[float]]:
    """The groups as sharded, each one's shard (0-based), and each shard's estimated seconds. With ``split``, a group
    costing more than a shard's fair share (a large zoo row on 20 recipes: an hour each on the portable kernels and the
    TOSA reference model) is split into its items, so no shard holds a whole day's row: the parts on one shard run
    together again (``shard``), and the others export the case again, without the control recipe's status beside
    them (their failures' triage says "backend" where the control's shared failure would say "upstream"). A run with a
    baseline does not split: each item needs the baseline's outputs beside it."""
    from harness.suites import case_cost

    durations = durations or {}
    estimate: dict[tuple[str, str], float] = {}

    def cost(group: list[Item]) -> float:
        return sum(durations.get(it.id) or estimate.setdefault((it.case.id, it.recipe), case_cost(it.case, it.recipe))
                   for it in group)

    costs = [cost(g) for g in groups]
    if split and count > 1:
        fair = sum(costs) / count
        heavy = {g for g, c in enumerate(costs) if c > fair and len(groups[g]) > 1}
        if heavy:
            groups = [part for g, items in enumerate(groups) for part in ([[it] for it in items] if g in heavy else [items])]
            costs = [cost(g) for g in groups]
    order = sorted(range(len(groups)), key=lambda g: (-costs[g], groups[g][0].group))
    loads = [0.0] * count
    owner = [0] * len(groups)
    for g in order:
        target = min(range(count), key=lambda s: (loads[s], s))
        owner[g] = target
        loads[target] += costs[g]
    return groups, owner, loads
