"""Generated operator suite over the core ATen opset (``bti run -s core-ops``; ``core-ops-ci`` is
a fixed, stable sample of it). One compact ``OpGen`` per operator overload; see
``harness.cases.generate`` for how variants are derived.

Ops not listed here are reported by ``bti report --coverage`` / ``bti list --coverage``.
"""

from __future__ import annotations

from typing import Any

from harness.cases.case import UNINITIALIZED, Case
from harness.cases.generate import ALL, FLOATS, INTS, NUM, SIGNED_INTS, OpGen, T, _with, generate_cases, x_node

Shape = list[int | str]
A = dict[str, Any]


def unary(**xdefaults: Any) -> Any:
    return lambda shape, a: ([x_node(shape, a, **xdefaults)], {})


def y_node(shape: Shape, kind: str, **node: Any) -> dict[str, Any]:
    if kind == "same":
        return T(shape, **node)
    if kind == "last":
        return T(shape[-1:], **node)
    if kind == "ones":
        return T([1] * len(shape), **node)
    if kind == "rank0":
        return T([], **node)
    if kind == "lead":  # broadcast on the trailing dims: [d0, 1, 1, …]
        return T([*shape[:1], *([1] * (len(shape) - 1))], **node)
    raise ValueError(kind)


BCAST = ("y", ("same", "last", "ones", "rank0", "lead"))


def binary(**ydefaults: Any) -> Any:
    return lambda shape, a: ([x_node(shape, a), y_node(shape, a["y"] if shape else "same", **ydefaults)], {})


def binary_scalar(shape: Shape, a: A) -> tuple[list[Any], dict[str, Any]]:
    return [x_node(shape, a), a["s"]], {}


def dims_reduce(keep_arg: bool = True) -> Any:
    def make(shape: Shape, a: A) -> tuple[list[Any], dict[str, Any]]:
        dim = a["dim"] if len(shape) else []
        args: list[Any] = [x_node(shape, a), dim if isinstance(dim, list) else [dim]]
        if keep_arg:
            args.append(a["keepdim"])
        return args, {}
    return make


def dim_op(*tail: Any, keepdim: bool = False) -> Any:
    def make(shape: Shape, a: A) -> tuple[list[Any], dict[str, Any]]:
        args: list[Any] = [x_node(shape, a), a["dim"], *tail]
        if keepdim:
            args.append(a["keepdim"])
        return args, {}
    return make


POS = {"init": "uniform", "low": 0.1, "high": 4.0}
UNIT = {"init": "uniform", "low": -0.95, "high": 0.95}
GE1 = {"init": "uniform", "low": 1.05, "high": 4.0}
DIM_ATTR = ("dim", (-1, 0, 1))
KEEP = ("keepdim", (False, True))


def _unaries() -> list[OpGen]:
    float_unary = ["exp", "sin", "cos", "tan", "tanh", "sigmoid", "erf", "expm1", "sinh", "cosh", "atan", "asinh",
                   "ceil", "floor", "round", "trunc", "sign", "relu", "reciprocal"]
    out = [OpGen(f"aten::{n}.default", "unary", unary(), dtypes=FLOATS) for n in float_unary]
    out += [OpGen(f"aten::{n}.default", "unary", unary(**POS), dtypes=FLOATS, init=POS)
            for n in ("log", "log2", "log10", "sqrt", "rsqrt")]
    out += [OpGen("aten::log1p.default", "unary", unary(**POS), dtypes=FLOATS, init=POS),
            OpGen("aten::acosh.default", "unary", unary(**GE1), dtypes=FLOATS, init=GE1)]
    out += [OpGen(f"aten::{n}.default", "unary", unary(**UNIT), dtypes=FLOATS, init=UNIT) for n in ("asin", "acos", "atanh")]
    out += [
        OpGen("aten::abs.default", "unary", unary(), dtypes=(*FLOATS, *SIGNED_INTS)),
        OpGen("aten::neg.default", "unary", unary(), dtypes=(*FLOATS, *SIGNED_INTS)),
        OpGen("aten::isnan.default", "unary", unary(), dtypes=FLOATS),
        OpGen("aten::isinf.default", "unary", unary(), dtypes=FLOATS),
        OpGen("aten::logical_not.default", "unary", unary(), dtypes=("bool", *FLOATS, "int32")),
        OpGen("aten::bitwise_not.default", "unary", unary(), dtypes=("bool", *INTS), boundary=False),
        OpGen("aten::clone.default", "unary", unary(), dtypes=ALL),
        OpGen("aten::alias.default", "view", unary(), dtypes=FLOATS),
        OpGen("aten::gelu.default", "activation", lambda s, a: ([x_node(s, a)], {"approximate": a["approximate"]}),
              attrs=(("approximate", ("none", "tanh")),)),
        OpGen("aten::hardtanh.default", "activation", lambda s, a: ([x_node(s, a, std=2.0), *a["range"]], {}),
              attrs=(("range", ((-1.0, 1.0), (0.0, 6.0))),)),
        OpGen("aten::leaky_relu.default", "activation", lambda s, a: ([x_node(s, a), a["slope"]], {}), attrs=(("slope", (0.01, 0.2)),)),
        OpGen("aten::elu.default", "activation", lambda s, a: ([x_node(s, a), a["alpha"]], {}), attrs=(("alpha", (1.0, 0.5)),)),
        OpGen("aten::clamp.default", "elementwise", lambda s, a: ([x_node(s, a), *a["bounds"]], {}),
              dtypes=(*FLOATS, "int32", "int64"), attrs=(("bounds", ((-0.5, 0.5), (None, 0.0), (0.0, None))),)),
        OpGen("aten::clamp.Tensor", "elementwise", lambda s, a: ([x_node(s, a), T([], init="full", value=-0.5), T([], init="full", value=0.5)], {}),
              dtypes=FLOATS),
        OpGen("aten::pow.Tensor_Scalar", "elementwise", lambda s, a: ([x_node(s, a, **POS), a["e"]], {}), init=POS,
              attrs=(("e", (2, 0.5, 3, -1.0)),)),
        OpGen("aten::_softmax.default", "activation", lambda s, a: ([x_node(s, a), a["dim"], False], {}),
              ranks=(1, 2, 3, 4, 5), attrs=(DIM_ATTR,)),
        OpGen("aten::_log_softmax.default", "activation", lambda s, a: ([x_node(s, a), a["dim"], False], {}),
              ranks=(1, 2, 3, 4, 5), attrs=(DIM_ATTR,)),
        OpGen("aten::native_dropout.default", "activation", lambda s, a: ([x_node(s, a), 0.5, False], {})),
    ]
    return out


def _binaries() -> list[OpGen]:
    out = []
    for n, dt in (("add", NUM), ("sub", (*FLOATS, *SIGNED_INTS)), ("mul", NUM)):
        out.append(OpGen(f"aten::{n}.Tensor", "binary", binary(), dtypes=dt, attrs=(BCAST,)))
        out.append(OpGen(f"aten::{n}.Scalar", "binary", binary_scalar, dtypes=FLOATS, attrs=(("s", (2.5, -1.0, 0.0)),)))
    out += [
        OpGen("aten::div.Tensor", "binary", binary(init="uniform", low=0.5, high=2.0), attrs=(BCAST,)),
        OpGen("aten::div.Scalar", "binary", binary_scalar, attrs=(("s", (2.5, -0.5)),)),
        OpGen("aten::div.Tensor_mode", "binary", lambda s, a: ([x_node(s, a, std=4.0), y_node(s, a["y"] if s else "same", init="uniform", low=0.5, high=2.0)],
                                                              {"rounding_mode": a["mode"]}), attrs=(("mode", ("trunc", "floor")), BCAST)),
        OpGen("aten::div.Scalar_mode", "binary", lambda s, a: ([x_node(s, a, std=4.0), 1.5], {"rounding_mode": a["mode"]}),
              attrs=(("mode", ("trunc", "floor")),)),
        OpGen("aten::maximum.default", "binary", binary(), dtypes=(*FLOATS, "int32", "int64"), attrs=(BCAST,)),
        OpGen("aten::minimum.default", "binary", binary(), dtypes=(*FLOATS, "int32", "int64"), attrs=(BCAST,)),
        OpGen("aten::atan2.default", "binary", binary(), attrs=(BCAST,)),
        OpGen("aten::pow.Tensor_Tensor", "binary", binary(init="uniform", low=-2.0, high=2.0), attrs=(BCAST,),
              init=POS, dtypes=FLOATS),
        OpGen("aten::pow.Scalar", "binary", lambda s, a: ([2.0, x_node(s, a)], {})),
        OpGen("aten::fmod.Tensor", "binary", binary(init="uniform", low=0.5, high=2.0), attrs=(BCAST,)),
        OpGen("aten::fmod.Scalar", "binary", binary_scalar, attrs=(("s", (1.5, -0.7)),)),
        OpGen("aten::remainder.Tensor", "binary", binary(init="uniform", low=0.5, high=2.0), attrs=(BCAST,)),
        OpGen("aten::remainder.Scalar", "binary", binary_scalar, attrs=(("s", (1.5, -0.7)),)),
        OpGen("aten::where.self", "binary", lambda s, a: ([T(s, dtype="bool", init="bernoulli"), x_node(s, a), y_node(s, a["y"] if s else "same")], {}),
              dtypes=(*FLOATS, "int32", "int64"), attrs=(BCAST,)),
    ]
    for n in ("eq", "ne", "lt", "le", "gt", "ge"):
        out.append(OpGen(f"aten::{n}.Tensor", "compare", binary(init="randint", low=0, high=3), dtypes=NUM, attrs=(BCAST,)))
        out.append(OpGen(f"aten::{n}.Scalar", "compare", binary_scalar, dtypes=NUM, attrs=(("s", (0, 1.5)),)))
    for n in ("logical_and", "logical_or", "logical_xor"):
        out.append(OpGen(f"aten::{n}.default", "logical", binary(), dtypes=("bool", "float32", "int32"), attrs=(BCAST,)))
    for n in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        out.append(OpGen(f"aten::{n}.Tensor", "bitwise", binary(), dtypes=("bool", *INTS), attrs=(BCAST,), boundary=False))
        out.append(OpGen(f"aten::{n}.Scalar", "bitwise", binary_scalar, dtypes=INTS, attrs=(("s", (3, 6)),), boundary=False))
    return out


def _reductions() -> list[OpGen]:
    dims = ("dim", (-1, 0, [0, -1]))
    r = (1, 2, 3, 4, 5)
    return [
        OpGen("aten::sum.dim_IntList", "reduction", dims_reduce(), dtypes=(*FLOATS, "int32", "int64"), ranks=r, attrs=(dims, KEEP)),
        OpGen("aten::mean.dim", "reduction", dims_reduce(), ranks=r, attrs=(dims, KEEP)),
        OpGen("aten::mean.default", "reduction", unary()),
        OpGen("aten::amax.default", "reduction", dims_reduce(), dtypes=(*FLOATS, "int32"), ranks=r, attrs=(dims, KEEP)),
        OpGen("aten::amin.default", "reduction", dims_reduce(), dtypes=(*FLOATS, "int32"), ranks=r, attrs=(dims, KEEP)),
        OpGen("aten::var.correction", "reduction", lambda s, a: ([x_node(s, a), [a["dim"]]], {"correction": a["corr"], "keepdim": True}),
              ranks=r, attrs=(("dim", (-1, 0)), ("corr", (1, 0)))),
        OpGen("aten::var.dim", "reduction", lambda s, a: ([x_node(s, a), [a["dim"]], True, True], {}), ranks=r, attrs=(("dim", (-1, 0)),)),
        OpGen("aten::prod.default", "reduction", unary(init="uniform", low=0.8, high=1.2), ranks=(0, 1, 2, 3), base_rank=2),
        OpGen("aten::prod.dim_int", "reduction", dim_op(keepdim=True), ranks=r, attrs=(DIM_ATTR, KEEP), init=POS),
        OpGen("aten::any.default", "reduction", unary(), dtypes=("bool", "float32", "int32")),
        OpGen("aten::any.dim", "reduction", dim_op(keepdim=True), dtypes=("bool", "float32"), ranks=r, attrs=(DIM_ATTR, KEEP)),
        OpGen("aten::any.dims", "reduction", dims_reduce(), dtypes=("bool", "float32"), ranks=r, attrs=(dims, KEEP)),
        OpGen("aten::argmax.default", "reduction", dim_op(keepdim=True), dtypes=(*FLOATS, "int32"), ranks=r, attrs=(DIM_ATTR, KEEP), boundary=False),
        OpGen("aten::argmin.default", "reduction", dim_op(keepdim=True), dtypes=(*FLOATS, "int32"), ranks=r, attrs=(DIM_ATTR, KEEP), boundary=False),
        OpGen("aten::max.dim", "reduction", dim_op(keepdim=True), dtypes=(*FLOATS, "int32"), ranks=r, attrs=(DIM_ATTR, KEEP), boundary=False),
        OpGen("aten::min.dim", "reduction", dim_op(keepdim=True), dtypes=(*FLOATS, "int32"), ranks=r, attrs=(DIM_ATTR, KEEP), boundary=False),
        OpGen("aten::cumsum.default", "scan", dim_op(), dtypes=(*FLOATS, "int32", "int64"), ranks=r, attrs=(DIM_ATTR,)),
        OpGen("aten::sort.default", "sort", lambda s, a: ([x_node(s, a), a["dim"], a["desc"]], {}), ranks=r,
              attrs=(DIM_ATTR, ("desc", (False, True))), boundary=False),
        OpGen("aten::topk.default", "sort", lambda s, a: ([x_node(s, a), 2, a["dim"], a["largest"], True], {}), ranks=(1, 2, 3, 4),
              attrs=(("dim", (-1, 1)), ("largest", (True, False))), empty=False, boundary=False),
    ]


def _views() -> list[OpGen]:
    r = (1, 2, 3, 4, 5)
    return [
        OpGen("aten::view.default", "view", lambda s, a: ([x_node(s, a), [-1]], {}), dtypes=ALL, layouts=False),
        OpGen("aten::permute.default", "view", lambda s, a: ([x_node(s, a), list(range(len(s)))[::-1]], {}), dtypes=ALL),
        OpGen("aten::expand.default", "view", lambda s, a: ([x_node([1, *s[1:]], a), [4, *s[1:]]], {}), ranks=r, dynamic=False),
        OpGen("aten::unsqueeze.default", "view", lambda s, a: ([x_node(s, a), a["dim"]], {}), dtypes=ALL, attrs=(("dim", (0, -1)),)),
        OpGen("aten::squeeze.dim", "view", lambda s, a: ([x_node([*s, 1], a), -1], {}), dtypes=ALL),
        OpGen("aten::squeeze.dims", "view", lambda s, a: ([x_node([1, *s, 1], a), [0, -1]], {}), dtypes=FLOATS),
        OpGen("aten::select.int", "view", lambda s, a: ([x_node(s, a), a["dim"], 0], {}), ranks=r, attrs=(("dim", (-1, 0)),), empty=False),
        OpGen("aten::slice.Tensor", "view", lambda s, a: ([x_node(s, a), -1, a["start"], 4, a["step"]], {}), ranks=r,
              attrs=(("start", (0, 1)), ("step", (1, 2)))),
        OpGen("aten::diagonal.default", "view", lambda s, a: ([x_node(s, a), a["offset"], 0, 1], {}), ranks=(2, 3, 4),
              attrs=(("offset", (0, 1, -1)),)),
        OpGen("aten::flip.default", "view", lambda s, a: ([x_node(s, a), [0]], {}), dtypes=(*FLOATS, "int32"), ranks=r),
        OpGen("aten::repeat.default", "view", lambda s, a: ([x_node(s, a), [2] + [1] * max(len(s) - 1, 0)], {}), ranks=r, dynamic=False),
        OpGen("aten::as_strided.default", "view", lambda s, a: ([x_node([4, 6], a), [3, 3], [6, 2]], {}), ranks=(2,), base_rank=2,
              dynamic=False, layouts=False, empty=False),
        OpGen("aten::_to_copy.default", "cast", lambda s, a: ([x_node(s, a, std=5.0)], {"dtype": {"torch_dtype": a["to"]}}),
              dtypes=(*FLOATS, "int32"), attrs=(("to", ("float16", "float32", "int32", "bool", "bfloat16")),)),
        OpGen("aten::copy.default", "cast", lambda s, a: ([T(s), x_node(s, a)], {}), dtypes=FLOATS),
        OpGen("aten::full_like.default", "creation", lambda s, a: ([x_node(s, a), 3.0], {}), dtypes=FLOATS),
        OpGen("aten::fill.Scalar", "creation", lambda s, a: ([x_node(s, a), a["v"]], {}), attrs=(("v", (2.0, -1.5)),)),
        OpGen("aten::constant_pad_nd.default", "pad", lambda s, a: ([x_node(s, a), a["pad"], 0.5], {}), ranks=r,
              attrs=(("pad", ([1, 1], [0, 2, 1, 0])),)),
        OpGen("aten::select_scatter.default", "scatter", lambda s, a: ([x_node(s, a), T(s[1:]), 0, 1], {}), ranks=(2, 3, 4), dynamic=False,
              empty=False),
        OpGen("aten::slice_scatter.default", "scatter", lambda s, a: ([x_node(s, a), T([*s[:-1], 2]), -1, 0, 4, 2], {}), ranks=(2, 3, 4)),
    ]


def _nn() -> list[OpGen]:
    img: dict[str, Any] = {"base_rank": 4, "ranks": (4,), "empty": False}
    return [
        OpGen("aten::addmm.default", "linear", lambda s, a: ([T([4]), x_node([3, 5], a), T([5, 4])], {"beta": a["beta"]}),
              ranks=(2,), base_rank=2, dynamic=False, empty=False, attrs=(("beta", (1.0, 0.5)),)),
        OpGen("aten::mm.default", "matmul", lambda s, a: ([x_node([3, 5], a), T([5, 4])], {}), ranks=(2,), base_rank=2, dynamic=False),
        OpGen("aten::bmm.default", "matmul", lambda s, a: ([x_node(["N", 3, 5], a), T(["N", 5, 4])], {}),
              ranks=(3,), base_rank=3, empty=False),
        OpGen("aten::convolution.default", "conv", lambda s, a: (
            [x_node(["N", 3, 8, 8], a), T([4, 3 // a["groups"], 3, 3], std=0.3), T([4]) if a["groups"] == 1 else None,
             [a["stride"]] * 2, [1, 1], [1, 1], False, [0, 0], a["groups"]], {}), dtypes=FLOATS, **img,
            attrs=(("stride", (1, 2)), ("groups", (1,)))),
        OpGen("aten::avg_pool2d.default", "pool", lambda s, a: ([x_node(["N", 3, 8, 8], a), [2, 2], [a["stride"]] * 2, [0, 0], a["ceil"]], {}),
              **img, attrs=(("stride", (2, 1)), ("ceil", (False, True)))),
        OpGen("aten::avg_pool1d.default", "pool", lambda s, a: ([x_node(["N", 3, 8], a), [2], [2]], {}), base_rank=3, ranks=(3,), empty=False),
        OpGen("aten::avg_pool3d.default", "pool", lambda s, a: ([x_node(["N", 2, 4, 4, 4], a), [2, 2, 2], [2, 2, 2]], {}), base_rank=5,
              ranks=(5,), empty=False),
        OpGen("aten::adaptive_avg_pool1d.default", "pool", lambda s, a: ([x_node(["N", 3, 8], a), [a["out"]]], {}), base_rank=3, ranks=(3,),
              empty=False, attrs=(("out", (1, 4)),)),
        OpGen("aten::_adaptive_avg_pool2d.default", "pool", lambda s, a: ([x_node(["N", 3, 8, 8], a), [a["out"]] * 2], {}), **img,
              attrs=(("out", (1, 4)),)),
        OpGen("aten::_adaptive_avg_pool3d.default", "pool", lambda s, a: ([x_node(["N", 2, 4, 4, 4], a), [2, 2, 2]], {}), base_rank=5,
              ranks=(5,), empty=False),
        OpGen("aten::max_pool2d_with_indices.default", "pool", lambda s, a: ([x_node(["N", 3, 8, 8], a), [2, 2], [a["stride"]] * 2], {}),
              **img, attrs=(("stride", (2, 1)),), boundary=False),
        OpGen("aten::max_pool3d_with_indices.default", "pool", lambda s, a: ([x_node(["N", 2, 4, 4, 4], a), [2, 2, 2], [2, 2, 2]], {}),
              base_rank=5, ranks=(5,), empty=False, boundary=False),
        OpGen("aten::native_layer_norm.default", "norm", lambda s, a: ([x_node(s, a), s[-1:], T(s[-1:], init="uniform", low=0.5, high=1.5),
                                                                       T(s[-1:]), 1e-5], {}), ranks=(2, 3, 4), empty=False),
        OpGen("aten::native_group_norm.default", "norm", lambda s, a: ([x_node([2, 4, 3, 3], a), T([4]), T([4]), 2, 4, 9, 2, 1e-5], {}),
              **img, dynamic=False),
        OpGen("aten::_native_batch_norm_legit_no_training.default", "norm", lambda s, a: (
            [x_node(["N", 3, 4, 4], a), T([3]), T([3]), T([3]), T([3], init="uniform", low=0.5, high=1.5), 0.1, 1e-5], {}), **img),
        OpGen("aten::embedding.default", "indexing", lambda s, a: ([T([10, 4]), x_node(["N", 5], a, init="randint", low=0, high=10)], {}),
              dtypes=("int64", "int32"), ranks=(2,), base_rank=2, boundary=False, layouts=False, empty=False),
        OpGen("aten::upsample_nearest2d.vec", "resize", lambda s, a: ([x_node(["N", 3, 4, 4], a), None, [a["scale"]] * 2], {}), **img,
              attrs=(("scale", (2.0, 1.5)),)),
        OpGen("aten::upsample_bilinear2d.vec", "resize", lambda s, a: ([x_node(["N", 3, 4, 4], a), None, a["align"], [2.0, 2.0]], {}), **img,
              attrs=(("align", (False, True)),)),
        OpGen("aten::reflection_pad1d.default", "pad", lambda s, a: ([x_node(["N", 3, 6], a), [2, 1]], {}), base_rank=3, ranks=(3,), empty=False),
        OpGen("aten::reflection_pad2d.default", "pad", lambda s, a: ([x_node(["N", 3, 6, 6], a), [1, 2, 2, 1]], {}), **img),
        OpGen("aten::reflection_pad3d.default", "pad", lambda s, a: ([x_node(["N", 2, 4, 4, 4], a), [1, 1, 1, 1, 1, 1]], {}), base_rank=5,
              ranks=(5,), empty=False),
        OpGen("aten::replication_pad2d.default", "pad", lambda s, a: ([x_node(["N", 3, 6, 6], a), [1, 2, 2, 1]], {}), **img),
        OpGen("aten::replication_pad3d.default", "pad", lambda s, a: ([x_node(["N", 2, 4, 4, 4], a), [1, 1, 1, 1, 1, 1]], {}), base_rank=5,
              ranks=(5,), empty=False),
        OpGen("aten::grid_sampler_2d.default", "resize", lambda s, a: ([x_node(["N", 3, 6, 6], a), T(["N", 4, 4, 2], init="uniform", low=-1, high=1),
                                                                       0, 0, a["align"]], {}), **img, attrs=(("align", (False, True)),)),
        OpGen("aten::_cdist_forward.default", "distance", lambda s, a: ([x_node(["N", 4, 3], a), T(["N", 5, 3]), 2.0, None], {}), base_rank=3,
              ranks=(3,), empty=False),
        OpGen("aten::_pdist_forward.default", "distance", lambda s, a: ([x_node([5, 3], a), 2.0], {}), base_rank=2, ranks=(2,),
              dynamic=False, empty=False, layouts=False),
    ]


def _indexing() -> list[OpGen]:
    idx = {"dtype": "int64", "init": "randint", "low": 0, "high": 2}
    return [
        OpGen("aten::gather.default", "indexing", lambda s, a: ([x_node(s, a), a["dim"], T([*s[:-1], 2] if a["dim"] == -1 else [2, *s[1:]], **idx)], {}),
              ranks=(2, 3, 4), attrs=(("dim", (-1, 0)),), empty=False),
        OpGen("aten::index_select.default", "indexing", lambda s, a: ([x_node(s, a), a["dim"], T([3], **idx)], {}), ranks=(1, 2, 3, 4, 5),
              dtypes=(*FLOATS, "int32"), attrs=(("dim", (0, -1)),), empty=False),
        OpGen("aten::index.Tensor", "indexing", lambda s, a: ([x_node(s, a), {"list": [T([3], **idx)]}], {}), ranks=(1, 2, 3, 4),
              empty=False),
        OpGen("aten::index_put.default", "indexing", lambda s, a: ([x_node(s, a), {"list": [T([2], dtype="int64", init="arange")]}, T(s[1:]),
                                                                   a["acc"]], {}), ranks=(1, 2, 3), attrs=(("acc", (False, True)),), empty=False),
        OpGen("aten::scatter.src", "scatter", lambda s, a: ([x_node(s, a), 0, T([1, *s[1:]], **idx), T([1, *s[1:]])], {}), ranks=(2, 3),
              empty=False, dynamic=False),
        OpGen("aten::scatter.value", "scatter", lambda s, a: ([x_node(s, a), 0, T([1, *s[1:]], **idx), 2.0], {}), ranks=(2, 3), empty=False,
              dynamic=False),
        OpGen("aten::scatter_add.default", "scatter", lambda s, a: ([x_node(s, a), 0, T([2, *s[1:]], **idx), T([2, *s[1:]])], {}), ranks=(2, 3),
              empty=False, dynamic=False),
        OpGen("aten::scatter_reduce.two", "scatter", lambda s, a: ([x_node(s, a), 0, T([2, *s[1:]], **idx), T([2, *s[1:]]), a["reduce"]], {}),
              ranks=(2, 3), empty=False, dynamic=False, attrs=(("reduce", ("sum", "prod", "amax", "amin", "mean")),)),
        OpGen("aten::masked_scatter.default", "scatter", lambda s, a: ([x_node(s, a), T(s, dtype="bool", init="bernoulli"), T(s)], {}),
              ranks=(1, 2, 3), dynamic=False),
        OpGen("aten::cat.default", "concat", lambda s, a: ([{"list": [x_node(s, a), T(s)]}, a["dim"]], {}), dtypes=(*FLOATS, "int32"),
              ranks=(1, 2, 3, 4, 5), attrs=(("dim", (0, -1)),)),
        OpGen("aten::split_with_sizes.default", "split", lambda s, a: ([x_node([*s[:-1], 6], a), [2, 4], -1], {}), ranks=(1, 2, 3, 4)),
        OpGen("aten::nonzero.default", "indexing", unary(), dtypes=("float32", "bool", "int32"), dynamic=False, boundary=False),
    ]


def _creation() -> list[OpGen]:
    def no_input(call: Any) -> Any:  # creation ops take a tensor only to carry shape/dtype through the graph
        return call
    return [
        OpGen("aten::arange.start_step", "creation", no_input(lambda s, a: ([0, a["end"], a["step"]], {"dtype": {"torch_dtype": "float32"}})),
              ranks=(1,), base_rank=1, dynamic=False, empty=False, layouts=False, boundary=False, dtypes=("float32",),
              attrs=(("end", (10, 7)), ("step", (1, 2)))),
        OpGen("aten::full.default", "creation", lambda s, a: ([[2, 3], a["v"]], {"dtype": {"torch_dtype": "float32"}}), ranks=(2,), base_rank=2,
              dynamic=False, empty=False, layouts=False, boundary=False, dtypes=("float32",), attrs=(("v", (1.5, -2.0)),)),
        OpGen("aten::scalar_tensor.default", "creation", lambda s, a: ([a["v"]], {"dtype": {"torch_dtype": "float32"}}), ranks=(0,), base_rank=0,
              dynamic=False, empty=False, layouts=False, boundary=False, dtypes=("float32",), attrs=(("v", (3.5, -1.0)),)),
    ]


def _random_and_backward() -> list[OpGen]:
    fixed: dict[str, Any] = {"dynamic": False, "empty": False, "layouts": False, "boundary": False}
    f32 = {"dtype": {"torch_dtype": "float32"}}
    img: dict[str, Any] = {"ranks": (4,), "base_rank": 4, **fixed}
    return [
        OpGen("aten::rand.default", "random", lambda s, a: ([[2, 3, 4]], dict(f32)), ranks=(3,), shape_only=True, **fixed),
        OpGen("aten::randn.default", "random", lambda s, a: ([[2, 3, 4]], dict(f32)), ranks=(3,), shape_only=True, **fixed),
        OpGen("aten::randperm.default", "random", lambda s, a: ([10], {"dtype": {"torch_dtype": "int64"}}), ranks=(3,), shape_only=True,
              dtypes=("float32",), **fixed),
        # uninitialized outputs: a quantizing recipe skips them (harness.recipes: nothing to calibrate on)
        OpGen("aten::empty.memory_format", "creation", lambda s, a: ([[2, 3]], dict(f32)), ranks=(3,), shape_only=True,
              tags=(UNINITIALIZED,), **fixed),
        OpGen("aten::empty_strided.default", "creation", lambda s, a: ([[2, 3], [3, 1]], dict(f32)), ranks=(3,), shape_only=True,
              tags=(UNINITIALIZED,), **fixed),
        OpGen("aten::avg_pool2d_backward.default", "backward", lambda s, a: (
            [T([2, 3, 4, 4]), x_node([2, 3, 8, 8], a), [2, 2], [2, 2], [0, 0], False, True, None], {}), **img),
        OpGen("aten::_adaptive_avg_pool2d_backward.default", "backward", lambda s, a: ([T([2, 3, 2, 2]), x_node([2, 3, 8, 8], a)], {}), **img),
        OpGen("aten::convolution_backward.default", "backward", lambda s, a: (
            [T([2, 4, 6, 6]), x_node([2, 3, 8, 8], a), T([4, 3, 3, 3], std=0.3), [4], [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
             [True, True, True]], {}), **img),
        OpGen("aten::embedding_dense_backward.default", "backward", lambda s, a: (
            [x_node([2, 5, 4], a), T([2, 5], dtype="int64", init="randint", low=0, high=10), 10, -1, False], {}), ranks=(3,), **fixed),
        OpGen("aten::native_layer_norm_backward.default", "backward", lambda s, a: (
            [T([2, 3, 5]), x_node([2, 3, 5], a), [5], T([2, 3, 1]), T([2, 3, 1], init="uniform", low=0.5, high=1.5), T([5]), T([5]),
             [True, True, True]], {}), ranks=(3,), **fixed),
        OpGen("aten::native_group_norm_backward.default", "backward", lambda s, a: (
            [T([2, 4, 3, 3]), x_node([2, 4, 3, 3], a), T([2, 2]), T([2, 2], init="uniform", low=0.5, high=1.5), T([4]), 2, 4, 9, 2,
             [True, True, True]], {}), **img),
        OpGen("aten::_native_batch_norm_legit.no_stats", "norm", lambda s, a: (
            [x_node([2, 3, 4, 4], a), T([3]), T([3]), True, 0.1, 1e-5], {}), **img),
        OpGen("aten::_embedding_bag.default", "indexing", lambda s, a: (
            [x_node([10, 4], a), T([6], dtype="int64", init="randint", low=0, high=10), T([3], dtype="int64", init="arange"),
             False, a["mode"]], {}), ranks=(2,), base_rank=2, attrs=(("mode", (0, 1, 2)),), **fixed),
        OpGen("aten::max_pool2d_with_indices_backward.default", "backward", lambda s, a: (  # one 2x2 window: any index in [0, 4) is valid
            [T([2, 3, 1, 1]), x_node([2, 3, 2, 2], a), [2, 2], [2, 2], [0, 0], [1, 1], False,
             T([2, 3, 1, 1], dtype="int64", init="randint", low=0, high=4)], {}), **img),
        OpGen("aten::_native_batch_norm_legit.default", "norm", lambda s, a: (
            [x_node([2, 3, 4, 4], a), T([3]), T([3]), T([3]), T([3], init="uniform", low=0.5, high=1.5), True, 0.1, 1e-5], {}), **img),
        OpGen("aten::atan2.out", "binary", lambda s, a: ([x_node(s, a), T(s)], {"out": T(s)}), ranks=(3,), **fixed),
        OpGen("aten::_fft_r2c.default", "fft", lambda s, a: ([x_node([2, 8], a), [1], 0, a["onesided"]], {}), ranks=(2,), base_rank=2,
              attrs=(("onesided", (True, False)),), **fixed),
        OpGen("aten::_fft_c2r.default", "fft", lambda s, a: ([_with(x_node([2, 5, 2], a), layout="complex"), [1], 0, 8], {}), ranks=(3,),
              **fixed),
        OpGen("aten::_local_scalar_dense.default", "scalar", lambda s, a: ([x_node([], a)], {}), ranks=(0,), base_rank=0, **fixed),
        OpGen("aten::sym_size.int", "sym", lambda s, a: ([x_node(s, a), 0], {}), ranks=(3,)),
        OpGen("aten::sym_numel.default", "sym", lambda s, a: ([x_node(s, a)], {}), ranks=(3,)),
        OpGen("aten::sym_stride.int", "sym", lambda s, a: ([x_node(s, a), 0], {}), ranks=(3,)),
        OpGen("aten::sym_storage_offset.default", "sym", lambda s, a: ([x_node(s, a)], {}), ranks=(3,)),
        OpGen("aten::sym_is_contiguous.default", "sym", lambda s, a: ([x_node(s, a)], {}), ranks=(3,)),
        OpGen("aten::resize_.default", "inplace", lambda s, a: ([x_node([2, 3, 4], a), [4, 6]], {}), ranks=(3,), **fixed),
        OpGen("aten::col2im.default", "resize", lambda s, a: ([x_node([2, 12, 9], a), [4, 4], [2, 2], [1, 1], [0, 0], [1, 1]], {}),
              ranks=(3,), **fixed),
    ]


def specs() -> list[OpGen]:
    return [*_unaries(), *_binaries(), *_reductions(), *_views(), *_nn(), *_indexing(), *_creation(), *_random_and_backward()]


def core_cases(suite: str = "core-ops") -> list[Case]:
    return generate_cases(specs(), suite)


def ci_sample(cases: list[Case]) -> list[Case]:
    """A fixed sample, stable across runs: every op's base case (static and dynamic) in its first dtype."""
    return [Case(c.id, "core-ops-ci", c.kind, c.spec, c.op, c.tags, c.dtypes[:1], c.shapes, c.source)
            for c in cases if c.id.endswith(".base")]
