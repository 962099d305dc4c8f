"""Speedups 7 (shared provenance), 8 (deferred GraphModule.recompile), 9 (XNNPACK pattern guard), 10 and 11 in
harness/speedups/: the same values and the same programs as torch's own code, and ``disable`` gives torch's back."""

from __future__ import annotations

import copy
import inspect
import pickle
from collections.abc import Iterator

import pytest

torch = pytest.importorskip("torch")

import torch.fx  # noqa: E402, F811  (the submodule, after the skip)
from torch.fx.traceback import NodeSource, NodeSourceAction  # noqa: E402

import harness.speedups as sp  # noqa: E402
from harness.speedups import decomposition_skip, preservable_order, shared_provenance  # noqa: E402
from harness.speedups import lazy_recompile as lazy_mod  # noqa: E402
from harness.speedups import xnnpack_pattern_guard as guard  # noqa: E402
from harness.speedups.base import Speedup  # noqa: E402
from tests.speedup_on import OFF, all_off, speedup_on  # noqa: E402


@pytest.fixture(autouse=True)
def _speedups_off() -> Iterator[None]:
    yield from all_off()  # each test starts from torch's own code, whatever ran before it in this process


def _graph_module() -> torch.fx.GraphModule:
    class M(torch.nn.Module):
        def forward(self, x, y):  # type: ignore[no-untyped-def]  # string annotations would not pickle
            return torch.relu(x) + y

    return torch.fx.symbolic_trace(M())


def _node_source(init: object, node: torch.fx.Node, *args: object) -> NodeSource:
    ns = NodeSource.__new__(NodeSource)
    init(ns, node, *args)  # type: ignore[operator]
    return ns


def test_shared_provenance_equals_deep_copy() -> None:
    speedup = sp.named("shared-provenance")
    speedup.disable()
    original = NodeSource.__init__  # torch's constructor
    with speedup_on("shared-provenance"):
        assert NodeSource.__init__ is shared_provenance.node_source_init
        _check_shared_provenance(original)
    assert NodeSource.__init__ is original  # disable puts torch's back


def _check_shared_provenance(original: object) -> None:
    gm = _graph_module()
    a, b = list(gm.graph.nodes)[:2]
    root = _node_source(original, a, "p0", NodeSourceAction.CREATE)
    b.meta["from_node"] = [root, _node_source(original, a, "p1", [NodeSourceAction.REPLACE, NodeSourceAction.CREATE])]
    want = _node_source(original, b, "p2", NodeSourceAction.REPLACE)
    got = _node_source(shared_provenance.node_source_init, b, "p2", NodeSourceAction.REPLACE)
    assert got.to_dict() == want.to_dict() and got == want and hash(got) == hash(want)
    assert got.from_node is not b.meta["from_node"]  # a list of its own: appending to the node's does not reach it
    b.meta["from_node"].append(root)
    assert len(got.from_node) == 2
    b.meta["from_node"] = ({"not": "a NodeSource"},)  # anything else is still deep-copied
    odd = _node_source(shared_provenance.node_source_init, b, "p3")
    assert odd.from_node == b.meta["from_node"] and odd.from_node[0] is not b.meta["from_node"][0]
    with pytest.raises(AssertionError):
        _node_source(shared_provenance.node_source_init, b, "p4", "CREATE")


@pytest.fixture
def lazy() -> Iterator[Speedup]:
    with speedup_on("lazy-recompile") as speedup:
        yield speedup


def test_deferred_recompile_gives_the_same_code_and_results(lazy: object) -> None:
    x, y = torch.randn(3), torch.randn(3)
    with lazy_mod.lazy_recompile():
        gm = _graph_module()
        assert "_code" not in gm.__dict__  # nothing generated yet
        for node in gm.graph.nodes:  # relu -> sigmoid
            if node.target is torch.relu:
                node.target = torch.sigmoid
        gm.recompile()
        assert "_code" not in gm.__dict__
        assert list(inspect.signature(gm.forward).parameters) == ["x", "y"]  # the real forward, generated now
        assert "_code" in gm.__dict__ and "sigmoid" in gm.code
        torch.testing.assert_close(gm(x, y), torch.sigmoid(x) + y)

        eager = _graph_module()
        torch.testing.assert_close(type(eager).forward(eager, x, y), torch.relu(x) + y)  # read on the class

        clone = copy.deepcopy(gm)
        torch.testing.assert_close(clone(x, y), torch.sigmoid(x) + y)
        restored = pickle.loads(pickle.dumps(gm))  # pickling needs the real PythonCode: done eagerly
        torch.testing.assert_close(restored(x, y), torch.sigmoid(x) + y)
        for node in gm.graph.nodes:
            if node.target is torch.sigmoid:
                node.target = torch.tanh
        gm.recompile()
        assert gm._code.count("tanh") == 1 and "sigmoid" not in gm.code
    outside = _graph_module()
    assert "_code" in outside.__dict__  # outside the scope, torch's recompile


def test_a_graph_module_class_shared_by_instances_is_recompiled_at_once(lazy: object) -> None:
    class Shared(torch.fx.GraphModule):
        def __new__(cls, *args: object, **kwargs: object) -> Shared:  # no class of its own per instance
            return torch.nn.Module.__new__(cls)

    source = _graph_module()
    with lazy_mod.lazy_recompile():
        first, second = Shared(source, source.graph), Shared(source, copy.deepcopy(source.graph))
        assert type(first) is type(second) is Shared
        assert "_code" in first.__dict__ and "_code" in second.__dict__


def test_deferred_recompile_lowers_to_the_same_program(lazy: Speedup, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("executorch")
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(64, 5),
                                torch.nn.Softmax(dim=-1)).eval()
    ep = torch.export.export(model, (torch.randn(1, 3, 6, 6),), strict=False)

    real = lazy_mod.SPEEDUP.original
    calls = [0]

    def counted(gm: object) -> object:
        calls[0] += 1
        return real(gm)

    monkeypatch.setattr(lazy_mod.SPEEDUP, "original", counted)

    def pte(lazy_scope: bool) -> bytes:
        calls[0] = 0
        graph = copy.deepcopy(ep)
        if lazy_scope:
            with lazy_mod.lazy_recompile():
                edge = to_edge_transform_and_lower(graph, partitioner=[XnnpackPartitioner()])
                return bytes(edge.to_executorch().buffer)
        edge = to_edge_transform_and_lower(graph, partitioner=[XnnpackPartitioner()])
        return bytes(edge.to_executorch().buffer)

    lazy_pte, lazy_calls = pte(True), calls[0]
    eager_pte, eager_calls = pte(False), calls[0]
    assert lazy_pte == eager_pte
    assert lazy_calls * 3 < eager_calls, (lazy_calls, eager_calls)  # most of the code was never generated


def _pattern_passes() -> list[tuple[type, object, tuple[str, ...]]]:
    """(pass class, its pattern graphs, the ops the guard requires) for speedup 9."""
    pytest.importorskip("executorch")
    import importlib

    out = []
    for p in guard.PASSES:
        module = importlib.import_module(p.module)
        patterns = getattr(getattr(module, p.patterns), p.getter)()
        out.append((getattr(module, p.cls), list(patterns), p.ops))
    return out


def test_every_xnnpack_pattern_needs_the_ops_the_guard_requires() -> None:
    from torch.fx.passes.utils.matcher_utils import SubgraphMatcher

    for cls, patterns, ops in _pattern_passes():
        assert patterns, cls
        required = {guard.edge_op(o) for o in ops}
        for pattern in patterns:
            matcher = SubgraphMatcher(pattern.graph, ignore_literals=True)
            assert len(matcher.pattern_anchors) == 1, cls  # one anchor: no candidate for it, no match
            seen: set[torch.fx.Node] = set()
            todo = list(matcher.pattern_anchors)
            while todo:  # the anchor and its ancestors: the nodes the matcher compares by target
                node = todo.pop()
                if node not in seen:
                    seen.add(node)
                    todo.extend(node.all_input_nodes)
            targets = {n.target for n in seen if n.op == "call_function"}
            assert required <= targets, (cls.__name__, required - targets)
            assert guard.may_match(pattern, tuple(required))  # a pattern could match itself


def test_pattern_guard_lowers_to_the_same_programs(monkeypatch: pytest.MonkeyPatch) -> None:
    passes = _pattern_passes()  # builds the patterns, as the unguarded passes would
    plain_calls = {cls: cls.call for cls, _, _ in passes}
    with speedup_on("xnnpack-pattern-guard"):
        _check_pattern_guard(passes, monkeypatch)
    assert {cls: cls.call for cls, _, _ in passes} == plain_calls  # disable puts XNNPACK's passes back


def _check_pattern_guard(passes: list[tuple[type, object, tuple[str, ...]]], monkeypatch: pytest.MonkeyPatch) -> None:
    import executorch.version
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge, to_edge_transform_and_lower

    assert "xnnpack-pattern-guard" in sp.current_plan().active, executorch.version.__version__  # verified here
    assert set(guard.SPEEDUP.guarded) == {cls for cls, _, _ in passes}

    class Attention(torch.nn.Module):
        def forward(self, q, k, v, mask):  # type: ignore[no-untyped-def]
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    class Upsample(torch.nn.Module):
        def forward(self, x):  # type: ignore[no-untyped-def]
            return torch.nn.functional.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False) + 1

    from executorch.backends.xnnpack.partition.graphs import bilinear_2d, sdpa

    sdpa.get_graphs.cache_clear()  # built again, inside the guarded passes
    bilinear_2d._get_bilinear_2d_graphs.cache_clear()
    torch.manual_seed(0)
    cases = [(Attention(), (*(torch.randn(1, 2, 4, 8) for _ in range(3)), torch.zeros(4, 4))),
             (Upsample(), (torch.randn(1, 3, 4, 4),)),
             (torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU()).eval(), (torch.randn(2, 8),))]
    for model, example in cases:
        ep = torch.export.export(model, example, strict=False)
        edge_graph = to_edge(copy.deepcopy(ep)).exported_program().graph_module
        may = [guard.may_match(edge_graph, tuple(guard.edge_op(o) for o in ops)) for _, _, ops in passes]
        assert may == [isinstance(model, Attention), isinstance(model, Upsample)], (type(model).__name__, may)
        before = torch.get_rng_state()
        guarded = to_edge_transform_and_lower(copy.deepcopy(ep), partitioner=[XnnpackPartitioner()])
        # the patterns a guarded pass builds (the caches were cleared) leave the global RNG as it was
        assert torch.equal(before, torch.get_rng_state()), type(model).__name__
        with monkeypatch.context() as m:
            for cls, original in guard.SPEEDUP.guarded.items():
                m.setattr(cls, "call", original)
            plain = to_edge_transform_and_lower(copy.deepcopy(ep), partitioner=[XnnpackPartitioner()])
        assert bytes(guarded.to_executorch().buffer) == bytes(plain.to_executorch().buffer), type(model).__name__


def test_preservable_cia_order_gives_torchs_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch._export.utils as teu
    from torch.export import exported_program as epm

    sp.named("preservable-order").disable()
    original = teu._is_preservable_cia_op
    with speedup_on("preservable-order"):
        assert epm._is_preservable_cia_op is preservable_order.is_preservable_cia_op  # rebound where torch uses it
        _check_preservable_order(original, monkeypatch)
    assert epm._is_preservable_cia_op is teu._is_preservable_cia_op is original  # disable rebinds torch's


def _check_preservable_order(original: object, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch._export.utils as teu
    from torch.export import exported_program as epm

    lib = torch.library.Library("bti_speedup_test", "FRAGMENT")  # a custom op with a composite-implicit kernel
    lib.define("twice(Tensor x) -> Tensor")
    lib.impl("twice", lambda x: x * 2, "CompositeImplicitAutograd")
    custom = torch.ops.bti_speedup_test.twice.default
    table = dict(torch.export.default_decompositions().materialize())
    table[custom] = lambda x: x + x
    ops = [*table, *teu._collect_all_valid_cia_ops(), torch.ops.aten.add_.Tensor, torch.ops.aten.view.default,
           torch.ops.aten.linear.default]
    answers = [preservable_order.is_preservable_cia_op(op) for op in ops]
    assert answers == [original(op) for op in ops]  # type: ignore[operator]
    assert any(answers) and not all(answers) and preservable_order.is_preservable_cia_op(custom)

    def split() -> tuple[list[object], list[object], list[object]]:
        cia, rest = epm._split_decomp_table_to_cia_and_python_decomp(dict(table))
        return list(cia), list(cia.values()), list(rest)

    fast = split()
    with monkeypatch.context() as m:  # undone inside the speedup's block, not after its disable
        m.setattr(epm, "_is_preservable_cia_op", original)
        assert split() == fast  # the same ops, callables and order


def test_philox_template_is_torchs_reset_outside_rng_functionalization(monkeypatch: pytest.MonkeyPatch) -> None:
    from torch._decomp.decompositions_for_rng import PhiloxState

    sp.named("philox-template").disable()
    original = PhiloxState.reset
    with speedup_on("philox-template"):
        assert PhiloxState.reset is not original
        _check_philox_template(original, monkeypatch)
    assert PhiloxState.reset is original  # disable puts torch's back


def _check_philox_template(original: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from torch._decomp.decompositions_for_rng import PhiloxState
    from torch._functorch import config
    from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode

    def state() -> PhiloxState:
        with FakeTensorMode():  # as AOT tracing resets it
            return PhiloxState()

    ours, theirs = state(), PhiloxState.__new__(PhiloxState)
    with FakeTensorMode():
        original(theirs)  # type: ignore[operator]
    assert vars(ours).keys() == vars(theirs).keys()
    for name, value in vars(theirs).items():
        mine = vars(ours)[name]
        if isinstance(value, torch.Tensor):
            assert (mine.shape, mine.dtype, mine.numel()) == (value.shape, value.dtype, 0) and not isinstance(mine, FakeTensor)
        else:
            assert mine == value, name
    with config.patch(functionalize_rng_ops=True):  # torch's own patching (monkeypatch's undo would hide the option)
        assert isinstance(state().seed, FakeTensor)  # rng functionalization reads them: torch's own reset

    class Noisy(torch.nn.Module):
        def forward(self, x):  # type: ignore[no-untyped-def]
            return torch.nn.functional.dropout(x, 0.5, training=True) + torch.rand_like(x)

    assert not config.functionalize_rng_ops
    ep = torch.export.export(Noisy(), (torch.randn(3, 4),), strict=False)
    fast = ep.run_decompositions().graph_module.code
    with monkeypatch.context() as m:  # undone inside the speedup's block, not after its disable
        m.setattr(PhiloxState, "reset", original)
        assert ep.run_decompositions().graph_module.code == fast


def test_patterns_are_prebuilt_for_model_runs() -> None:
    _pattern_passes()
    with speedup_on("xnnpack-pattern-guard"):
        _check_prebuilt()


def _check_prebuilt() -> None:
    assert guard.SPEEDUP.guarded  # XNNPACK's passes are imported: the guard is installed
    from executorch.backends.xnnpack.partition.graphs import bilinear_2d, sdpa

    sdpa.get_graphs.cache_clear()
    bilinear_2d._get_bilinear_2d_graphs.cache_clear()
    before = torch.get_rng_state()
    sp.prebuild_xnnpack_patterns()
    assert sdpa.get_graphs.cache_info().currsize == 1 and bilinear_2d._get_bilinear_2d_graphs.cache_info().currsize == 1
    assert torch.equal(before, torch.get_rng_state())


def test_disable_puts_back_what_enable_replaced() -> None:
    """Every speedup, enabled with everything it patches imported, then disabled: torch's, executorch's and torchao's
    own objects are back; enabled again, each patch is in place again."""
    pytest.importorskip("torchao.quantization.pt2e.observer")
    import torchao.quantization.pt2e.utils  # noqa: F401  (speedup 5 patches it only once imported)

    _pattern_passes()  # imports XNNPACK's passes (speedup 9)
    before = {s.name: s.installed for s in sp.SPEEDUPS}
    if not sp.enable_all():
        pytest.skip(OFF)
    try:
        originals = [(s.name, owner, attr, was) for s in sp.SPEEDUPS for owner, attr, was in s.patched]
        places = [(name, owner, attr) for name, owner, attr, _ in originals]
        assert {name for name, _, _ in places} == {s.name for s in sp.SPEEDUPS if s.allowed} - {"gc-policy"}
        assert all(getattr(owner, attr) is not was for _, owner, attr, was in originals)  # each patch is in place
        sp.disable_all()
        assert not any(s.installed for s in sp.SPEEDUPS)
        theirs = [getattr(owner, attr) for _, owner, attr in places]
        back = [name for (name, owner, attr, was), now in zip(originals, theirs, strict=True)
                if now is not was and not (isinstance(now, type(was)) and now == was)]
        assert not back, back  # what each patch replaced is there again
        sp.enable_all()
        again = [getattr(owner, attr) for _, owner, attr in places]
        assert all(a is not b for a, b in zip(again, theirs, strict=True))
        sp.disable_all()
        assert [getattr(owner, attr) for _, owner, attr in places] == theirs
    finally:
        for s in sp.SPEEDUPS:
            if before[s.name] and s.by_enable_all:
                s.enable()


def _lowered(ep: object, skip: bool, partitioner: bool = True) -> tuple[bytes, int, int]:
    """``ep`` lowered (to XNNPACK, or with no partitioner), with speedup 12 on or off: the program's bytes and the
    calls it skipped and ran."""
    import executorch.exir.program._program as program_mod
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower
    from torch.export import ExportedProgram

    torchs, executorchs = ExportedProgram.run_decompositions, program_mod._gen_edge_manager_for_partitioners

    def lower() -> bytes:
        edge = to_edge_transform_and_lower(copy.deepcopy(ep), partitioner=[XnnpackPartitioner()] if partitioner else None)  # type: ignore[arg-type]
        assert ExportedProgram.run_decompositions is torchs  # the guard is in place only while the edge program is made
        return bytes(edge.to_executorch().buffer)

    if not skip:
        return lower(), 0, 0
    with speedup_on("decomposition-skip") as s:
        assert program_mod._gen_edge_manager_for_partitioners is not executorchs
        out = lower(), s.skipped, s.ran  # type: ignore[attr-defined]
    assert (ExportedProgram.run_decompositions, program_mod._gen_edge_manager_for_partitioners) == (torchs, executorchs)
    return out


def test_decomposition_skip_lowers_to_the_same_programs() -> None:
    pytest.importorskip("executorch")

    class ConvLinear(torch.nn.Module):
        def __init__(self, conv: bool) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3) if conv else None
            self.linear = torch.nn.Linear(16 if conv else 12, 5)

        def forward(self, x):  # type: ignore[no-untyped-def]
            if self.conv is None:
                return torch.relu(self.linear(x))
            x = torch.relu(self.conv(x)).flatten(2)
            return torch.nn.functional.glu(self.linear(x).repeat(1, 1, 2), -1)

    torch.manual_seed(0)
    # (conv, partitioner, calls skipped): XNNPACK: linear and relu miss both tables (XNNPACK preserves linear), and
    # conv2d and glu are decomposed by the first (XNNPACK preserves neither), so only the last call is skipped; no
    # partitioner: the default table decomposes linear (one call after the functionalizing one), or nothing is left
    # to skip
    for conv, partitioner, skipped, calls in ((False, True, 2, 3), (True, True, 1, 3), (True, False, 0, 2)):
        shape = (1, 3, 6, 6) if conv else (1, 3, 12)
        ep = torch.export.export(ConvLinear(conv).eval(), (torch.randn(shape),), strict=False)
        plain, _, _ = _lowered(ep, False, partitioner)
        fast, n_skipped, n_ran = _lowered(ep, True, partitioner)
        assert fast == plain, (conv, partitioner)
        assert (n_skipped, n_ran) == (skipped, calls - skipped), (conv, partitioner, n_skipped, n_ran)


def test_decomposition_skip_sees_the_ops_of_control_flow_branches() -> None:
    class Branches(torch.nn.Module):
        def forward(self, x):  # type: ignore[no-untyped-def]
            return torch.cond(x.sum() > 0, lambda y: torch.nn.functional.hardswish(y), lambda y: y - 1, (x,))

    gm = torch.export.export(Branches(), (torch.randn(4),), strict=False).graph_module
    top = {n.target for n in gm.graph.nodes if n.op == "call_function"}
    hardswish = torch.ops.aten.hardswish.default
    assert hardswish not in top  # only in the true branch's subgraph
    blocking = decomposition_skip.blocks_skip(gm, {hardswish: None})
    assert blocking is not None and blocking.target is hardswish
    assert decomposition_skip.blocks_skip(gm, {torch.ops.aten.hardsigmoid.default: None}) is None


def test_decomposition_skip_retraces_a_graph_with_an_in_place_op() -> None:
    """A graph edited in place after it was functionalized (a partitioner's hook could) is not skipped: the retrace
    would functionalize it again."""
    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(graph.call_function(torch.ops.aten.relu_.default, (graph.call_function(torch.ops.aten.neg.default, (x,)),)))
    gm = torch.fx.GraphModule(torch.nn.Module(), graph)
    table = {torch.ops.aten.hardsigmoid.default: None}  # no op of the graph: only relu_'s schema blocks the skip
    blocking = decomposition_skip.blocks_skip(gm, table)
    assert blocking is not None and blocking.target is torch.ops.aten.relu_.default
    gm.graph.find_nodes(op="call_function", target=torch.ops.aten.relu_.default)[0].target = torch.ops.aten.relu.default
    assert decomposition_skip.blocks_skip(gm, table) is None


def test_decomposition_skip_only_for_the_partitioners_it_was_verified_with() -> None:
    pytest.importorskip("executorch")
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

    class XnnpackLookalike(XnnpackPartitioner):  # a vendor's subclass is not the verified type
        pass

    assert decomposition_skip.verified_partitioners(None)  # no partitioner: the portable path
    assert decomposition_skip.verified_partitioners({"forward": []})
    assert decomposition_skip.verified_partitioners({"forward": [XnnpackPartitioner()]})
    assert not decomposition_skip.verified_partitioners({"forward": [XnnpackPartitioner(), XnnpackLookalike()]})
