"""``bti bench``: load time, latency, memory and accuracy of one ExecuTorch program on this machine's runtime.

Takes a ``.pte`` (inputs generated from the method's metadata, seeded; accuracy against an optional
``--reference`` exported program saved with ``torch.export.save``) or a bundled program ``.bpte``
(its own inputs and expected outputs — what ``bti run --bundle`` writes — checked both by bti's
metrics and by the runtime's own ``verify_result_with_bundled_expected_output``, the check a device
would run). The file kind comes from the flatbuffer identifier, not the extension. Every input
problem (missing, truncated or foreign file, a method that does not exist, a reference that does
not load) is a ``UserError``: one line, exit 2. Nothing is handed to the runtime's bundled-program
loader before the Python deserializer and ``Runtime.load_program`` have accepted it (the loader
crashes the process on garbage).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from harness.env import peak_rss_mb, rss_mb
from harness.errors import UserError, first_line
from harness.metrics import compare, latency_stats, timed_calls

# ExecuTorch ScalarType codes (executorch/exir/scalar_type.py) -> torch dtype names, for bundled tensors.
_SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32", 7: "float64",
                 11: "bool", 15: "bfloat16"}


@contextlib.contextmanager
def _runtime_log(into: list[str]) -> Iterator[None]:
    """Hold back what the C++ runtime writes to stderr (CPU probing, load diagnostics) so an error stays
    one line; the lines are appended to ``into`` for the error message."""
    saved = os.dup(2)
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            into.extend(x for x in tmp.read().decode(errors="replace").splitlines() if x.strip())


def _why(exc: BaseException, log: list[str]) -> str:
    """The exception's first line, plus the runtime's last diagnostic (not its CPU-probing chatter)."""
    text = first_line(str(exc)) or type(exc).__name__
    useful = [x for x in log if "cpuinfo" not in x]
    return f"{text} ({useful[-1].split('] ', 1)[-1][:200]})" if useful else text


def _kind(buf: bytes, path: Path) -> str:
    ident = buf[4:8]
    if ident.startswith(b"ET"):
        return "pte"
    if ident.startswith(b"BP"):
        return "bpte"
    raise UserError(f"{path} is neither an ExecuTorch program (.pte) nor a bundled program (.bpte): "
                    f"file identifier {ident!r}")


def _tensor(value: Any, path: Path) -> Any:
    import torch

    if hasattr(value, "scalar_type"):  # a bundled Tensor
        name = _SCALAR_TYPES.get(int(value.scalar_type))
        if name is None:
            raise UserError(f"{path}: bundled tensor of unsupported scalar type {value.scalar_type}")
        dtype = getattr(torch, name)
        flat = torch.frombuffer(bytearray(value.data), dtype=dtype) if value.data else torch.empty(0, dtype=dtype)
        return flat.reshape(list(value.sizes)).clone()
    if hasattr(value, "int_val"):
        return int(value.int_val)
    if hasattr(value, "double_val"):
        return float(value.double_val)
    if hasattr(value, "bool_val"):
        return bool(value.bool_val)
    raise UserError(f"{path}: bundled value of unsupported kind {type(value).__name__}")


def _bundled_cases(buf: bytes, path: Path, method: str) -> tuple[bytes, list[tuple[list[Any], list[Any]]]]:
    from executorch.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program

    try:
        schema = deserialize_from_flatbuffer_to_bundled_program(buf)
    except Exception:
        raise UserError(f"{path} is not a readable bundled program (truncated or corrupt)") from None
    suites = {s.method_name: s for s in schema.method_test_suites}
    if not suites or not all(suites) or not schema.program:
        raise UserError(f"{path} is not a readable bundled program (no program or no test suites: truncated or corrupt)")
    if method not in suites:
        raise UserError(f"{path} bundles no test cases for method {method!r} (it has: {', '.join(sorted(suites)) or 'none'})")
    cases = [([_tensor(v.val, path) for v in tc.inputs], [_tensor(v.val, path) for v in tc.expected_outputs])
             for tc in suites[method].test_cases]
    if not cases:
        raise UserError(f"{path} bundles an empty test suite for method {method!r}")
    return bytes(schema.program), cases


def _generated_inputs(meta: Any, seed: int, path: Path) -> list[Any]:
    import torch

    gen = torch.Generator().manual_seed(seed)
    inputs = []
    for i in range(meta.num_inputs()):
        try:
            info = meta.input_tensor_meta(i)
        except Exception:
            raise UserError(f"{path}: input {i} of {meta.name()!r} is not a tensor; bench needs a .bpte to know it") from None
        sizes, dtype = list(info.sizes()), getattr(torch, _SCALAR_TYPES.get(int(info.dtype()), "float32"))
        if dtype.is_floating_point:
            inputs.append(torch.randn(sizes, generator=gen).to(dtype))
        elif dtype == torch.bool:
            inputs.append(torch.randint(0, 2, sizes, generator=gen).bool())
        else:
            inputs.append(torch.randint(0, 10, sizes, generator=gen).to(dtype))
    return inputs


def _load(program_bytes: bytes, path: Path, method: str) -> tuple[Any, Any, float]:
    from executorch.runtime import Runtime

    log: list[str] = []
    with _runtime_log(log):
        runtime = Runtime.get()
    log.clear()
    t0 = time.perf_counter()
    try:
        with _runtime_log(log):
            program = runtime.load_program(program_bytes)
    except Exception as exc:
        raise UserError(f"{path}: the runtime cannot load this program: {_why(exc, log)}") from None
    if method not in program.method_names:
        raise UserError(f"{path} has no method {method!r} (it has: {', '.join(sorted(program.method_names))})")
    try:
        with _runtime_log(log):
            loaded = program.load_method(method)
    except Exception as exc:
        raise UserError(f"{path}: cannot load method {method!r}: {_why(exc, log)}") from None
    return program, loaded, (time.perf_counter() - t0) * 1000.0


def _reference_outputs(reference: Path, inputs: list[Any]) -> list[Any]:
    import torch
    import torch.utils._pytree as pytree

    try:
        ep = torch.export.load(str(reference))
    except Exception as exc:
        raise UserError(f"--reference {reference}: not a program saved with torch.export.save ({type(exc).__name__})") from None
    with torch.no_grad():
        out = ep.module()(*inputs)
    return [x for x in pytree.tree_leaves(out) if isinstance(x, torch.Tensor)]


def _np(values: list[Any]) -> list[np.ndarray]:
    import torch

    return [v.detach().to(torch.float64).numpy() if isinstance(v, torch.Tensor) and v.is_floating_point()
            else np.asarray(v.detach().numpy() if isinstance(v, torch.Tensor) else v) for v in values]


def bench(path: Path, *, method: str = "forward", warmup: int = 3, repeats: int = 20, seed: int = 0,
          reference: Path | None = None, rtol: float = 1e-3, atol: float = 1e-3) -> dict[str, Any]:
    """Measure one program; returns a JSON-ready dict (``ok`` is False when an accuracy check failed)."""
    import torch

    try:
        buf = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    kind = _kind(buf, path)
    if kind == "bpte" and reference is not None:
        raise UserError("--reference is for a .pte; a .bpte carries its own expected outputs")
    torch.set_num_threads(1)
    from executorch.runtime import Runtime

    with _runtime_log([]):
        Runtime.get()  # runtime initialisation is not the program's memory
    cases: list[tuple[list[Any], list[Any]]] = []
    program_bytes = buf
    if kind == "bpte":
        program_bytes, cases = _bundled_cases(buf, path, method)
    rss_start = rss_mb()
    program, loaded, load_ms = _load(program_bytes, path, method)
    rss_loaded = rss_mb()
    inputs = cases[0][0] if cases else _generated_inputs(loaded.metadata, seed, path)
    log: list[str] = []
    try:
        with _runtime_log(log):
            raw, samples = timed_calls(lambda: loaded.execute(inputs), warmup, repeats)
        outputs = list(raw)
    except Exception as exc:
        raise UserError(f"{path}: running {method!r} failed: {_why(exc, log)}") from None
    arr = np.asarray(samples)
    result: dict[str, Any] = {
        "file": str(path), "kind": kind, "method": method, "bytes": len(buf), "program_bytes": len(program_bytes),
        "load_ms": round(load_ms, 3),
        "latency_ms": {**latency_stats(samples), "mean": float(arr.mean()), "std": float(arr.std()),
                       "repeats": len(samples), "warmup": warmup},
        "memory_mb": {"rss_start": round(rss_start, 1), "load_growth": round(rss_loaded - rss_start, 1),
                      "run_growth": round(rss_mb() - rss_loaded, 1),
                      "peak_rss": round(peak_rss_mb(), 1)},
        "inputs": [list(t.shape) if isinstance(t, torch.Tensor) else t for t in inputs],
        "ok": True,
    }
    tol = {"rtol": rtol, "atol": atol}
    checks: list[dict[str, Any]] = []
    if cases:
        for idx, (case_inputs, expected) in enumerate(cases):
            got = list(loaded.execute(case_inputs))
            verdict = compare(_np(got), _np(expected), tol)
            checks.append({"case": idx, "ok": verdict.ok, "message": verdict.message, "outputs": verdict.stats,
                           "runtime_verified": _runtime_verify(buf, method, idx, rtol, atol)})
    elif reference is not None:
        verdict = compare(_np(outputs), _np(_reference_outputs(reference, inputs)), tol)
        checks.append({"case": 0, "ok": verdict.ok, "message": verdict.message, "outputs": verdict.stats})
    if checks:
        result["accuracy"] = {"rtol": rtol, "atol": atol, "cases": checks}
        result["ok"] = all(c["ok"] and c.get("runtime_verified", True) for c in checks)
    loaded = None  # the method is released first: the program must outlive it (EXECUTORCH-NOTES)
    del program
    return result


def _runtime_verify(buf: bytes, method: str, idx: int, rtol: float, atol: float) -> bool:
    """The runtime's own bundled check (only reached once the bundle and its program have loaded)."""
    from executorch.extension.pybindings.portable_lib import _load_bundled_program_from_buffer

    bundle = _load_bundled_program_from_buffer(buf)
    try:
        bundle.verify_result_with_bundled_expected_output(method, idx, rtol, atol)
    except RuntimeError:
        return False
    return True


def _g(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{float(value):.{digits}g}"


def render(result: dict[str, Any]) -> str:
    lat, mem = result["latency_ms"], result["memory_mb"]
    lines = [
        f"{result['file']} ({result['kind']}, {result['bytes']:,} bytes), method {result['method']}",
        f"  load      {result['load_ms']:.3f} ms",
        f"  latency   median {lat['median']:.4f} ms  p90 {lat['p90']:.4f}  min {lat['min']:.4f}  "
        f"({lat['repeats']} runs after {lat['warmup']} warm-up)",
        f"  memory    RSS +{mem['load_growth']:.1f} MiB on load, +{mem['run_growth']:.1f} MiB running; peak {mem['peak_rss']:.0f} MiB",
    ]
    acc = result.get("accuracy")
    if acc:
        for c in acc["cases"]:
            worst: dict[str, Any] = max(c["outputs"], key=lambda s: float(s.get("max_abs", 0) or 0), default={})
            verified = "" if "runtime_verified" not in c else f"; runtime check {'passed' if c['runtime_verified'] else 'FAILED'}"
            lines.append(f"  case {c['case']}    {'ok' if c['ok'] else 'MISMATCH'}: max_abs {_g(worst.get('max_abs'))}, "
                         f"sqnr {_g(worst.get('sqnr_db'), 4)} dB, cosine {_g(worst.get('cosine'), 6)}{verified}"
                         + ("" if c["ok"] else f" ({c['message'][:200]})"))
    else:
        lines.append("  accuracy  not checked (give --reference, or bench a .bpte)")
    return "\n".join(lines)
