"""``bti verify``: run bundled programs (``.bpte``) through a runtime provider and judge them.

Each bundle carries its inputs and the eager reference outputs; ``bti run --bundle`` writes a card
beside it (``<name>.bpte.json``: the item's id, recipe and the tolerance it was held to). The
tolerance comes from, in order: ``--atol/--rtol/--sqnr-db/--cosine`` given here, the card, the
record of the same bundle in ``--results`` (a ``results.jsonl`` whose ``artifacts.bpte`` names it;
by default the one beside the ``programs/`` directory), and last the float32 default with a note.
The output is the normal results JSONL, so every report and publisher works on device results.

Every bundle is read and checked in Python before any runs (a truncated or flipped bundle would
crash the runtime's own loader): a corrupt one is one line and exit 2, and nothing has run.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.errors import UserError
from harness.judge import Comparison, compare, device_tolerance, to_numpy
from harness.metrics import latency_stats
from harness.providers import ProviderError, ProviderSpec, RunOptions, bundled_cases, check_program
from harness.results import SCHEMA, Header, Record, ResultsWriter, iter_lines
from harness.status import Stage, Status
from harness.verdict import Outcome, StageOutcome, decide_bundle

DEFAULT_TOL = {"atol": 1e-4, "rtol": 1e-4}


@dataclass
class Bundle:
    path: Path
    data: bytes
    expected: list[Any]
    card: dict[str, Any]
    tolerance: dict[str, Any]
    tolerance_from: str


def find_bundles(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for p in paths:
        if p.is_dir():
            found.extend(sorted(p.rglob("*.bpte")))
        elif p.exists():
            found.append(p)
        else:
            raise UserError(f"{p}: no such file or directory")
    if not found:
        raise UserError(f"no .bpte bundles in {', '.join(map(str, paths))}", hint="write them with `bti run --bundle`")
    return found


def _results_tolerances(results: Path | None, bundles: list[Path]) -> dict[str, dict[str, Any]]:
    """bundle file name -> the record that made it (from a results.jsonl)."""
    candidates = [results] if results else sorted({b.parent.parent / "results.jsonl" for b in bundles})
    out: dict[str, dict[str, Any]] = {}
    for path in candidates:
        if path is None or not path.is_file():
            if results is not None:
                raise UserError(f"--results {results}: not a results file")
            continue
        for _, obj in iter_lines(path):
            bpte = (obj.get("artifacts") or {}).get("bpte") if obj.get("kind") == "result" else None
            if bpte:
                out[Path(bpte).name] = obj
    return out


def _tolerance(value: Any, where: str) -> dict[str, Any]:
    """A tolerance from a card or a results record, checked like a recipe's: known keys, numbers, atol and
    rtol not negative (a bad one is one line, exit 2)."""
    import math

    from harness.recipes import TOLERANCE_KEYS

    if not isinstance(value, dict) or not value or set(value) - {*TOLERANCE_KEYS, "shape_only"}:
        raise UserError(f"{where}: tolerance must map {', '.join(TOLERANCE_KEYS)} to numbers, not {str(value)[:80]}")
    out: dict[str, Any] = {}
    for k, v in value.items():
        if k == "shape_only":
            out[k] = bool(v)
            continue
        try:
            num = float(v)
        except (TypeError, ValueError):
            raise UserError(f"{where}: tolerance {k} is not a number: {str(v)[:40]}") from None
        if math.isnan(num) or (k in ("atol", "rtol") and num < 0):
            raise UserError(f"{where}: tolerance {k} = {v} is not a usable bound")
        out[k] = num
    return out


CARD_TYPES = {"id": str, "case": str, "suite": str, "recipe": str, "backend": str, "axes": dict, "tags": list,
              "status": str, "xfail": dict}


def load_bundles(paths: list[Path], results: Path | None, override: dict[str, float]) -> list[Bundle]:
    files = find_bundles(paths)
    from_results = _results_tolerances(results, files)
    bundles = []
    uncarded: list[str] = []
    for f in files:
        try:
            data = f.read_bytes()
        except OSError as exc:
            raise UserError(f"cannot read {f}: {exc.strerror or exc}") from None
        if data[4:6] != b"BP":
            raise UserError(f"{f} is not a bundled program (file identifier {data[4:8]!r}; bti verify takes .bpte)")
        try:
            program, cases = bundled_cases(data)
            check_program(program)
        except ValueError as exc:
            raise UserError(f"{f}: {exc}") from None
        card: dict[str, Any] = {}
        card_path = f.with_name(f.name + ".json")
        if card_path.is_file():
            try:
                card = json.loads(card_path.read_text(encoding="utf-8"))
            except (OSError, ValueError, UnicodeDecodeError):
                raise UserError(f"{card_path}: not a readable bundle card (JSON)") from None
            if not isinstance(card, dict):
                raise UserError(f"{card_path}: not a readable bundle card (a JSON object)")
            for key, kind in CARD_TYPES.items():
                if key in card and not isinstance(card[key], kind):
                    raise UserError(f"{card_path}: bundle card field {key!r} is not a {kind.__name__}")
        record = from_results.get(f.name)
        if override:
            tol, source = dict(override), "command line"
        elif card.get("tolerance") is not None:
            tol, source = _tolerance(card["tolerance"], str(card_path)), "bundle card"
        elif record is not None and record.get("tolerance") is not None:
            raw = record["tolerance"]  # what the item was judged by: the part a device run against eager outputs can use
            tol = _tolerance(device_tolerance(raw) if isinstance(raw, dict) else raw, f"{results or 'results.jsonl'} ({record.get('id')})")
            source = "results file"
        else:
            tol, source = dict(DEFAULT_TOL), "default (no card, no results record)"
            uncarded.append(f.name)
        if not card and record is not None:
            card = {k: record[k] for k in ("id", "case", "suite", "op", "tags", "recipe", "backend", "axes", "seed",
                                           "spec_hash", "status", "xfail") if k in record}
        bundles.append(Bundle(f, data, cases[0][1], card, tol, source))
    if uncarded:  # said once every bundle has been read (an error above stays the only line)
        import click

        click.echo(f"bti verify: {len(uncarded)} bundle(s) without a card or a results record ({', '.join(uncarded[:3])}"
                   f"{' …' if len(uncarded) > 3 else ''}): held to atol = rtol = 1e-4; a quantized program needs "
                   "--sqnr-db, or its card", err=True)
    return bundles


def verify_one(bundle: Bundle, spec: ProviderSpec, opts: RunOptions, run_id: str) -> Record:
    from harness.stages import error_info

    provider = spec.build(isolated=True)  # in process too, a runtime abort is this bundle's CRASH, not bti's end
    stem = bundle.path.name[:-5] if bundle.path.name.endswith(".bpte") else bundle.path.stem
    base: dict[str, Any] = {
        "id": bundle.card.get("id") or f"bundle.{stem}", "case": bundle.card.get("case") or f"bundle.{stem}",
        "suite": bundle.card.get("suite") or "bundles", "recipe": bundle.card.get("recipe") or "bundle",
        "backend": bundle.card.get("backend") or "executorch", "axes": bundle.card.get("axes") or {},
        "run_id": run_id, "attempt": 1,
        **{k: bundle.card[k] for k in ("op", "tags", "seed", "spec_hash") if k in bundle.card},
    }
    expected = bundle.card.get("xfail") if bundle.card.get("status") == Status.XFAIL.value else None
    stages: list[StageOutcome] = []
    facts: dict[str, Any] = {"runtime": provider.name, "artifacts": {"bpte": str(bundle.path),
                                                                     "tolerance_from": bundle.tolerance_from}}
    try:
        if provider.name == "pybind":
            from harness.bench import _runtime_log

            with _runtime_log([]):  # the in-process runtime's chatter (CPU probing) is not the verdict
                ex = provider.execute(bundle.data, "bpte", None, opts)
        else:
            ex = provider.execute(bundle.data, "bpte", None, opts)
    except (ProviderError, UserError, RuntimeError) as exc:  # the provider, or the in-process runtime, failed
        stages.append(StageOutcome(Stage.RUN, 0.0, error=error_info(exc)))
        return decide_bundle(base, Outcome(stages=tuple(stages), **facts), expected)
    stages.append(StageOutcome(Stage.LOAD, round(ex.load_ms / 1000.0, 6)))
    stages.append(StageOutcome(Stage.RUN, round(sum(ex.latencies_ms) / 1000.0, 6)))
    verdict = compare([to_numpy(v) for v in ex.outputs], [to_numpy(v) for v in bundle.expected], bundle.tolerance)
    lat = {k: round(v, 4) for k, v in latency_stats(ex.latencies_ms).items()}
    lat["repeats"] = len(ex.latencies_ms)
    return decide_bundle(base, Outcome(
        stages=tuple(stages), load_ms=round(ex.load_ms, 3), latency_ms=lat, memory_mb=ex.memory_mb or None,
        comparison=Comparison(verdict.ok, verdict.message, tuple(verdict.stats), bundle.tolerance), **facts), expected)


def header(bundles: list[Bundle], spec: ProviderSpec, run_id: str, argv: list[str]) -> Header:
    from harness.env import versions

    recipes: dict[str, str] = {}
    info: dict[str, dict[str, Any]] = {}
    for b in bundles:
        name = b.card.get("recipe") or "bundle"
        recipes[name] = str(b.card.get("recipe_hash") or hashlib.sha256(name.encode()).hexdigest()[:16])
        info[name] = {"backend": b.card.get("backend") or "executorch", "unavailable": None,
                      "description": f"bundles verified through the {spec.kind} runtime"}
    return {"kind": "header", "schema": SCHEMA, "run_id": run_id,
            "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "versions": versions(),
            "recipes": recipes, "recipe_info": info, "suites": sorted({b.card.get("suite") or "bundles" for b in bundles}),
            "upstream": {}, "shard": None, "argv": argv, "control": None, "rerun_failures": 0, "baseline": None}


def from_results_path(bundles: list[Bundle]) -> Path | None:
    """The results file beside the bundles' ``programs/`` directory (the run that made them)."""
    parents = {b.path.resolve().parent.parent for b in bundles}
    return (next(iter(parents)) / "results.jsonl") if len(parents) == 1 else None


def verify(paths: list[Path], spec: ProviderSpec, out: Path, opts: RunOptions, results: Path | None = None,
           override: dict[str, float] | None = None, argv: list[str] | None = None,
           progress: Any = None) -> list[Record]:
    bundles = load_bundles(paths, results, override or {})
    if spec.kind == "pybind":
        from executorch.runtime import Runtime

        from harness.bench import _runtime_log

        with _runtime_log([]):
            Runtime.get()  # its CPU-probing chatter is not the verdict
    run_id = uuid.uuid4().hex[:12]
    records: list[Record] = []
    if results is None and from_results_path(bundles) == out.resolve():
        raise UserError(f"-o {out.parent}: that is the run the bundles came from; verify into another directory")
    try:
        writer = ResultsWriter(out, header(bundles, spec, run_id, argv or []), truncate=True)
    except OSError as exc:
        raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
    with writer:
        for b in bundles:
            rec = verify_one(b, spec, opts, run_id)
            writer.write(rec)
            records.append(rec)
            if progress is not None:
                progress(rec)
    return records

