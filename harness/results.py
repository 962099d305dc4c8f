"""The JSONL results contract: the one module that reads and writes ``results.jsonl``.

File layout (schema version ``SCHEMA``):

* line 1 — a header object, ``{"kind": "header", ...}`` (see ``Header``);
* then one ``{"kind": "result", ...}`` object per work item (see ``Record``), appended and
  flushed as each item completes, in completion order.

Non-finite floats are stored as the strings ``"inf"``, ``"-inf"`` and ``"nan"`` so every line is
strict JSON (browsers' ``JSON.parse`` rejects ``Infinity``); ``as_float`` reads them back.
A killed run can leave at most one incomplete last line; ``repair_tail`` drops it on ``--resume``.
This module never imports torch or executorch.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypedDict, cast, overload

import orjson

from harness.errors import ResultsError, first_line
from harness.status import Status

SCHEMA = 1


class Header(TypedDict, total=False):
    kind: str  # "header"
    schema: int
    run_id: str
    created: str  # ISO 8601 UTC
    versions: dict[str, str]  # torch, executorch, torchao, bti, python, os, cpu
    packages: dict[str, str]  # every package a verdict can depend on (harness.env.VERDICT_PACKAGES) -> version
    speedups: dict[str, Any]  # active (names), off (name -> reason), forced (harness.speedups.Plan)
    recipes: dict[str, str]  # recipe name -> content hash
    suites: list[str]
    upstream: dict[str, Any]  # repo, sha, pr (when dispatched)
    shard: str | None  # "i/n"
    argv: list[str]
    recipe_info: dict[str, dict[str, Any]]  # recipe -> backend, description, unavailable (reason or None), facts
    # (the machine facts its rules are limited to, harness.facts, as they were: e.g. openvino-cpu-precision: bf16)
    merged_from: list[dict[str, Any]]  # bti merge: run_id and shard of each input
    control: str | None  # the control recipe triage compares with (--control)
    rerun_failures: int  # --rerun-failures N
    baseline: str | None  # --baseline: the recipe whose outputs were the reference


class OutputStats(TypedDict, total=False):
    name: str  # "output[0]"
    shape: list[int]
    dtype: str
    max_abs: float | str
    max_rel: float | str
    mae: float | str
    mse: float | str
    sqnr_db: float | str
    cosine: float | str


class Record(TypedDict, total=False):
    kind: str  # "result"
    schema: int
    id: str  # op.add.bcast_rank4[float16,dynamic]@xnnpack
    case: str  # op.add.bcast_rank4
    suite: str
    op: str | None  # aten::add.Tensor (operator cases)
    tags: list[str]
    recipe: str
    backend: str
    axes: dict[str, str]  # {"dtype": "float16", "shape": "dynamic"}
    status: str  # a Status value
    detail: str  # one line: why
    error: dict[str, str]  # type, message, trace (tail)
    facts: dict[str, str | None]  # the machine facts the case source's own rules for it are limited to (the zoo's
                                   # `when:`), as they were: the recipe's own are in the header's recipe_info
    xfail: dict[str, str]  # the xfail rule that listed the item: reason, expects, status (when it failed as expected)
    triage: str  # a failure's first suspect: upstream | backend | infra | flake
    attempts: list[dict[str, Any]]  # --rerun-failures: [{attempt, status, detail}] of every attempt
    stages: dict[str, float]  # seconds per Stage value (only the stages the backend has and reached)
    partition: dict[str, Any]  # delegated_nodes, total_nodes, delegated_ops, undelegated_ops ...
    pte_bytes: int
    pte_sha256: str  # the serialized program's hash: identical inputs must give identical programs
    delegate_blobs: list[dict[str, Any]]  # [{"backend": "XnnpackBackend", "bytes": 896}]
    artifacts: dict[str, str]  # with `bti run --bundle`: {"pte": "programs/<item>.pte", "bpte": ...} or "bpte_skipped": why
    outputs: list[OutputStats]
    tolerance: dict[str, Any]  # the criteria the outputs were held to
    reference: str  # what they were held to: eager, fp64, quantized (the quantized program), baseline (harness.judge)
    accuracy: dict[str, Any]  # model-level metrics (top-1 agreement ...)
    latency_ms: dict[str, float]  # median, p90, min, repeats
    load_ms: float
    runtime: str  # the runtime provider that ran an ExecuTorch program: pybind, runner, command
    peak_rss_mb: float  # the worker's high-water mark so far
    memory_mb: dict[str, float]  # this item's own peak RSS: aot (quantize → serialize) and run (load → run), and
                                 # aot_growth / run_growth: that peak above the RSS when the span began
    baseline: dict[str, Any]  # --baseline: recipe, status, latency ratio; a pair: pair_b, status, latency ratio (opdiff's: diff)
    times_ms: list[float]  # each timed run, in milliseconds
    sampled_inputs: list[dict[str, Any]]  # opdiff suites' --sampled-inputs: per input set, opdiff's diff (mse, max_abs, mean_abs)
    load: dict[str, float]  # TIMEOUT: the cores the item's process used, the machine's load_5min and cores (harness.env)
    crash: dict[str, Any]  # CRASH: the signal, the fatal line of the worker's own output, its Python frames, the log (harness.causes)
    died_in: str  # a CRASH or TIMEOUT: the stage its worker (or runtime provider's runner) last began: export … compare
    seed: int
    spec_hash: str  # hash of the case spec (cache key part)
    attempt: int
    run_id: str
    cached: bool
    worker_pid: int
    duration_s: float


def status_of(record: Record) -> Status:
    return Status(record["status"])


def lowered_xpass(record: Record) -> bool:
    """An XPASS whose program never ran here: a stale rule on a LOWERED item (``xfail.lowered``, harness.verdict)."""
    xfail = record.get("xfail")
    return record.get("status") == Status.XPASS and isinstance(xfail, dict) and "lowered" in xfail


def clean(value: Any) -> Any:
    """Make ``value`` strict-JSON safe (non-finite floats become strings)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    return value


def as_float(value: Any) -> float | None:
    """Read a float written by ``clean`` (None stays None)."""
    if value is None:
        return None
    return float(value)


def dumps(obj: Any) -> str:
    return json.dumps(clean(obj), sort_keys=True, allow_nan=False, separators=(",", ":"))


class ResultsWriter:
    """Appends one line per record, flushed at once, so a kill loses only items in flight.

    Holds an exclusive ``flock`` on the file: a second bti run on the same results file fails at
    once instead of interleaving lines. ``truncate`` starts the file afresh (after the lock is held).
    """

    def __init__(self, path: Path, header: Header | None, truncate: bool = False) -> None:
        import fcntl

        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file = path.open("ab", buffering=0)  # one write(2) per line: nothing lingers in a buffer
        try:
            fcntl.flock(self._file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self._file.close()
            raise ResultsError(f"{path}: another bti run is writing this results file", hint="use another --out-dir") from None
        if truncate:
            self._file.truncate(0)
        if header is not None:
            self._write(header)

    def _write(self, obj: Any) -> None:
        self._write_bytes((dumps(obj) + "\n").encode("utf-8"))

    def _write_bytes(self, line: bytes) -> None:
        """One whole line or nothing: a failed write (a full disk) is cut back to the last whole line,
        so the records before it stay readable and ``--resume`` continues from them."""
        pos = self._file.seek(0, os.SEEK_END)
        try:
            if self._file.write(line) != len(line):
                raise OSError(28, "No space left on device (short write)")
        except OSError as exc:
            with contextlib.suppress(OSError):
                self._file.truncate(pos)
            raise ResultsError(f"{self.path}: cannot write results: {exc.strerror or exc}",
                               hint="free space, then `bti run --resume` keeps the items already recorded") from None

    def write(self, record: Record) -> None:
        self._write(record)

    def write_line(self, line: bytes) -> None:
        """A record as a results file held it (``Records.lines``): one line, its ending made ``\\n``."""
        self._write_bytes(line.rstrip(b"\r\n") + b"\n")

    def close(self) -> None:
        with contextlib.suppress(OSError):  # a buffered tail that cannot be flushed was already reported
            self._file.close()

    def __enter__(self) -> ResultsWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _loads(line: bytes) -> Any:
    """One JSON line: orjson (about 4x the standard library's speed on these records), and the standard library for what
    orjson refuses and a results file may hold (``NaN`` tokens, a lone surrogate escape, an integer over 64 bits)."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        return json.loads(line.decode("utf-8"))  # UTF-8 only, as the text reader was (json.loads(bytes) guesses)


def _open(path: Path) -> Any:
    """A results file in binary; ``.gz`` files (the portal's history) through gzip."""
    import gzip

    try:
        return gzip.open(path) if path.suffix == ".gz" else path.open("rb")
    except OSError as exc:
        raise ResultsError(f"{path}: cannot read results: {exc.strerror}") from None


def _raw_lines(path: Path) -> Iterator[tuple[int, bytes, dict[str, Any]]]:
    """Each non-blank line of a results file with its number and its object."""
    with _open(path) as handle:
        for lineno, line in _lines(path, handle):
            if not line.strip():
                continue
            try:
                obj = _loads(line)
            except json.JSONDecodeError as exc:
                where = "truncated line" if not line.endswith(b"\n") else exc.msg
                raise ResultsError(
                    f"{path}:{lineno}: unreadable JSONL line ({where})",
                    hint="a killed run leaves a partial last line; `bti run --resume` repairs it",
                ) from None
            except UnicodeDecodeError as exc:
                raise ResultsError(f"{path}:{lineno}: cannot read results: {first_line(str(exc))}") from None
            except RecursionError:
                raise ResultsError(f"{path}:{lineno}: unreadable JSONL line (nested too deep)") from None
            if not isinstance(obj, dict) or obj.get("kind") not in ("header", "result"):
                raise ResultsError(f"{path}:{lineno}: not a bti header or result line")
            yield lineno, line, obj


def iter_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The lines of a results file, parsed."""
    for lineno, _, obj in _raw_lines(path):
        yield lineno, obj


def _lines(path: Path, handle: Any) -> Iterator[tuple[int, bytes]]:
    try:
        yield from enumerate(handle, 1)
    except (OSError, EOFError, zlib.error) as exc:  # a corrupt or truncated .gz
        raise ResultsError(f"{path}: cannot read results: {first_line(str(exc)) or type(exc).__name__}") from None


class Records(Sequence[Record]):
    """A results file's records kept as the JSON lines they were read from, and parsed again on each pass (orjson:
    ~5 µs a record). A pass holds one record at a time, so 134,000 records take ~0.25 GB where the parsed dicts
    take ~1.3 GB and the garbage collector's time grows with them. A report keeps what it needs (the failures, a
    count). Read-only: a change to a yielded dict is not kept."""

    __slots__ = ("_lines",)

    def __init__(self, lines: list[bytes]) -> None:
        self._lines = lines

    def __len__(self) -> int:
        return len(self._lines)

    @overload
    def __getitem__(self, index: int) -> Record: ...
    @overload
    def __getitem__(self, index: slice) -> Records: ...
    def __getitem__(self, index: int | slice) -> Record | Records:
        if isinstance(index, slice):
            return Records(self._lines[index])
        return cast(Record, _loads(self._lines[index]))

    def __iter__(self) -> Iterator[Record]:
        for line in self._lines:
            yield cast(Record, _loads(line))

    def lines(self) -> Iterator[bytes]:
        """The records' JSON lines, as read."""
        return iter(self._lines)

    def strict_lines(self) -> Iterator[tuple[str, bytes]]:
        """Each record's id and its line to write again: as read when it is strict JSON (what orjson reads), else
        written anew (a ``NaN`` token becomes ``"nan"``, as ``ResultsWriter`` writes it)."""
        for line in self._lines:
            try:
                yield orjson.loads(line)["id"], line
            except orjson.JSONDecodeError:
                obj = json.loads(line)
                yield obj["id"], dumps(obj).encode("utf-8")


def read_records(path: Path, latest: bool = False) -> tuple[Header, Records]:
    """``read_results`` for reports at sweep scale: the same checks, the records as a ``Records`` sequence. With
    ``latest``, one record per item id: a later line replaces the earlier in its place (``latest_by_id``)."""
    header: Header | None = None
    lines: list[bytes] = []
    where: dict[str, int] = {}
    for lineno, line, obj in _raw_lines(path):
        if obj["kind"] == "header":
            header = _check_header(path, lineno, obj, header is not None or bool(lines))
            continue
        _check_record(path, lineno, obj)
        if latest:
            if obj["id"] in where:
                lines[where[obj["id"]]] = line
                continue
            where[obj["id"]] = len(lines)
        lines.append(line)
    if header is None:
        raise ResultsError(f"{path}: no header line; not a bti results file")
    return header, Records(lines)


def _check_header(path: Path, lineno: int, obj: dict[str, Any], late: bool) -> Header:
    if late:
        raise ResultsError(f"{path}:{lineno}: second header line (use `bti merge` to join runs)")
    if not isinstance(obj.get("schema", 0), int):
        raise ResultsError(f"{path}:{lineno}: the header's schema is not a number")
    if obj.get("schema", 0) > SCHEMA:
        raise ResultsError(f"{path}: schema {obj.get('schema')} is newer than this bti ({SCHEMA})")
    return cast(Header, obj)


def _check_record(path: Path, lineno: int, obj: dict[str, Any]) -> None:
    try:
        Status(str(obj.get("status")))
    except ValueError:
        raise ResultsError(f"{path}:{lineno}: unknown status {obj.get('status')!r}") from None
    if not isinstance(obj.get("id"), str):
        raise ResultsError(f"{path}:{lineno}: result without an id (a string)")


def read_results(path: Path, keep: Callable[[int, Record], Record] | None = None) -> tuple[Header, list[Record]]:
    """Read one results file; raises ``ResultsError`` on any unreadable line. ``keep(lineno, record)``: what to hold of
    each record (the portal holds a few fields of most, and reads the rest again with ``records_at``)."""
    header: Header | None = None
    records: list[Record] = []
    for lineno, obj in iter_lines(path):
        if obj["kind"] == "header":
            header = _check_header(path, lineno, obj, header is not None or bool(records))
            continue
        _check_record(path, lineno, obj)
        records.append(cast(Record, obj) if keep is None else keep(lineno, cast(Record, obj)))
    if header is None:
        raise ResultsError(f"{path}: no header line; not a bti results file")
    return header, records


def records_at(path: Path, ids: dict[int, str]) -> Iterator[tuple[int, Record]]:
    """The records on these lines (line number -> the id ``read_results`` read there) of a results file, again, in file
    order; the other lines are not parsed. A line that holds another record now (the file changed) is an error."""
    with _open(path) as handle:
        for lineno, line in _lines(path, handle):
            if lineno in ids:
                rec = _loads(line)
                if not isinstance(rec, dict) or rec.get("id") != ids[lineno]:
                    raise ResultsError(f"{path}:{lineno}: the file changed while it was read (this line held {ids[lineno]})")
                yield lineno, cast(Record, rec)


def repair_tail(path: Path) -> int:
    """Drop an incomplete last line left by a kill. Returns the bytes removed."""
    if not path.exists():
        return 0
    data = path.read_bytes()
    if not data or data.endswith(b"\n"):
        return 0
    keep = data.rfind(b"\n") + 1
    with path.open("r+b") as handle:
        handle.truncate(keep)
    return len(data) - keep


def latest_by_id(records: Iterable[Record]) -> dict[str, Record]:
    """One record per item id; a later line wins (a resumed or retried item)."""
    out: dict[str, Record] = {}
    for rec in records:
        out[rec["id"]] = rec
    return out


def read_latest(path: Path) -> tuple[Header, list[Record]]:
    """``read_results`` with one record per item id (the latest)."""
    header, records = read_results(path)
    return header, list(latest_by_id(records).values())


def atomic_write_text(path: Path, text: str) -> None:
    """UTF-8; a lone surrogate (a results file can carry one, escaped in JSON) becomes U+FFFD's stand-in."""
    atomic_write_bytes(path, text.encode("utf-8", "replace"))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)  # a full disk leaves no half-written file behind
        raise
