"""Between two items of a group, the first's garbage cycles are collected where it grew the worker
(``harness.speedups.gc_policy.ItemMemory``): a zoo row's items each leave programs as large as the model."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

np = pytest.importorskip("numpy")

from harness.env import rss_mb  # noqa: E402
from harness.speedups import gc_policy  # noqa: E402


class _Node:
    """One end of a reference cycle, as an FX node and its graph are."""

    def __init__(self, payload: object) -> None:
        self.payload = payload
        self.other: _Node | None = None


def _cycle(payload: object) -> weakref.ref[_Node]:
    a, b = _Node(payload), _Node(None)
    a.other, b.other = b, a
    return weakref.ref(a)


@pytest.fixture
def gc_off() -> Iterator[None]:
    """As a worker runs a group: automatic collection off (``group_gc``)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def test_an_item_that_grew_the_worker_leaves_no_garbage_for_the_next(gc_off: None) -> None:
    memory = gc_policy.ItemMemory()
    big = _cycle(np.ones(96 * 2**20 // 8 * 8))  # 768 MiB of touched pages, reachable only through a cycle
    grown = rss_mb()
    assert grown - memory.since > gc_policy.ITEM_GROWTH_MB
    assert big() is not None  # with collection off, the cycle outlives its last reference
    assert memory.after_item() is True
    assert big() is None
    assert rss_mb() < grown - 512  # the pages went back to the system: the next item's RSS is its own
    assert memory.since == pytest.approx(rss_mb(), abs=64)  # the next threshold counts from here


def test_a_small_item_keeps_the_group_s_single_collection(gc_off: None) -> None:
    memory = gc_policy.ItemMemory()
    small = _cycle(np.ones(1024))
    assert memory.after_item() is False
    assert small() is not None  # not collected: an op item's group still collects once, at its end
    gc.collect()
    assert small() is None


def test_execute_group_checks_between_every_item(monkeypatch: pytest.MonkeyPatch) -> None:
    """The group loop asks before each item, so a collection lands before the next item starts (and its memory
    limit reads only its own)."""
    from harness import stages

    calls: list[str] = []

    class Spy:
        def __init__(self) -> None:
            calls.append("made")

        def after_item(self) -> bool:
            calls.append("after")
            return False

    def run_item(item, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(item.recipe)
        return {"status": "PASS"}, None, None

    monkeypatch.setattr(stages, "ItemMemory", Spy)
    monkeypatch.setattr(stages, "run_item", run_item)
    monkeypatch.setattr(stages, "Group", lambda item: _FakeGroup())
    items, started = [_item("a"), _item("b")], list[str]()
    stages.execute_group(items, {"a": object(), "b": object()}, "run", on_start=started.append, emit=lambda rec: None)  # type: ignore[dict-item]
    assert calls == ["made", "after", "a", "after", "b"]  # one per group, asked before every item
    assert started == [it.id for it in items]


class _FakeGroup:
    built = None

    def weights_written(self) -> bool:
        return False

    def program_changed(self) -> None:
        pass


def _item(recipe: str):  # type: ignore[no-untyped-def]
    from harness.cases.case import Axes, Case, Item

    return Item(Case(id="op.add.t", suite="t", kind="op", spec={}), recipe, Axes("float32", "static"))
