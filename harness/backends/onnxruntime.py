"""ONNX Runtime as a backend: ``torch.onnx.export(..., dynamo=True)``, then an ``InferenceSession``.

Stages: lower (export to ONNX, saved as a file, and find which execution provider takes each node), serialize
(the program's bytes: the ``.onnx`` file, then its weights file past torch's 1.5 GB threshold), load (a session
from the saved file), run. Recipe keys: ``providers`` (the execution
provider list, in priority order, default ``[CPUExecutionProvider]``: a vendor names their own EP) and
``opset`` (default 18). The partition stats count the nodes each EP ran, taken from ONNX Runtime's own
profile of one run: an EP that takes nothing shows as PASS_UNDELEGATED, as an ExecuTorch delegate does.
Needs the ``onnx`` extra (``onnxruntime``, ``onnxscript``).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.backends import BaseBackend, Where, check_keys
from harness.errors import RecipeError
from harness.status import Stage

if TYPE_CHECKING:
    from harness.recipes import Recipe

FALLBACK_EP = "CPUExecutionProvider"
MODEL_FILE = "model.onnx"


@dataclass(frozen=True)
class OrtOptions:
    providers: tuple[str, ...] = (FALLBACK_EP,)
    opset: int = 18


@dataclass
class Exported:
    program: Any  # torch.onnx.ONNXProgram
    blob: bytes
    input_names: tuple[str, ...]
    directory: tempfile.TemporaryDirectory[str]  # removed with this object (or by the pool, if the worker dies)

    @property
    def path(self) -> str:
        """The saved model, which a session loads; a large model keeps its weights in a file beside it."""
        return os.path.join(self.directory.name, MODEL_FILE)


class OnnxRuntimeBackend(BaseBackend):
    name = "onnxruntime"
    stages = frozenset({Stage.SERIALIZE})

    def parse_options(self, raw: Mapping[str, Any], where: Where) -> OrtOptions:
        check_keys(raw, {"providers", "opset"}, where, self.name)
        providers = raw.get("providers", [FALLBACK_EP])
        if not isinstance(providers, list) or not providers or not all(isinstance(p, str) and p for p in providers):
            raise RecipeError(f"{where('providers')}: `providers` takes a list of execution provider names")
        opset = raw.get("opset", 18)
        if isinstance(opset, bool) or not isinstance(opset, int) or not 7 <= opset <= 30:
            raise RecipeError(f"{where('opset')}: `opset` takes an ONNX opset version (7-30)")
        return OrtOptions(tuple(providers), opset)

    def unavailable_reason(self, recipe: Recipe) -> str | None:
        import importlib.util

        for mod in ("onnxruntime", "onnxscript"):
            if importlib.util.find_spec(mod) is None:
                return f"python package {mod!r} is not installed (pip install 'bti[onnx]')"
        import onnxruntime as ort

        have = ort.get_available_providers()
        missing = [p for p in recipe.options.providers if p not in have]
        if missing:
            return f"execution provider(s) {', '.join(missing)} not in this onnxruntime (available: {', '.join(have)})"
        return None

    def warm(self, recipe: Recipe, lower: bool) -> None:
        import onnxruntime  # noqa: F401
        import onnxscript  # noqa: F401

    def lower(self, recipe: Recipe, ep: Any, built: Any) -> tuple[Exported, dict[str, Any]]:
        import torch

        opts: OrtOptions = recipe.options
        program = torch.onnx.export(ep, dynamo=True, opset_version=opts.opset, verbose=False, optimize=True)
        if program is None:
            raise RuntimeError("torch.onnx.export returned no program")
        directory, blob = _save(program)
        names = tuple(str(v.name) for v in program.model.graph.inputs)  # the IR's: no whole-model proto built again
        exported = Exported(program, blob, names, directory)
        return exported, _assignment(exported.path, opts, names, built.example)

    def serialize(self, recipe: Recipe, lowered: Exported) -> tuple[bytes, list[dict[str, Any]]]:
        return lowered.blob, []

    def load(self, recipe: Recipe, lowered: Exported, blob: bytes | None) -> Any:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        session = ort.InferenceSession(lowered.path, options, providers=list(recipe.options.providers))
        return session, lowered.input_names

    def run(self, handle: Any, inputs: tuple[Any, ...]) -> list[Any]:
        import torch

        session, names = handle
        feed = _feed(names, inputs)
        return [torch.from_numpy(o) for o in session.run(None, feed)]


def _save(program: Any) -> tuple[tempfile.TemporaryDirectory[str], bytes]:
    """The program saved as ONNX Runtime loads it, and its bytes. One ``ModelProto`` cannot pass protobuf's 2 GB
    (``SerializeToString`` raised EncodeError on XGLM's 564 M parameters), so torch's ``save`` moves a larger model's
    weights to a file beside the graph past its 1.5 GB threshold. The bytes are the graph's
    file, then the weights' file: what a user ships, so the program's size and hash cover both."""
    from harness.env import scratch_prefix

    directory = tempfile.TemporaryDirectory(prefix=scratch_prefix())  # a dead worker's is removed by the pool
    program.save(os.path.join(directory.name, MODEL_FILE))
    files = sorted(os.listdir(directory.name), key=lambda f: (f != MODEL_FILE, f))
    return directory, b"".join(Path(directory.name, f).read_bytes() for f in files)


def _feed(names: tuple[str, ...], inputs: tuple[Any, ...]) -> dict[str, Any]:
    import numpy as np
    import torch

    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    if len(tensors) != len(names):
        raise RuntimeError(f"the ONNX graph takes {len(names)} input(s), the case gives {len(tensors)} tensor(s)")
    return {n: (t.detach().contiguous().numpy() if t.dtype != torch.bfloat16 else t.float().numpy().astype(np.float32))
            for n, t in zip(names, tensors, strict=True)}


def _assignment(path: str, opts: OrtOptions, names: tuple[str, ...], example: tuple[Any, ...]) -> dict[str, Any]:
    """Nodes per execution provider, from ONNX Runtime's profile of one run on the example inputs."""
    import onnxruntime as ort

    with tempfile.TemporaryDirectory(prefix="bti-ort-") as tmp:
        options = ort.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(tmp, "profile")
        options.intra_op_num_threads = 1
        session = ort.InferenceSession(path, options, providers=list(opts.providers))
        session.run(None, _feed(names, example))
        with open(session.end_profiling()) as fh:
            events = json.load(fh)
    per_ep: Counter[str] = Counter()
    ops: dict[str, Counter[str]] = {}
    seen: set[str] = set()
    for ev in events:
        args = ev.get("args") or {}
        if ev.get("cat") != "Node" or "provider" not in args or not ev.get("name", "").endswith("_kernel_time"):
            continue
        node = ev["name"][: -len("_kernel_time")]
        if node in seen:
            continue
        seen.add(node)
        per_ep[args["provider"]] += 1
        ops.setdefault(args["provider"], Counter())[args.get("op_name", "?")] += 1
    preferred = opts.providers[0]
    delegated = per_ep[preferred] if preferred != FALLBACK_EP or len(opts.providers) == 1 else 0
    total = sum(per_ep.values())
    rest = Counter({op: n for ep, c in ops.items() if ep != preferred for op, n in c.items()})
    return {
        "partitioned": len(opts.providers) > 1 or preferred != FALLBACK_EP,
        "nodes_per_provider": dict(per_ep),
        "delegated_nodes": delegated, "undelegated_nodes": total - delegated, "total_nodes": total,
        "delegated_pct": round(100.0 * delegated / total, 2) if total else 100.0,
        "delegated_ops": dict(sorted((ops.get(preferred) or Counter()).items())),
        "undelegated_ops": dict(sorted(rest.items())),
    }
