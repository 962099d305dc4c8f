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
import io
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from harness.env import peak_rss_mb, rss_mb
from harness.errors import UserError, first_line
from harness.judge import compare, to_numpy
from harness.metrics import latency_stats
from harness.providers import SCALAR_TYPES as _SCALAR_TYPES


@contextlib.contextmanager
def _runtime_log(into: list[str]) -> Iterator[None]:
    """Hold back what the C++ runtime writes to stderr (CPU probing, load diagnostics) so an error stays
    one line; the lines are appended to ``into`` for the error message. Both ways it writes are held: to file
    descriptor 2, and through ``sys.stderr`` (the pybindings redirect C++ streams there, which need not be fd 2)."""
    saved = os.dup(2)
    text = io.StringIO()
    with tempfile.TemporaryFile() as tmp, contextlib.redirect_stderr(text):
        os.dup2(tmp.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            lines = tmp.read().decode(errors="replace").splitlines() + text.getvalue().splitlines()
            into.extend(x for x in lines if x.strip())


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


@dataclass
class Subject:
    """One program under bench: its bytes, the test cases a bundle brings, and (pybind) its loaded method."""

    path: Path
    buf: bytes
    kind: str
    program_bytes: bytes
    cases: list[tuple[list[Any], list[Any]]]
    card: dict[str, Any]
    program: Any = None
    method: Any = None
    load_ms: float = 0.0
    memory: dict[str, float] | None = None
    samples: list[float] | None = None
    outputs: list[Any] | None = None


def _subject(path: Path, method: str, reference: Path | None) -> Subject:
    from harness.providers import bundled_cases

    try:
        buf = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror or exc}") from None
    kind = _kind(buf, path)
    if kind == "bpte" and reference is not None:
        raise UserError("--reference is for a .pte; a .bpte carries its own expected outputs")
    cases: list[tuple[list[Any], list[Any]]] = []
    program_bytes = buf
    card: dict[str, Any] = {}
    if kind == "bpte":
        try:
            program_bytes, cases = bundled_cases(buf, method)
        except ValueError as exc:
            raise UserError(f"{path} {exc}" if str(exc).startswith("bundles") else f"{path} is {exc}") from None
        card_path = path.with_name(path.name + ".json")
        if card_path.is_file():
            import json

            try:
                loaded = json.loads(card_path.read_text(encoding="utf-8"))
                card = loaded if isinstance(loaded, dict) else {}
            except (OSError, ValueError, UnicodeDecodeError):
                card = {}
    return Subject(path, buf, kind, program_bytes, cases, card)


def criteria(tol: dict[str, float | None], recipe: str | None, subject: Subject) -> tuple[dict[str, float], str]:
    """The accuracy criteria and where they came from: the options given, else ``--recipe``'s
    tolerance, else the bundle card's (the tolerance the item was judged by in ``bti run``), else 1e-3."""
    given = {k: float(v) for k, v in tol.items() if v is not None}
    if given:
        return given, "command line"
    if recipe:
        from harness.errors import RecipeError
        from harness.recipes import load_recipe

        try:
            r = load_recipe(recipe)
        except RecipeError as exc:
            raise UserError(f"--recipe: {exc.one_line()}") from None
        dtype = "float32"
        if subject.cases and hasattr(subject.cases[0][1][0], "dtype"):
            dtype = str(subject.cases[0][1][0].dtype).replace("torch.", "")
        return r.tolerance(dtype), f"recipe {r.name}"
    if isinstance(subject.card.get("tolerance"), dict):
        return {k: float(v) for k, v in subject.card["tolerance"].items() if k in ("atol", "rtol", "sqnr_db", "cosine")}, \
            "bundle card"
    return {"atol": 1e-3, "rtol": 1e-3}, "default"


def _stats(samples: list[float], warmup: int) -> dict[str, Any]:
    arr = np.asarray(samples)
    std = float(arr.std())
    mean = float(arr.mean())
    return {**latency_stats(samples), "p99": float(np.percentile(arr, 99)), "mean": mean, "std": std,
            "cv": round(std / mean, 4) if mean else 0.0, "repeats": len(samples), "warmup": warmup}


def _inputs_for(subject: Subject, seed: int, method: str) -> list[Any]:
    if subject.cases:
        return subject.cases[0][0]
    if subject.method is not None:
        return _generated_inputs(subject.method.metadata, seed, subject.path)
    program, loaded, _ = _load(subject.program_bytes, subject.path, method)  # one-line errors for a bad program
    inputs = _generated_inputs(loaded.metadata, seed, subject.path)
    del loaded, program  # the method first: the program must outlive it
    return inputs


def _signature(values: list[Any]) -> list[tuple[Any, ...]]:
    return [(tuple(v.shape), str(v.dtype)) if hasattr(v, "shape") else (type(v).__name__,) for v in values]


def _preflight(subjects: list[Subject], inputs: list[Any], method: str) -> None:
    """Run each program once in a forked child first: a program the runtime aborts on (a corrupt bundle the
    Python reader accepted) is one line and exit 2, never the end of bti."""
    from harness.providers import ProviderError, PybindProvider, run_forked

    for sub in subjects:
        case_inputs = [c[0] for c in sub.cases] or [inputs]

        def once(sub: Subject = sub, case_inputs: list[list[Any]] = case_inputs) -> int:
            handle = PybindProvider.load(sub.program_bytes, method)
            for x in case_inputs:
                PybindProvider.run(handle, x)
            return 0

        try:
            run_forked(once)
        except ProviderError as exc:
            raise UserError(f"{sub.path}: the runtime cannot run this program: {first_line(str(exc))}") from None


def bench(path: Path, *, method: str = "forward", warmup: int = 3, repeats: int = 20, seed: int = 0,
          reference: Path | None = None, tol: dict[str, float | None] | None = None, recipe: str | None = None,
          runtime: Any = None, threads: int | None = None, other: Path | None = None,
          progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Measure one program (or two, A/B, interleaved on the same inputs); returns a JSON-ready dict
    (``ok`` is False when an accuracy check failed)."""
    from harness.versions import check_stack

    for warning in check_stack().warnings:  # a broken install: one line, exit 2
        print(f"bti: warning: {warning}", file=sys.stderr)
    from harness.providers import ProviderSpec

    spec = runtime or ProviderSpec()
    subjects = [_subject(path, method, reference)]
    if other is not None:
        if reference is not None:
            raise UserError("--reference is for one program; an A/B bench compares the two programs' outputs")
        subjects.append(_subject(other, method, None))
    run = _Runner(spec, method, threads)
    run.load(subjects)
    inputs = _bench_inputs(subjects, seed, method)
    if run.in_process:
        _preflight(subjects, inputs, method)
    run.measure(subjects, inputs, warmup, repeats, progress)
    results = [_one(sub, method, warmup, inputs) for sub in subjects]
    first = results[0]
    first["runtime"] = spec.kind
    for sub, res in zip(subjects, results, strict=True):
        _check_accuracy(run, sub, res, tol or {}, recipe, reference if sub is subjects[0] else None, inputs)
    if len(subjects) == 2:
        _ab(first, results[1], subjects, tol or {}, recipe)
    for sub in subjects:
        sub.method = None  # the method is released first: the program must outlive it (EXECUTORCH-NOTES)
        sub.program = None
    return first


class _Runner:
    """Where the programs run: in this process (pybind), or a subprocess per call through a runtime provider."""

    def __init__(self, spec: Any, method: str, threads: int | None) -> None:
        self.spec, self.method, self.threads = spec, method, threads
        self.in_process = spec.kind == "pybind"
        self.provider: Any = None if self.in_process else spec.build()

    def load(self, subjects: list[Subject]) -> None:
        import torch
        from executorch.runtime import Runtime

        from harness.providers import PybindProvider

        torch.set_num_threads(1)
        with _runtime_log([]):
            Runtime.get()  # runtime initialisation is not the program's memory
        if not self.in_process:
            if self.method != "forward":
                raise UserError(f"--runtime {self.spec.kind}: runners run `forward` only, not {self.method!r}")
            return
        with _runtime_log([]):  # the thread pool's CPU probing, printed once per process, is not an error's business
            PybindProvider.set_threads(self.threads)
        for sub in subjects:
            rss_start = rss_mb()
            sub.program, sub.method, sub.load_ms = _load(sub.program_bytes, sub.path, self.method)
            sub.memory = {"rss_start": round(rss_start, 1), "load_growth": round(rss_mb() - rss_start, 1)}

    def measure(self, subjects: list[Subject], inputs: list[Any], warmup: int, repeats: int,
                progress: Callable[[int], None] | None) -> None:
        """Every subject's latencies and last outputs, interleaved so the machine's drift hits A and B alike."""
        from harness.providers import ProviderError

        for sub in subjects:
            sub.samples = []
        log: list[str] = []
        running: list[Subject] = []
        try:
            if self.in_process:
                self._in_process(subjects, inputs, warmup, repeats, progress, log, running)
            else:
                self._through_provider(subjects, inputs, warmup, repeats, progress, running)
        except (ProviderError, RuntimeError) as exc:
            where = running[-1].path if running else subjects[0].path
            raise UserError(f"{where}: running {self.method!r} failed: {_why(exc, log)}") from None

    def _in_process(self, subjects: list[Subject], inputs: list[Any], warmup: int, repeats: int,
                    progress: Callable[[int], None] | None, log: list[str], running: list[Subject]) -> None:
        for i in range(warmup + repeats):  # call by call: A, B, A, B ...
            for sub in subjects:
                running.append(sub)
                with _runtime_log(log):
                    t0 = time.perf_counter()
                    out = sub.method.execute(inputs)
                    dt = (time.perf_counter() - t0) * 1000.0
                if i >= warmup:
                    sub.samples.append(dt)  # type: ignore[union-attr]
                sub.outputs = list(out)
            if progress is not None:
                progress(1)

    def _through_provider(self, subjects: list[Subject], inputs: list[Any], warmup: int, repeats: int,
                          progress: Callable[[int], None] | None, running: list[Subject]) -> None:
        from harness.providers import RunOptions

        rounds = max(1, min(repeats, 5))  # a subprocess per call: interleaved in rounds, each loading once
        per = [repeats // rounds + (1 if r < repeats % rounds else 0) for r in range(rounds)]
        for r, n in enumerate(per):
            for sub in subjects:
                running.append(sub)
                ex = self.provider.execute(sub.program_bytes, "pte", inputs, RunOptions(warmup if r == 0 else 0, n, self.threads))
                sub.samples.extend(ex.latencies_ms)  # type: ignore[union-attr]
                sub.outputs = ex.outputs
                if r == 0:
                    sub.load_ms, sub.memory = ex.load_ms, dict(ex.memory_mb)
            if progress is not None:
                progress(n + (warmup if r == 0 else 0))

    def outputs(self, sub: Subject, inputs: list[Any]) -> list[Any]:
        """One untimed run of ``sub`` on ``inputs`` (a bundled test case)."""
        from harness.providers import RunOptions

        if self.in_process:
            return list(sub.method.execute(inputs))
        return list(self.provider.execute(sub.program_bytes, "pte", inputs, RunOptions(0, 1, self.threads)).outputs)


def _bench_inputs(subjects: list[Subject], seed: int, method: str) -> list[Any]:
    """The inputs every subject runs on: A's (B's bundled ones when only B brings cases); A and B must agree."""
    inputs = _inputs_for(subjects[0], seed, method)
    if len(subjects) == 2:
        if subjects[1].cases and not subjects[0].cases:
            inputs = subjects[1].cases[0][0]
        other_inputs = _inputs_for(subjects[1], seed, method)
        if _signature(other_inputs) != _signature(inputs):
            raise UserError(f"A and B take different inputs ({_signature(inputs)} vs {_signature(other_inputs)}): "
                            "an A/B bench compares two programs of the same case")
    return inputs


def _check_accuracy(run: _Runner, sub: Subject, res: dict[str, Any], tol: dict[str, float | None], recipe: str | None,
                    reference: Path | None, inputs: list[Any]) -> None:
    """``sub``'s bundled cases (or, for a .pte, the ``--reference`` program's outputs), by its own criteria."""
    crit, source = criteria(tol, recipe, sub)  # each program by its own criteria (its own card)
    checks: list[dict[str, Any]] = []
    for idx, (case_inputs, expected) in enumerate(sub.cases or []):
        verdict = compare([to_numpy(v) for v in run.outputs(sub, case_inputs)], [to_numpy(v) for v in expected], crit)
        entry: dict[str, Any] = {"case": idx, "ok": verdict.ok, "message": verdict.message, "outputs": verdict.stats}
        if run.in_process and ("atol" in crit or "rtol" in crit):  # the runtime's own check takes atol/rtol only
            entry["runtime_verified"] = _runtime_verify(sub.buf, run.method, idx, crit.get("rtol", 0.0), crit.get("atol", 0.0))
        checks.append(entry)
    if not sub.cases and reference is not None:
        verdict = compare([to_numpy(v) for v in sub.outputs or []], [to_numpy(v) for v in _reference_outputs(reference, inputs)], crit)
        checks.append({"case": 0, "ok": verdict.ok, "message": verdict.message, "outputs": verdict.stats})
    if checks:
        res["accuracy"] = {**crit, "criteria": crit, "from": source, "cases": checks}
        res["ok"] = all(c["ok"] and c.get("runtime_verified", True) for c in checks)


def _ab(first: dict[str, Any], second: dict[str, Any], subjects: list[Subject], tol: dict[str, float | None],
        recipe: str | None) -> None:
    """A vs B: the latency ratio with its interval, and how far B's outputs agree with A's, by the criteria given,
    else B's (the candidate: an int8 B is held to its SQNR floor, not to the fp32 A's atol)."""
    a, b = subjects
    crit, _ = criteria(tol, recipe, b)
    agreement = compare([to_numpy(v) for v in b.outputs or []], [to_numpy(v) for v in a.outputs or []], crit)
    ratio, lo, hi = ratio_ci(a.samples or [], b.samples or [])
    first["ab"] = {"b": second, "ratio_b_over_a": ratio, "ci95": [lo, hi],
                   "agreement": {"ok": agreement.ok, "message": agreement.message, "criteria": crit,
                                 "outputs": agreement.stats}}
    first["ok_a"] = first["ok"]
    first["ok"] = first["ok"] and second["ok"] and agreement.ok


def _one(sub: Subject, method: str, warmup: int, inputs: list[Any]) -> dict[str, Any]:
    import torch

    mem = dict(sub.memory or {})
    mem["peak_rss"] = mem.get("peak_rss") or round(peak_rss_mb(), 1)
    if "rss_start" in mem:
        mem["run_growth"] = round(rss_mb() - mem["rss_start"] - mem.get("load_growth", 0.0), 1)
    return {"file": str(sub.path), "kind": sub.kind, "method": method, "bytes": len(sub.buf),
            "program_bytes": len(sub.program_bytes), "load_ms": round(sub.load_ms, 3),
            "latency_ms": _stats(sub.samples or [0.0], warmup), "memory_mb": mem,
            "inputs": [list(t.shape) if isinstance(t, torch.Tensor) else t for t in inputs], "ok": True}


def ratio_ci(a: list[float], b: list[float], seed: int = 0, resamples: int = 2000) -> tuple[float, float, float]:
    """median(B) / median(A) and its 95 % bootstrap interval (numpy, seeded: the same samples give the same
    interval)."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if not len(xa) or not len(xb) or float(np.median(xa)) == 0.0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    ra = np.median(xa[rng.integers(0, len(xa), (resamples, len(xa)))], axis=1)
    rb = np.median(xb[rng.integers(0, len(xb), (resamples, len(xb)))], axis=1)
    ratios = rb / np.where(ra == 0, np.nan, ra)
    lo, hi = np.nanpercentile(ratios, [2.5, 97.5])
    return round(float(np.median(xb) / np.median(xa)), 4), round(float(lo), 4), round(float(hi), 4)


def _runtime_verify(buf: bytes, method: str, idx: int, rtol: float, atol: float) -> bool:
    """The runtime's own bundled check (only reached once the bundle and its program have loaded)."""
    from executorch.extension.pybindings.portable_lib import _load_bundled_program_from_buffer

    try:
        with _runtime_log([]):  # the runtime prints its own mismatch line; the verdict says it
            bundle = _load_bundled_program_from_buffer(buf)
            bundle.verify_result_with_bundled_expected_output(method, idx, rtol, atol)
    except RuntimeError:
        return False
    return True


def _g(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{float(value):.{digits}g}"


def _lines(result: dict[str, Any], label: str = "") -> list[str]:
    lat, mem = result["latency_ms"], result["memory_mb"]
    lines = [
        f"{label}{result['file']} ({result['kind']}, {result['bytes']:,} bytes), method {result['method']}",
        f"  load      {result['load_ms']:.3f} ms",
        f"  latency   median {lat['median']:.4f} ms  p90 {lat['p90']:.4f}  p99 {lat['p99']:.4f}  min {lat['min']:.4f}  "
        f"std {lat['std']:.4f}  CV {lat['cv']:.1%}  ({lat['repeats']} runs after {lat['warmup']} warm-up)",
        (f"  memory    RSS +{mem.get('load_growth', 0.0):.1f} MiB on load, +{mem.get('run_growth', 0.0):.1f} MiB running; "
         f"peak {mem.get('peak_rss', 0.0):.0f} MiB") if "load_growth" in mem else
        f"  memory    peak {mem.get('peak_rss', 0.0):.0f} MiB (the runner process's own)",
    ]
    if lat["cv"] > 0.1:
        lines.append(f"  note      CV {lat['cv']:.0%} > 10 %: noisy; pin the process (taskset), raise --warmup/--repeats")
    acc = result.get("accuracy")
    if acc:
        crit = ", ".join(f"{k} {v:g}" for k, v in acc["criteria"].items())
        lines.append(f"  criteria  {crit} (from {acc['from']})")
        for c in acc["cases"]:
            worst: dict[str, Any] = max(c["outputs"], key=lambda s: float(s.get("max_abs", 0) or 0), default={})
            verified = "" if "runtime_verified" not in c else f"; runtime check {'passed' if c['runtime_verified'] else 'FAILED'}"
            lines.append(f"  case {c['case']}    {'ok' if c['ok'] else 'MISMATCH'}: max_abs {_g(worst.get('max_abs'))}, "
                         f"sqnr {_g(worst.get('sqnr_db'), 4)} dB, cosine {_g(worst.get('cosine'), 6)}{verified}"
                         + ("" if c["ok"] else f" ({c['message'][:200]})"))
    elif not label or label.startswith("A"):
        lines.append("  accuracy  not checked (give --reference, or bench a .bpte)")
    return lines


def render(result: dict[str, Any]) -> str:
    ab = result.get("ab")
    lines = _lines(result, "A: " if ab else "")
    if ab:
        lines += _lines(ab["b"], "B: ")
        agree = ab["agreement"]
        worst: dict[str, Any] = min(agree["outputs"], key=lambda s: float(s.get("sqnr_db", 0) or 0), default={})
        lines += [f"B/A       latency ratio {ab['ratio_b_over_a']:.3f} (95% CI {ab['ci95'][0]:.3f}–{ab['ci95'][1]:.3f}, "
                  f"bootstrap of medians, runs interleaved)",
                  f"A vs B    outputs {'agree' if agree['ok'] else 'DIFFER'}: max_abs {_g(worst.get('max_abs'))}, "
                  f"sqnr {_g(worst.get('sqnr_db'), 4)} dB, cosine {_g(worst.get('cosine'), 6)}"
                  + ("" if agree["ok"] else f" ({agree['message'][:200]})")]
    return "\n".join(lines)


def markdown(result: dict[str, Any]) -> str:
    """The bench as a Markdown table (drops into a job summary or a PR comment)."""
    from harness.report.safe import code

    rows = [result] + ([result["ab"]["b"]] if result.get("ab") else [])
    out = ["| program | kind | load ms | median ms | p90 | p99 | min | CV | accuracy |", "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        lat = r["latency_ms"]
        acc = r.get("accuracy")
        ok = r.get("ok_a", r["ok"])
        verdict = "not checked" if not acc else ("ok" if ok else "MISMATCH")
        out.append(f"| {code(Path(r['file']).name)} | {r['kind']} | {r['load_ms']:.3f} | {lat['median']:.4f} | "
                   f"{lat['p90']:.4f} | {lat['p99']:.4f} | {lat['min']:.4f} | {lat['cv']:.1%} | {verdict} |")
    ab = result.get("ab")
    if ab:
        out.append("")
        out.append(f"B/A latency ratio **{ab['ratio_b_over_a']:.3f}** (95% CI {ab['ci95'][0]:.3f}–{ab['ci95'][1]:.3f}); "
                   f"outputs {'agree' if ab['agreement']['ok'] else 'differ'}.")
    return "\n".join(out) + "\n"
