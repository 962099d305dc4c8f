"""Guarded memoizations of pure recomputation inside torch.export (``--no-speedups`` turns them off).

1. The composite-implicit (CIA) op table.

``torch.export``'s ``run_decompositions`` rebuilds the table of composite-implicit ops
(``torch._export.utils._collect_all_valid_cia_ops``) on every call — three times per
``to_edge_transform_and_lower`` — which is most of the cost of lowering a tiny graph. The result
depends only on which operators have a composite-implicit kernel, so it is cached and keyed by the
number of CompositeImplicitAutograd registrations in the dispatcher (0.3 ms to read, where the list
of every operator name took 1.5 ms): registering a new CIA kernel invalidates it. ``benchmarks/verify_speedups.py``
checks that every starter-suite item yields identical ``.pte`` bytes and outputs with and without
it. Turn it off with ``--no-speedups`` or ``BTI_NO_SPEEDUPS=1``.

Every speedup but 3 rests on facts about torch's, executorch's or torchao's code, so each declares the stacks on
which its identity was verified (``SPEEDUPS``) and stays off on any other (``plan``): the run says so once, the
results header records the plan (``speedups``), and the result cache's key includes it. ``--force-speedups``
turns the unverified ones on anyway (the header says ``forced``).

2. ``typing`` work in ``torch._ops``. ``run_decompositions`` wraps every CIA op in
``_override_composite_implicit_decomp``, which calls ``OpOverload.py_impl`` about 12,000 times;
each call defines an inner function whose annotations (``Callable[_P, _T]``) are evaluated, and
``collections.abc.Callable[...]`` builds a fresh generic alias every time (unlike ``typing``, it
has no cache). That was 40% of a small XNNPACK lowering. bti rebinds the name ``Callable`` in
``torch._ops`` only, to a stand-in whose subscriptions are memoized and whose ``isinstance`` /
``issubclass`` checks delegate to ``collections.abc.Callable``. Annotations are all it is used
for there besides one ``isinstance`` check, so behaviour is unchanged; the same benchmark verifies it.

3. Garbage-collector scheduling (not a memoization: nothing is computed differently). With torch,
executorch and their dependencies imported, the heap holds millions of objects, and lowering
allocates enough containers (closures, partials, FX nodes) to set off full collections that walk
all of them: measured on a tiny graph, GC was ~45% of an XNNPACK lowering (0.46 s → 0.25 s per item
with lowering, ``to_executorch`` and one collection; portable 0.25 s → 0.11 s). So the parent
runs without automatic collection (``parent_gc``: it imports, warms up and relays records), freezes
its heap (``gc.freeze``) just before forking workers (which also keeps copy-on-write pages shared),
and a worker runs each group with automatic collection off, then collects once and freezes what
survived. Garbage cycles are still collected, once per group; anything a group leaves
reachable is frozen, which worker recycling (``--max-items`` / ``--max-growth-mb``) bounds.

The parent also lowers a tiny model once per recipe before it forks (``harness.stages.warm_up``),
so the lazily built state is built once rather than in every new worker; torch runs with one thread
there, so no OpenMP pool exists when the parent forks.

4. ``_override_composite_implicit_decomp`` itself, entered two or three times per lowering: for each
of ~560 CIA ops it goes through ``OpOverload.py_impl`` 22 times (each call builds a closure, checks
the key's kind and clears the op's dispatch cache): 24 ms per entry with GC out of the way. bti
swaps in a version with the same effect: the same ``py_kernels`` entries, built in torch's order by
the same torch helpers (``autograd_not_implemented``, ``_get_decomp_for_cia``), the same
fake-tensor registration and the same restore on exit. It computes each op's patched table once
per (op, decomp callable) — ``_callable_key`` recognises the equivalent ``functools.partial``
objects torch rebuilds on every call — and reuses it while the op's kernels before entry are unchanged (checked
on every entry), so an entry is a dictionary copy and update per op: about 1 ms instead of 24 ms.
The reused entries are stateless wrappers (a closure over the op, a ``functools.partial``).

5. pt2e pattern graphs. The XNNPACK quantizer's conv+batch-norm annotators
(``_do_annotate_conv_bn``, four of them) build their match patterns on every ``prepare_pt2e`` with
``torchao...utils._get_aten_graph_module_for_pattern``: a strict (dynamo) ``torch.export`` of a
fixed closure, twelve per call, whatever the model: ~1.6 s of a ~1.7 s quantize stage. The graph
depends only on the pattern's code and closure (conv function, relu flags), the example inputs'
tensor metadata (random values, never read by the graph) and ``is_cuda``; bti keys on exactly those
(anything unhashable, a module with parameters or buffers, or a non-tensor input it cannot hash
disables the memo for that call) and hands out a ``copy.deepcopy`` of the first graph, since the
matcher rewrites the pattern's output node. The caller still draws its example inputs from the
global RNG, so RNG state after prepare is unchanged.

6. torchao's ``HistogramObserver._non_linear_param_search`` (``convert_pt2e``, once per activation
observer) walks its quantile bounds in steps of 1e-5, up to 100,000 iterations, each comparing 0-dim
tensors (``cSum[l] < next_alpha * total``): ~50 ms per observer, up to 0.5 s for an ``add`` with
small inputs. bti runs the same loop on the cumulative sums as Python floats. torch compares a
float32 tensor with a Python float in float32 (the scalar is rounded to float32 first), so each bound is
rounded to float32 (``numpy.float32``) before the comparison: the same booleans, the same bins, the
same calls to ``_compute_quantization_error`` and the same result. Only float32 CPU histograms take
this path; anything else runs torchao's method.

7. Provenance. Every node a pass creates records where it came from: ``torch.fx.traceback.NodeSource``,
whose constructor deep-copies the source node's whole ancestry (``copy.deepcopy(node.meta["from_node"])``).
The chains grow with every pass, so lowering spent ~15% of its time copying them. bti's constructor
shares the ancestors in a list of its own instead. Nothing changes a NodeSource once it is built (torch
and executorch only read ``from_node``, walking it for debug handles; its two caches are functions of its
contents), so the shared ancestry equals the copy: the same ``to_dict()``, ``==`` and hash.

8. ``GraphModule.recompile``. Lowering calls it after nearly every pass (~250 times per int8 item; each
generates the Python source of the graph and compiles it), yet reads the code of few of those graphs.
Inside ``lazy_recompile()`` (bti's ExecuTorch ``lower`` and ``serialize``) it does the cheap part at once
(pytree specs, the wrapped ``__call__``, submodules) and leaves the source to the first read of
``forward``, ``code`` or the attributes recompile sets: the same design as torch's own ``_LazyGraphModule``,
applied to every GraphModule. The code is generated from the graph as it is when first read, which is
what an eager recompile after the last change would have produced. Pickling starts from a real
recompile. Outside the scope torch's method runs unchanged.

9. XNNPACK's SDPA and bilinear-upsampling pattern graphs. Two of XNNPACK's preprocess passes
(``ConvertToSDPAPass``, ``ConvertToUpsampleBilinear2d``) match every delegated graph against pattern
graphs that are built, on first use in a process, by strict (dynamo) exports of an attention and an
interpolation module: 2.2 s, which the parent's warm-up paid on every run before it forked. Each
pattern has one anchor, and the matcher compares the anchor and its ancestors by target, so a graph
that lacks one of their ops (``_softmax`` or ``bmm`` for SDPA, ``upsample_bilinear2d.vec`` for
upsampling) matches nothing. On such a graph bti runs the pass with an empty pattern list: it does
what it does on finding no match, and the patterns are never built. Otherwise the pass runs as
usual, and builds the patterns the first time with the global RNG restored afterwards (they draw
their example inputs from it). Like every speedup, installed only on the stacks it was verified on (``SPEEDUPS``);
``tests/test_speedups_graph.py`` checks its patterns on the installed one. When a run has model items (any kind but
single-operator ones), the parent still builds them before it forks (``prebuild_xnnpack_patterns``), so
workers do not each build them inside an item.

10. The order of two tests. ``run_decompositions`` splits its decomposition table into composite-implicit
ops and the rest, asking ``_is_preservable_cia_op`` of every op of the table that is not in the (cached,
speedup 1) set of preservable CIA ops: ~430 of the ~985 in executorch's default table, 5 ms per table.
torch's function is ``_check_valid_to_preserve(op) and _is_cia_op(op)``; both are side-effect-free
predicates, and the second, a dispatcher lookup, is false for all of those ops. bti asks it first.

11. AOT tracing's rng-state placeholders. Each ``run_decompositions`` trace resets six ``PhiloxState``
objects (torch's ``PhiloxStateTracker`` holds three, reset on entry and exit), and each reset makes two empty placeholder tensors, which under the
fake mode cost ~0.8 ms per reset (~14 ms per int8 lowering). They are read only with
``torch._functorch.config.functionalize_rng_ops`` on (torch's rng functionalization); otherwise bti's
reset gives the state the values of a template made once (the same attributes; the two placeholders are
real empty tensors instead of fake ones). With the option on, torch's reset runs.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import sys
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

_ORIGINAL: Any = None


# -- which speedups run: each declares the stacks on which its identity was verified -------------------

# The stacks (torch, executorch, torchao releases) on which ``benchmarks/verify_speedups.py`` gave identical
# programs and outputs with and without the speedups (fp32: ops + models on portable and xnnpack; int8: the
# three XNNPACK int8 recipes), and the mechanism tests in tests/test_speedups_*.py passed.
STACK_1_4 = {"torch": "2.13.0", "executorch": "1.4.1", "torchao": "0.18.0"}
STACK_1_5 = {"torch": "2.14.1", "executorch": "1.5.1", "torchao": "0.18.0"}
ANY_STACK = None  # not a memoization of torch's code (speedup 3 only schedules the garbage collector)


@dataclass(frozen=True)
class Speedup:
    number: int
    name: str
    verified_on: tuple[dict[str, str], ...] | None  # ANY_STACK: valid whatever the versions

    def verified(self, versions: Mapping[str, str | None]) -> bool:
        if self.verified_on is None:
            return True
        return any(all(_release(versions.get(k)) == v for k, v in stack.items()) for stack in self.verified_on)


SPEEDUPS = (
    Speedup(1, "cia-cache", (STACK_1_4, STACK_1_5)),
    Speedup(2, "typing-cache", (STACK_1_4, STACK_1_5)),
    Speedup(3, "gc-policy", ANY_STACK),
    Speedup(4, "fast-override", (STACK_1_4, STACK_1_5)),
    Speedup(5, "pattern-cache", (STACK_1_4, STACK_1_5)),
    Speedup(6, "histogram-search", (STACK_1_4, STACK_1_5)),
    Speedup(7, "shared-provenance", (STACK_1_4, STACK_1_5)),
    Speedup(8, "lazy-recompile", (STACK_1_4, STACK_1_5)),
    Speedup(9, "xnnpack-pattern-guard", (STACK_1_4, STACK_1_5)),
    Speedup(10, "preservable-order", (STACK_1_4, STACK_1_5)),
    Speedup(11, "philox-template", (STACK_1_4, STACK_1_5)),
)


def _release(version: str | None) -> str | None:
    """``2.14.1+cu130`` -> ``2.14.1``: a local build label names the same release."""
    return version.split("+", 1)[0] if version else None


@dataclass(frozen=True)
class Plan:
    """Which speedups this process runs: ``active`` names, and each inactive one's reason (the header's ``speedups``)."""

    active: tuple[str, ...]
    off: dict[str, str]
    forced: bool = False

    def header(self) -> dict[str, Any]:
        return {"active": list(self.active), "off": dict(self.off), "forced": self.forced}

    def notice(self) -> str | None:
        """The one line a run prints when speedups are off for want of verification (None otherwise)."""
        unverified = [n for n, why in self.off.items() if why.startswith("not verified")]
        if not unverified:
            return None
        return (f"speedups {', '.join(unverified)} are off: {self.off[unverified[0]]} "
                "(--force-speedups turns them on)")


def plan(enabled: bool | None = None, force: bool | None = None, versions: Mapping[str, str | None] | None = None) -> Plan:
    """The speedups to run on ``versions`` (default: the installed torch, executorch and torchao, from metadata);
    ``enabled`` and ``force`` default to the settings' (``--no-speedups``, ``--force-speedups``)."""
    from harness.settings import current

    enabled = current().speedups if enabled is None else enabled
    force = current().force_speedups if force is None else force
    if versions is None:
        from harness.versions import stack_versions

        versions = stack_versions()
    if not enabled:
        return Plan((), {s.name: "--no-speedups" for s in SPEEDUPS})
    have = " + ".join(f"{k} {versions.get(k) or 'not installed'}" for k in ("torch", "executorch", "torchao"))
    active, off = [], {}
    for s in SPEEDUPS:
        if s.verified(versions) or force:
            active.append(s.name)
        else:
            stacks = "; ".join(" + ".join(f"{k} {v}" for k, v in st.items()) for st in s.verified_on or ())
            off[s.name] = f"not verified on {have} (verified on {stacks})"
    return Plan(tuple(active), off, force and any(not s.verified(versions) for s in SPEEDUPS))


_PLAN: Plan | None = None


def configure(p: Plan) -> None:
    """Set the speedups this process may enable (``bti run`` does, before it enables any)."""
    global _PLAN
    _PLAN = p


def current_plan() -> Plan:
    global _PLAN
    if _PLAN is None:
        _PLAN = plan()
    return _PLAN


def _disabled(name: str = "") -> bool:
    """Whether speedup ``name`` stays off here: ``--no-speedups`` / ``BTI_NO_SPEEDUPS=1``, or not verified on the
    installed stack (and not forced). With no name: whether every speedup is off."""
    p = current_plan()
    return name not in p.active if name else not p.active


class _CachedCallableMeta(type):
    _memo: dict[Any, Any] = {}

    def __getitem__(cls, params: Any) -> Any:
        import collections.abc

        key = params
        if isinstance(params, tuple) and len(params) == 2 and isinstance(params[0], list):
            key = ("args", tuple(params[0]), params[1])  # Callable[[A, B], R]: the list is unhashable
        try:
            return cls._memo[key]
        except KeyError:
            alias = cls._memo[key] = collections.abc.Callable[params]
            return alias
        except TypeError:  # unhashable parameters: no memo
            return collections.abc.Callable[params]

    def __instancecheck__(cls, obj: Any) -> bool:
        return callable(obj)

    def __subclasscheck__(cls, sub: Any) -> bool:
        import collections.abc

        return issubclass(sub, collections.abc.Callable)  # type: ignore[arg-type]  # the ABC, not typing's form


class CachedCallable(metaclass=_CachedCallableMeta):
    """Stands in for ``collections.abc.Callable`` inside ``torch._ops`` (see the module docstring)."""


_PATCHED: dict[tuple[str, str], Any] = {}  # (module, attribute) -> the original object


def _rebind(name: str, module_name: str, attr: str, replacement: Any) -> bool:
    """Rebind ``module.attr`` to ``replacement`` once, keeping the original; False when speedup ``name`` is off."""
    if _disabled(name):
        return False
    import importlib

    module = importlib.import_module(module_name)
    if (module_name, attr) not in _PATCHED:
        _PATCHED[(module_name, attr)] = getattr(module, attr)
        setattr(module, attr, replacement)
    return True


def _rebind_everywhere(name: str, original: Any, replacement: Any) -> None:
    """Point every loaded module's ``name`` that is ``original`` at ``replacement`` (torch imports its helpers
    by name into the modules that use them)."""
    for mod in list(sys.modules.values()):
        if mod is not None and getattr(mod, name, None) is original:
            setattr(mod, name, replacement)


def enable_typing_cache() -> bool:
    """Speedup 2 (module docstring)."""
    return _rebind("typing-cache", "torch._ops", "Callable", CachedCallable)


def enable_all() -> list[str]:
    """Speedups 1, 2 and 4 to 11 that the plan allows (3 is ``enable_gc_policy``, called just before workers fork);
    returns the names enabled."""
    enablers = {"cia-cache": enable_cia_cache, "typing-cache": enable_typing_cache, "fast-override": enable_fast_override,
                "pattern-cache": enable_pattern_cache, "histogram-search": enable_histogram_search,
                "shared-provenance": enable_shared_provenance, "lazy-recompile": enable_lazy_recompile,
                "xnnpack-pattern-guard": enable_xnnpack_pattern_guard, "preservable-order": enable_preservable_order,
                "philox-template": enable_philox_template}
    return [name for name, enable in enablers.items() if enable()]


_PATTERNS: dict[Any, Any] = {}
_PATTERN_ORIGINAL: Any = None


def _stable(value: Any) -> bool:
    """A closure value whose identity or value fixes its behaviour: a scalar, a builtin or torch op,
    or a plain function without state of its own (defaults, closure)."""
    import types

    import torch

    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, (types.BuiltinFunctionType, torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        return True
    return (isinstance(value, types.FunctionType) and not value.__closure__ and not value.__defaults__
            and not value.__kwdefaults__)


def _pattern_key(pattern: Any, example_inputs: Any, is_cuda: bool, kwargs: dict[str, Any]) -> Any:
    """What a pattern graph depends on (speedup 5), or None when that cannot be told safely."""
    import types

    import torch

    fn = pattern
    mod_type = None
    if isinstance(pattern, torch.nn.Module):  # only torchao's stateless WrapperModule(fn)
        from torchao.quantization.pt2e.export_utils import WrapperModule

        if (type(pattern) is not WrapperModule or pattern._modules or pattern._parameters or pattern._buffers
                or pattern._forward_hooks or pattern._forward_pre_hooks or not pattern.training):
            return None
        mod_type = WrapperModule
        fn = pattern.fn
    if not isinstance(fn, types.FunctionType) or fn.__defaults__ or fn.__kwdefaults__:
        return None
    try:
        cells = tuple(c.cell_contents for c in fn.__closure__ or ())
    except ValueError:  # an empty cell
        return None
    if not all(_stable(c) for c in cells):
        return None
    inputs: list[Any] = []
    for x in example_inputs:
        if isinstance(x, torch.Tensor):
            if type(x) is not torch.Tensor:
                return None
            inputs.append(("T", tuple(x.shape), tuple(x.stride()), x.dtype, x.device, x.requires_grad))
        elif x is None or isinstance(x, (bool, int, float, str)):
            inputs.append((type(x), x))
        else:
            return None
    key = (mod_type, fn.__code__, id(fn.__globals__), cells, tuple(inputs), bool(is_cuda), tuple(sorted(kwargs.items())))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _cached_pattern_graph(pattern: Any, example_inputs: Any, is_cuda: bool = False, **kwargs: Any) -> Any:
    """Speedup 5: ``_get_aten_graph_module_for_pattern`` once per pattern, a deep copy each call."""
    key = _pattern_key(pattern, example_inputs, is_cuda, kwargs)
    if key is None:
        return _PATTERN_ORIGINAL(pattern, example_inputs, is_cuda, **kwargs)
    gm = _PATTERNS.get(key)
    if gm is None:
        if len(_PATTERNS) > 1000:
            _PATTERNS.clear()
        gm = _PATTERNS[key] = _PATTERN_ORIGINAL(pattern, example_inputs, is_cuda, **kwargs)
    return copy.deepcopy(gm)


_HIST_ORIGINAL: Any = None


def _fast_non_linear_param_search(self: Any) -> Any:
    """Speedup 6: torchao's ``HistogramObserver._non_linear_param_search`` with the bin scan on
    Python floats (float32-rounded bounds, as torch compares); everything else is torchao's code."""
    import numpy as np
    import torch

    if self.histogram.dtype != torch.float32 or self.histogram.device.type != "cpu":
        return _HIST_ORIGINAL(self)
    assert self.histogram.size()[0] == self.bins, "bins mismatch"
    bin_width = (self.max_val - self.min_val) / self.bins

    # cumulative sum
    total = torch.sum(self.histogram).item()
    cSum = torch.cumsum(self.histogram, dim=0)
    csum = cSum.tolist()  # exact: float32 values as Python floats
    f32 = np.float32

    stepsize, alpha, beta = 1e-5, 0.0, 1.0  # granularity, lower bound, upper bound
    start_bin, end_bin, norm_min = 0, self.bins - 1, float("inf")

    with np.errstate(over="ignore", invalid="ignore"):
        while alpha < beta:
            # Find the next step
            next_alpha = alpha + stepsize
            next_beta = beta - stepsize

            # find the left and right bins between the quantile bounds
            lo = float(f32(next_alpha * total))  # torch rounds the scalar to the tensor's float32
            hi = float(f32(next_beta * total))
            l, r = _quantile_bins(csum, lo, hi, start_bin, end_bin)  # noqa: E741

            # decide the next move
            next_start_bin = start_bin
            next_end_bin = end_bin
            if (l - start_bin) > (end_bin - r):
                # move the start bin
                next_start_bin = l
                alpha = next_alpha
            else:
                # move the end bin
                next_end_bin = r
                beta = next_beta

            if next_start_bin == start_bin and next_end_bin == end_bin:
                continue

            # calculate the quantization error using next_start_bin and next_end_bin
            norm = self._compute_quantization_error(next_start_bin, next_end_bin)

            if norm > norm_min:
                break
            norm_min = norm
            start_bin = next_start_bin
            end_bin = next_end_bin

    new_min = self.min_val + bin_width * start_bin
    new_max = self.min_val + bin_width * (end_bin + 1)
    return new_min, new_max


def _quantile_bins(csum: list[float], lo: float, hi: float, start_bin: int, end_bin: int) -> tuple[int, int]:
    """torchao's scan for the left and right bins between the quantile bounds ``lo`` and ``hi``."""
    left, right = start_bin, end_bin
    while left < end_bin and csum[left] < lo:
        left = left + 1
    while right > start_bin and csum[right] > hi:
        right = right - 1
    return left, right


def enable_histogram_search() -> bool:
    """Speedup 6 (module docstring): only when torchao's pt2e observers are already imported."""
    global _HIST_ORIGINAL
    if _disabled("histogram-search"):
        return False
    observer = sys.modules.get("torchao.quantization.pt2e.observer")
    if observer is None or _HIST_ORIGINAL is not None:
        return True
    _HIST_ORIGINAL = observer.HistogramObserver._non_linear_param_search
    observer.HistogramObserver._non_linear_param_search = _fast_non_linear_param_search
    return True


def enable_pattern_cache() -> bool:
    """Speedup 5 (module docstring): only when torchao's pt2e utils are already imported (a quantizing
    recipe's ``warm``); modules that import the function later get the cached one."""
    global _PATTERN_ORIGINAL
    if _disabled("pattern-cache"):
        return False
    utils = sys.modules.get("torchao.quantization.pt2e.utils")
    if utils is None or _PATTERN_ORIGINAL is not None:
        return True
    original = utils._get_aten_graph_module_for_pattern
    _PATTERN_ORIGINAL = original
    _rebind_everywhere("_get_aten_graph_module_for_pattern", original, _cached_pattern_graph)
    return True


def _force_dispatch_to_orig_cia_callable(fake_tensor_mode: Any, op: Any, *args: Any, **kwargs: Any) -> Any:
    # The body of the closure of this name in torch.export.exported_program._override_composite_implicit_decomp.
    orig_cia_callable = kwargs["original_callable"]
    del kwargs["original_callable"]
    with fake_tensor_mode:
        return orig_cia_callable(*args, **kwargs)


# (op, decomp callable) -> (the op's py_kernels before, its py_kernels while overridden, its fake impl)
_PATCHES: dict[tuple[Any, Any], tuple[dict[Any, Any], dict[Any, Any], Any]] = {}


def _callable_key(fn: Any) -> Any:
    """Identify a decomposition callable by what it does. torch builds a fresh
    ``functools.partial(<fresh closure-free local function>, kernel=op)`` for many ops on every
    ``run_decompositions`` (``_get_decomp_for_cia``); two of those with the same code object, no
    closure, no defaults and equal arguments behave identically."""
    import functools
    import types

    if not isinstance(fn, functools.partial):
        return fn
    func: Any = fn.func
    if isinstance(func, types.FunctionType) and func.__closure__ is None and not func.__defaults__ and not func.__kwdefaults__:
        func = ("code", func.__code__, func.__globals__.get("__name__"))
    key = ("partial", func, fn.args, tuple(sorted(fn.keywords.items())))
    try:
        hash(key)
    except TypeError:
        return fn
    return key


def _patch_plan(op: Any, decomp_callable: Any, saved: dict[Any, Any]) -> tuple[dict[Any, Any], dict[Any, Any], Any]:
    """What torch's ``_override_composite_implicit_decomp`` makes of one op, in torch's own order and
    with torch's own helpers, computed on a copy: (saved, patched py_kernels, fake-tensor impl)."""
    import functools

    import torch
    import torch.export.exported_program as epm
    from torch._export.utils import _get_decomp_for_cia
    from torch._higher_order_ops.utils import autograd_not_implemented

    cia_key = torch._C.DispatchKey.CompositeImplicitAutograd
    kernels = dict(saved)
    for key in epm._AUTOGRAD_ALIAS_BACKEND_KEYS_TO_OVERRIDE:
        if key not in kernels:
            kernels[key] = autograd_not_implemented(op, deferred_error=True)
    orig_cia_callable = _get_decomp_for_cia(op)  # reads op.py_kernels, which still equal `saved`
    kernels.pop(cia_key, None)
    kernels[cia_key] = decomp_callable
    fake_impl = functools.partial(_force_dispatch_to_orig_cia_callable, original_callable=orig_cia_callable)
    for key in epm._BACKEND_KEYS_TO_OVERRIDE:
        if key not in kernels:
            kernels[key] = orig_cia_callable
    return saved, kernels, fake_impl


@contextlib.contextmanager
def _fast_override_composite_implicit_decomp(cia_ops_to_callable: dict[Any, Any]) -> Iterator[None]:
    """Speedup 4: torch's ``_override_composite_implicit_decomp`` from remembered per-op plans."""
    from torch._subclasses import fake_impls

    fake_table = fake_impls.op_implementations_dict
    saved_tables = {}
    for op, decomp_callable in cia_ops_to_callable.items():
        kernels = op.py_kernels
        saved = saved_tables[op] = kernels.copy()
        key = (op, _callable_key(decomp_callable))
        plan = _PATCHES.get(key)
        if plan is None or plan[0] != saved:  # first use, or the op's kernels changed since: recompute
            if len(_PATCHES) > 50_000:
                _PATCHES.clear()
            plan = _PATCHES[key] = _patch_plan(op, decomp_callable, saved)
        kernels.clear()
        kernels.update(plan[1])
        if op not in fake_table:
            fake_table[op] = plan[2]
        op._dispatch_cache.clear()
    try:
        yield
    finally:
        for op, saved in saved_tables.items():
            op.py_kernels.clear()
            op.py_kernels.update(saved)
            op._dispatch_cache.clear()
            fake_impls._deregister_op_impl(op)


def enable_fast_override() -> bool:
    """Speedup 4 (module docstring)."""
    return _rebind("fast-override", "torch.export.exported_program", "_override_composite_implicit_decomp",
                   _fast_override_composite_implicit_decomp)


_GC_POLICY = False


def enable_gc_policy() -> bool:
    """Speedup 3: freeze this (warm, not yet forked) process's heap; workers then use ``group_gc``."""
    global _GC_POLICY
    if _disabled("gc-policy"):
        return False
    gc.freeze()
    _GC_POLICY = True
    return True


@contextlib.contextmanager
def parent_gc(enabled: bool) -> Iterator[None]:
    """Speedup 3, parent side: no automatic collection while ``bti run`` imports torch and
    executorch and warms up (the growing heap set off full collections: 1.1 s of a 4.6 s import),
    nor while it only relays records; the previous state is restored on exit."""
    if not enabled or _disabled("gc-policy"):
        yield
        return
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextlib.contextmanager
def group_gc() -> Iterator[None]:
    """Run one group with automatic collection off; then collect once and freeze the survivors."""
    if not _GC_POLICY:
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.collect()
        gc.freeze()


def enable_cia_cache() -> bool:
    global _ORIGINAL
    if _disabled("cia-cache"):
        return False
    if _ORIGINAL is not None:
        return True
    import torch
    import torch._export.utils as teu

    original = teu._collect_all_valid_cia_ops
    memo: dict[int, Any] = {}

    def cached() -> Any:
        key = len(torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd"))
        if key not in memo:
            memo.clear()
            memo[key] = original()
        return set(memo[key])

    cached.__wrapped__ = original  # type: ignore[attr-defined]
    _rebind_everywhere("_collect_all_valid_cia_ops", original, cached)  # torch re-exports it under several names
    _ORIGINAL = original
    return True


# -- speedup 7: provenance shared, not deep-copied -------------------------------------------------

_NODE_SOURCE_ORIGINAL: Any = None
_NODE_SOURCE_TYPES: Any = None  # (NodeSource, NodeSourceAction): looked up once, not per node


def _node_source_init(self: Any, node: Any, pass_name: str = "", action: Any = None) -> None:
    """``torch.fx.traceback.NodeSource.__init__`` with the ancestors shared instead of deep-copied
    (speedup 7). A NodeSource is never changed once built (torch and executorch only read
    ``from_node``; the two caches it fills on first use are functions of its contents), so a
    shared ancestor and a deep copy of it are the same value. Anything but a list of NodeSource
    objects is still deep-copied."""
    node_source, node_source_action = _NODE_SOURCE_TYPES
    self.pass_name = pass_name
    if action is None:
        action = []
    elif not isinstance(action, list):
        action = [action]
    for a in action:
        if not isinstance(a, node_source_action):
            raise AssertionError(f"Expected NodeSourceAction, got {type(a)}")
    self.action = action
    if node:
        self.node_info = self.NodeInfo(name=node.name, target=str(node.target), graph_id=id(node.graph))
        ancestors = node.meta.get("from_node", [])
        if type(ancestors) is list and all(type(a) is node_source for a in ancestors):
            self.from_node = list(ancestors)
        else:
            self.from_node = copy.deepcopy(ancestors)
    else:
        self.node_info = None
        self.from_node = []
    self._action_string = None
    self._dict = None


def enable_shared_provenance() -> bool:
    """Speedup 7 (module docstring)."""
    global _NODE_SOURCE_ORIGINAL, _NODE_SOURCE_TYPES
    if _disabled("shared-provenance"):
        return False
    from torch.fx.traceback import NodeSource, NodeSourceAction

    if _NODE_SOURCE_ORIGINAL is None:
        _NODE_SOURCE_TYPES = (NodeSource, NodeSourceAction)
        _NODE_SOURCE_ORIGINAL = NodeSource.__init__
        NodeSource.__init__ = _node_source_init  # type: ignore[method-assign]
    return True


# -- speedup 8: GraphModule.recompile deferred to the first use of the code ------------------------

_RECOMPILE_ORIGINAL: Any = None
_TORCH_FX: Any = None  # (_LazyGraphModule, fx's experimental config, _PyTreeCodeGen, _WrappedCall): looked up once
_LAZY_DEPTH = 0
_PENDING_ATTRS = ("_code", "_lineno_map", "_prologue_start")  # what a real recompile sets on the instance


class _Pending:
    """Sits on a dirty GraphModule's own class (torch gives every GraphModule a class of its own) as
    ``forward``, ``_code``, ``_lineno_map`` and ``_prologue_start``: the first read of any of them, from the
    instance or from the class, runs the real recompile, which puts the real values in their place."""

    def __init__(self, name: str, gm: Any) -> None:
        self.name = name
        self.gm = weakref.ref(gm)

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        gm = obj if obj is not None else self.gm()
        if gm is None:
            raise AttributeError(self.name)
        _realize(gm)
        return getattr(gm if obj is not None else type(gm), self.name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # type(gm).forward(gm, ...)
        return self.__get__(None, None)(*args, **kwargs)


def _clear_pending(gm: Any) -> None:
    cls = type(gm)
    for name in ("forward", *_PENDING_ATTRS):
        if isinstance(cls.__dict__.get(name), _Pending):
            delattr(cls, name)


def _realize(gm: Any) -> Any:
    _clear_pending(gm)
    return _RECOMPILE_ORIGINAL(gm)


def _lazy_recompile(self: Any) -> Any:
    """``GraphModule.recompile`` (speedup 8). Outside ``lazy_recompile()`` it is torch's. Inside, it does
    the cheap part now (pytree specs, the wrapped ``__call__``, the submodules) and leaves the code to the
    first read of ``forward`` or ``code``: lowering recompiles each graph after every pass (~250 times per
    item), and reads the code of few of them."""
    lazy_cls, fx_config, pytree_codegen, wrapped_call = _TORCH_FX
    # the marks go on the instance's own class (torch's GraphModuleImpl, whose __name__ __init__ renames):
    # a class that several instances share gets torch's recompile
    if (_LAZY_DEPTH == 0 or isinstance(self, lazy_cls) or fx_config.enrich_profiler_metadata
            or not type(self).__qualname__.endswith("GraphModuleImpl")):
        return _realize(self)
    if isinstance(self._graph._codegen, pytree_codegen):
        self._in_spec = self._graph._codegen.pytree_info.in_spec
        self._out_spec = self._graph._codegen.pytree_info.out_spec
    cls = type(self)
    for name in _PENDING_ATTRS:
        self.__dict__.pop(name, None)
        setattr(cls, name, _Pending(name, self))
    cls.forward = _Pending("forward", self)
    # as torch's recompile does
    cls_call = cls.__call__ if "__call__" in vars(cls) else None
    if "_wrapped_call" not in vars(cls):
        cls._wrapped_call = wrapped_call(cls, cls_call)

    def call_wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self._wrapped_call(self, *args, **kwargs)

    cls.__call__ = call_wrapped
    self._recompile_submodules()
    return None


@contextlib.contextmanager
def lazy_recompile() -> Iterator[None]:
    """Speedup 8 for the code inside (bti's ExecuTorch lowering and serialization); a no-op when off."""
    global _LAZY_DEPTH
    if _RECOMPILE_ORIGINAL is None:
        yield
        return
    _LAZY_DEPTH += 1
    try:
        yield
    finally:
        _LAZY_DEPTH -= 1


def _eager(method: Any) -> Any:
    """Pickling reads the instance's code and needs the PythonCode a real recompile returns: such
    methods start from a real recompile and run with laziness off."""
    import functools

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        global _LAZY_DEPTH
        if isinstance(type(self).__dict__.get("forward"), _Pending):
            _realize(self)
        depth, _LAZY_DEPTH = _LAZY_DEPTH, 0
        try:
            return method(self, *args, **kwargs)
        finally:
            _LAZY_DEPTH = depth

    return wrapper


def enable_lazy_recompile() -> bool:
    """Speedup 8 (module docstring): installs the method; ``lazy_recompile()`` scopes it."""
    global _RECOMPILE_ORIGINAL, _TORCH_FX
    if _disabled("lazy-recompile"):
        return False
    from torch.fx._lazy_graph_module import _LazyGraphModule
    from torch.fx.experimental import _config as fx_config
    from torch.fx.graph import _PyTreeCodeGen
    from torch.fx.graph_module import GraphModule, _WrappedCall

    if _RECOMPILE_ORIGINAL is None:
        _TORCH_FX = (_LazyGraphModule, fx_config, _PyTreeCodeGen, _WrappedCall)
        _RECOMPILE_ORIGINAL = GraphModule.recompile
        GraphModule.recompile = _lazy_recompile  # type: ignore[method-assign]
        GraphModule.__reduce__ = _eager(GraphModule.__reduce__)  # type: ignore[method-assign]
        GraphModule.__reduce_package__ = _eager(GraphModule.__reduce_package__)  # type: ignore[method-assign]
    return True


# -- speedup 9: XNNPACK's SDPA and bilinear pattern graphs built only when a graph could match -------

# (pass module, pass class, pattern module attribute, pattern getter, empty result, edge ops every pattern
# needs). Every pattern has one anchor, and these ops are among the anchor and its ancestors, which the
# matcher compares one by one (target ==): a graph without one of them matches no pattern.
# tests/test_speedups_graph.py checks both facts against the patterns themselves.
_XNNPACK_PATTERN_PASSES = (
    ("executorch.backends.xnnpack._passes.convert_to_sdpa", "ConvertToSDPAPass", "sdpa", "get_graphs", list,
     ("aten._softmax.default", "aten.bmm.default")),
    ("executorch.backends.xnnpack._passes.convert_to_upsample_bilinear2d", "ConvertToUpsampleBilinear2d",
     "bilinear_2d", "get_graphs_dict", dict, ("aten.upsample_bilinear2d.vec",)),
)
_PATTERN_GUARDS: dict[type, Any] = {}  # pass class -> its original call


def _may_match(graph_module: Any, required: tuple[Any, ...]) -> bool:
    """Whether every op in ``required`` is the target of a call_function node (compared as the matcher does)."""
    missing = list(required)
    for node in graph_module.graph.nodes:
        if node.op == "call_function":
            missing = [t for t in missing if not t == node.target]  # noqa: SIM201  (==, as the matcher compares)
            if not missing:
                return True
    return False


def _guarded_call(original: Any, module: Any, attr: str, getter: str, empty: type, required: tuple[Any, ...]) -> Any:
    import types

    import torch

    stand_in = types.SimpleNamespace(**{getter: empty})

    def call(self: Any, graph_module: Any) -> Any:
        if _may_match(graph_module, required):
            # the patterns may be built now: their example inputs come from the global RNG, which is left
            # as it was (as when the parent's warm-up built them)
            with torch.random.fork_rng(devices=[]):
                return original(self, graph_module)
        real = getattr(module, attr)
        setattr(module, attr, stand_in)  # the pass runs as it would on finding no match
        try:
            return original(self, graph_module)
        finally:
            setattr(module, attr, real)

    call.__wrapped__ = original  # type: ignore[attr-defined]
    return call


def _edge_op(name: str) -> Any:
    from executorch.exir.dialects._ops import ops as exir_ops

    op: Any = exir_ops.edge
    for part in name.split("."):
        op = getattr(op, part)
    return op


def enable_xnnpack_pattern_guard() -> bool:
    """Speedup 9 (module docstring). Installs itself only when XNNPACK's passes are already imported
    (a recipe that uses XNNPACK imported them) and the plan allows it (the versions its patterns were checked on)."""
    if _disabled("xnnpack-pattern-guard"):
        return False
    if _PATTERN_GUARDS or any(name not in sys.modules for name, *_ in _XNNPACK_PATTERN_PASSES):
        return True
    for module_name, cls_name, attr, getter, empty, ops in _XNNPACK_PATTERN_PASSES:
        module = sys.modules[module_name]
        cls = getattr(module, cls_name)
        _PATTERN_GUARDS[cls] = cls.call
        cls.call = _guarded_call(cls.call, module, attr, getter, empty, tuple(_edge_op(o) for o in ops))
    return True


# -- speedup 10: the cheap half of torch's "preservable CIA op" test first -------------------------

_PRESERVABLE_ORIGINAL: Any = None
_PRESERVABLE_PARTS: Any = None  # torch's (_is_cia_op, _check_valid_to_preserve): looked up once, not per op


def _is_preservable_cia_op(op: Any) -> bool:
    """``torch._export.utils._is_preservable_cia_op`` with its two side-effect-free tests swapped: whether
    the op has a composite-implicit kernel (a dispatcher lookup) before whether it is functional (a walk over
    its schema). ``run_decompositions`` asks it of the ~430 ops in a decomposition table that are not
    composite-implicit, where the first test alone answers False. An op the first test raises on gets torch's order."""
    is_cia_op, check_valid_to_preserve = _PRESERVABLE_PARTS
    try:
        cia = is_cia_op(op)
    except Exception:
        return _PRESERVABLE_ORIGINAL(op)  # type: ignore[no-any-return]
    return bool(cia and check_valid_to_preserve(op))


def enable_preservable_order() -> bool:
    """Speedup 10 (module docstring)."""
    global _PRESERVABLE_ORIGINAL, _PRESERVABLE_PARTS
    if _disabled("preservable-order"):
        return False
    import torch._export.utils as teu

    if _PRESERVABLE_ORIGINAL is None:
        _PRESERVABLE_PARTS = (teu._is_cia_op, teu._check_valid_to_preserve)
        _PRESERVABLE_ORIGINAL = teu._is_preservable_cia_op
        _rebind_everywhere("_is_preservable_cia_op", _PRESERVABLE_ORIGINAL, _is_preservable_cia_op)
    return True


# -- speedup 11: AOT tracing's unused rng-state placeholders made once ------------------------------

_PHILOX_ORIGINAL: Any = None
_PHILOX_TEMPLATE: dict[str, Any] = {}
_FUNCTORCH_CONFIG: Any = None  # torch._functorch.config, looked up once


def _philox_reset(self: Any) -> None:
    """``PhiloxState.reset`` (speedup 11). Every AOT trace resets six PhiloxStates (the tracker's three, on
    entry and on exit), and each reset makes two empty placeholder tensors under the fake mode (~0.8 ms). They are read only when
    ``functionalize_rng_ops`` is on; otherwise the state gets the same values from a template made once
    (real empty tensors). With the option on, torch's reset runs."""
    if _FUNCTORCH_CONFIG.functionalize_rng_ops:
        _PHILOX_ORIGINAL(self)
        return
    self.__dict__.update(_PHILOX_TEMPLATE)


def enable_philox_template() -> bool:
    """Speedup 11 (module docstring)."""
    global _PHILOX_ORIGINAL, _FUNCTORCH_CONFIG
    if _disabled("philox-template"):
        return False
    from torch._decomp.decompositions_for_rng import PhiloxState
    from torch._functorch import config

    if _PHILOX_ORIGINAL is None:
        _FUNCTORCH_CONFIG = config
        template = PhiloxState.__new__(PhiloxState)
        PhiloxState.reset(template)  # type: ignore[no-untyped-call]  # outside any trace: real tensors
        _PHILOX_TEMPLATE.update(vars(template))
        _PHILOX_ORIGINAL = PhiloxState.reset
        PhiloxState.reset = _philox_reset  # type: ignore[method-assign]
    return True


def prebuild_xnnpack_patterns() -> None:
    """Build the patterns speedup 9 defers, now (in the parent before it forks, global RNG left as it was): for
    runs whose items are models, which often have attention or upsampling, so that no worker builds them
    inside an item."""
    if not _PATTERN_GUARDS:
        return
    import torch

    with torch.random.fork_rng(devices=[]):
        for module_name, _, attr, getter, _, _ in _XNNPACK_PATTERN_PASSES:
            getattr(getattr(sys.modules[module_name], attr), getter)()
