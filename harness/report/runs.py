"""Many results files as runs over time: what ``bti portal`` and the history read (torch-free).

A *run* is one ``bti run`` (or the shards of one CI run, joined here as ``bti merge`` would). A
*column* is one recipe on one machine: runs from different machines never mix in a column, because
their header names a different CPU (or the recipe a different device). The runs of a column, oldest
first, are its history.

Inputs may be ``results.jsonl`` files, their ``.jsonl.gz`` history copies (``compact``) and
directories, searched recursively for both.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
import sys
import zlib
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from harness.errors import UserError
from harness.results import Header, Record, dumps, read_results, records_at

# A shard joins a run when the other shards share its signature and it started within this long of them.
SHARD_WINDOW_S = 6 * 3600
# What a history copy keeps of a record: enough for the matrix, history, item pages and plots.
COMPACT_KEEP = ("kind", "schema", "id", "case", "suite", "op", "tags", "recipe", "backend", "axes", "status", "detail",
                "triage", "xfail", "partition", "outputs", "accuracy", "latency_ms", "load_ms", "pte_bytes", "stages",
                "baseline", "runtime", "tolerance", "attempts", "duration_s")


def _spec(value: Any) -> str:
    """A record's spec hash as one string: another JSON value (a hostile or hand-edited file) never equals a string."""
    if isinstance(value, str):
        return "s" + value
    return "jnull" if value is None else "j" + json.dumps(value, default=str)


class Held:
    """A run's records as the columns the history reads (torch-free): each record's id, row, recipe, device, status and
    spec hash (strings interned: 30 runs of the same items share them), and where it is (its file and line). Nothing
    else of a record is held; the portal reads a cell's record again whole (``store.Store.newest``) and a history copy
    from the files (``whole_records``)."""

    FIELDS = ("id", "row", "recipe", "device", "status", "spec", "src", "line")

    def __init__(self) -> None:
        self.id: list[str] = []
        self.row: list[str] = []
        self.recipe: list[str] = []
        self.device: list[str] = []
        self.status: list[str] = []
        self.spec: list[str] = []
        self.src: list[str] = []
        self.line = array("q")

    def __len__(self) -> int:
        return len(self.id)

    def keeper(self, source: str) -> Callable[[int, Record], None]:
        """``read_results``' ``keep``: each record's columns appended here (``read_results`` holds a None for it)."""
        source = sys.intern(source)

        def keep(lineno: int, rec: Record) -> None:
            rid = sys.intern(rec["id"])
            self.id.append(rid)
            self.row.append(sys.intern(rid.rsplit("@", 1)[0]))
            self.recipe.append(sys.intern(str(rec.get("recipe", "?"))))
            self.device.append(sys.intern(str(rec.get("device") or "")))
            self.status.append(sys.intern(rec["status"]))
            self.spec.append(sys.intern(_spec(rec.get("spec_hash"))))
            self.src.append(source)
            self.line.append(lineno)
        return keep

    def extend(self, other: Held) -> None:
        for name in self.FIELDS:
            getattr(self, name).extend(getattr(other, name))

    def latest(self) -> Held:
        """One record per id, a later one replacing the earlier in its place (``latest_by_id``)."""
        last = {rid: i for i, rid in enumerate(self.id)}  # the first place of each id, holding its last index
        if len(last) == len(self.id):
            return self
        out = Held()
        for name in self.FIELDS:
            col = getattr(self, name)
            getattr(out, name).extend(col[i] for i in last.values())
        return out

    def items(self) -> list[tuple[str, str]]:
        """(id, status) of each record."""
        return list(zip(self.id, self.status, strict=True))


def whole_records(run: Run) -> Iterator[Record]:
    """A run's records read again whole from their files, file by file, each in file order."""
    lines: dict[str, dict[int, str]] = defaultdict(dict)
    for rid, src, lineno in zip(run.held.id, run.held.src, run.held.line, strict=True):
        lines[src][lineno] = rid
    for source, wanted in lines.items():
        for _, rec in records_at(Path(source), wanted):
            yield rec


@dataclass
class Run:
    header: Header
    held: Held
    sources: list[str] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return str(self.header.get("run_id") or "?")

    @property
    def created(self) -> datetime:
        return parse_time(self.header.get("created"))

    @property
    def machine(self) -> str:
        """The CPU, and the machine's id when the header has one (older headers: the CPU alone)."""
        v = self.header.get("versions") or {}
        cpu = str(v.get("cpu") or v.get("os") or "unknown machine")
        return f"{cpu} #{v['machine']}" if v.get("machine") else cpu

    @property
    def versions_key(self) -> str:
        """The software under test: runs with equal keys should agree (a flip between them is flakiness)."""
        v = self.header.get("versions") or {}
        up = self.header.get("upstream") or {}
        return json.dumps([v.get("torch"), v.get("executorch"), v.get("bti"), up.get("repo"), up.get("sha")])

    @property
    def under_test(self) -> str:
        """``executorch@abc123def456`` (a dispatched upstream commit) or ``executorch 1.4.1``."""
        up = self.header.get("upstream") or {}
        if up.get("sha"):
            return f"{str(up.get('repo') or 'upstream').rsplit('/', 1)[-1]}@{str(up['sha'])[:12]}"
        v = self.header.get("versions") or {}
        return f"executorch {v.get('executorch', '?')} · torch {v.get('torch', '?')}"


@dataclass(frozen=True)
class Column:
    """One recipe on one machine (device) with one software stack: a column of the matrix. Runs of another release
    of torch, executorch, torchao or a backend package make another column, never a merge."""

    recipe: str
    machine: str
    device: str = ""  # the recipe's accelerator, when its records name one
    stack: str = ""  # the software under test (``stack_of``)

    @property
    def key(self) -> str:
        where = f"{self.recipe} @ {self.device or self.machine}"
        return f"{where} · {self.stack}" if self.stack else where

    @property
    def id(self) -> str:
        """A short hash of the key: the column's name in URLs and item file names (stable, whatever else is in the site)."""
        return hashlib.sha1(self.key.encode("utf-8", "replace")).hexdigest()[:12]


def parse_time(value: Any) -> datetime:
    epoch = datetime.fromtimestamp(0, UTC)
    try:
        t = datetime.fromisoformat(str(value))
    except ValueError:
        return epoch
    t = t if t.tzinfo else t.replace(tzinfo=UTC)
    return max(t, epoch)  # a date before 1970 (year 1) is a broken header, and date arithmetic on it overflows


def find_files(paths: list[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out.extend(sorted(f for f in p.rglob("*") if f.is_file() and (f.name.endswith(".jsonl") or f.name.endswith(".jsonl.gz"))))
        elif p.exists():
            out.append(p)
        else:
            raise UserError(f"{p}: no such file or directory")
    if not out:
        raise UserError(f"no results files (*.jsonl, *.jsonl.gz) in {', '.join(map(str, paths))}")
    return out


def clean_header(h: Header) -> Header:
    """The header's fields the portal reads, each of the type it expects whatever the file held (a results
    file is untrusted: a hostile or hand-edited one must not break the build)."""
    out: dict[str, Any] = dict(h)
    for key in ("versions", "upstream", "recipe_info", "recipes"):
        out[key] = out[key] if isinstance(out.get(key), dict) else {}
    out["recipe_info"] = {str(k): v for k, v in out["recipe_info"].items() if isinstance(v, dict)}
    for key in ("argv", "suites", "merged_from"):
        out[key] = out[key] if isinstance(out.get(key), list) else []
    out["shard"] = str(out["shard"]) if isinstance(out.get("shard"), (str, int)) and out.get("shard") else None
    out["run_id"] = str(out.get("run_id") or "?")[:200]
    return out  # type: ignore[return-value]


def _signature(h: Header) -> str:
    argv = [a for a in (h.get("argv") or []) if not str(a).startswith("--shard")]
    shard = str(h.get("shard") or "")
    # the shards of one CI run may run on several runners of a pool: the machine id does not split them
    v = h.get("versions")
    versions = {k: x for k, x in v.items() if k != "machine"} if isinstance(v, dict) else v
    return json.dumps([versions, h.get("upstream"), sorted(h.get("recipes") or {}), h.get("suites"),
                       shard.split("/")[-1], argv], sort_keys=True, default=str)


def load_runs(paths: list[Path]) -> list[Run]:
    """Every run in ``paths``, oldest first, each record held as ``Held``'s columns. Shards of one CI run are joined;
    the same run given twice (a results file and its history copy) counts once."""
    files = find_files(paths)
    runs: list[Run] = []
    seen: set[str] = set()
    open_shards: dict[str, list[tuple[Run, set[str]]]] = defaultdict(list)
    loaded = []
    for f in files:
        held = Held()
        header, _ = read_results(f, cast(Callable[[int, Record], Record], held.keeper(str(f))))
        loaded.append((f, clean_header(header), held))
    loaded.sort(key=lambda t: (parse_time(t[1].get("created")), str(t[0])))
    # a merged file and the shards it was merged from: the merged one stands for them
    merged = {str(m.get("run_id")) for _, h, _ in loaded if not h.get("shard")
              for m in (h.get("merged_from") or []) if isinstance(m, dict)}
    for path, header, held in loaded:
        rid = str(header.get("run_id"))
        fingerprint = _fingerprint(header, held)
        if fingerprint in seen or (header.get("shard") and rid in merged):
            continue
        seen.add(fingerprint)
        shard = header.get("shard")
        if shard:
            sig = _signature(header)
            joined = False
            for run, shards in open_shards[sig]:
                if shard not in shards and abs((parse_time(header.get("created")) - run.created).total_seconds()) <= SHARD_WINDOW_S:
                    shards.add(shard)
                    run.held.extend(held)
                    run.sources.append(str(path))
                    run.header.setdefault("merged_from", []).append({"run_id": rid, "shard": shard})
                    joined = True
                    break
            if joined:
                continue
            run = Run(dict(header), held, [str(path)])  # type: ignore[arg-type]
            run.header["merged_from"] = [{"run_id": rid, "shard": shard}]
            open_shards[sig].append((run, {shard}))
            runs.append(run)
            continue
        runs.append(Run(header, held, [str(path)]))
    for run in runs:
        run.held = run.held.latest()
        if len(run.header.get("merged_from") or []) > 1:
            run.header["shard"] = None  # joined: a whole run now (its history copy names the shards it stands for)
    runs.sort(key=lambda r: (r.created, r.run_id))
    return runs


# the packages of a backend's own that can change its verdicts, beside torch, executorch and torchao
BACKEND_PACKAGES = {"executorch": ("openvino", "nncf", "coremltools", "tosa-tools", "ethos-u-vela", "ai-ml-sdk-model-converter"),
                    "onnxruntime": ("onnxruntime", "onnxscript")}


def stack_of(run: Run, recipe: str) -> str:
    """``torch 2.14.1 · executorch 1.5.1 · torchao 0.18.0`` (+ the recipe's backend packages, + an upstream commit)."""
    v = run.header.get("versions") or {}
    raw = run.header.get("packages")
    packages: dict[str, Any] = raw if isinstance(raw, dict) else {}
    info = (run.header.get("recipe_info") or {}).get(recipe)
    backend = str(info.get("backend") or "") if isinstance(info, dict) else ""
    parts = [f"{name} {_release(v[name])}" for name in ("torch", "executorch", "torchao") if v.get(name) and v[name] != "not installed"]
    parts += [f"{name} {_release(packages[name])}" for name in BACKEND_PACKAGES.get(backend, ())
              if packages.get(name) and packages[name] != "not installed"]
    return " · ".join(parts)


def _release(version: Any) -> str:
    """A version's release (``2.13.0+cpu`` → ``2.13.0``; a nightly ``1.6.0.dev20261124+git1a2b`` → ``1.6.0``): a build
    of main or a dispatched upstream commit stays in its release's column, with its commit in each cell's tooltip
    and in the history, instead of making a column of one run per commit."""
    from packaging.version import InvalidVersion, Version

    try:
        return Version(str(version)).base_version
    except InvalidVersion:
        return str(version)


def _fingerprint(header: Header, held: Held) -> str:
    """One run's identity: its run id, date and machine, and what it recorded (item ids and statuses). A history copy
    of a run has the same; another run that happens to carry the same run id (copied, forged or colliding) does not."""
    v = header.get("versions") if isinstance(header.get("versions"), dict) else {}
    items = sorted(held.latest().items())
    body = json.dumps([str(header.get("run_id")), str(header.get("created")), str((v or {}).get("cpu")), items])
    return hashlib.sha1(body.encode("utf-8", "replace")).hexdigest()


def slim_record(rec: Record, limit: int, mark: str = "") -> dict[str, Any]:
    """The fields the portal reads of ``rec`` (``COMPACT_KEEP``), with an error (when it is an object) cut to
    ``limit`` characters of message and the tail of its trace, ``mark`` put before a trace that was cut."""
    slim: dict[str, Any] = {k: rec[k] for k in COMPACT_KEEP if k in rec}  # type: ignore[literal-required]
    err = rec.get("error")
    if isinstance(err, dict) and err:
        trace = str(err.get("trace") or "")
        slim["error"] = {"type": str(err.get("type", "")), "message": str(err.get("message", ""))[:limit],
                         "trace": mark + trace[-limit:] if len(trace) > limit else trace}
    return slim


def compact(run: Run, dest_dir: Path) -> Path:
    """Write a history copy of ``run``: a gzipped results file of the fields the portal reads (errors'
    traces and artifacts dropped), named by its time and run id. Returns the path (kept if present). Another run
    that shares the id and the time (its header differs) gets its own copy, the name suffixed with its fingerprint."""
    from harness.results import atomic_write_bytes

    stamp = run.created.strftime("%Y%m%dT%H%M%SZ")
    safe_id = "".join(c for c in run.run_id if c.isalnum())[:24] or "run"
    path = dest_dir / f"{stamp}-{safe_id}.jsonl.gz"
    if path.exists() and _first_header(path) != run.header:
        path = dest_dir / f"{stamp}-{safe_id}{_fingerprint(run.header, run.held)[:8]}.jsonl.gz"
    if path.exists():
        return path
    lines = [dumps(run.header)]
    lines.extend(dumps(slim_record(rec, 2000)) for rec in whole_records(run))
    atomic_write_bytes(path, gzip.compress(("\n".join(lines) + "\n").encode("utf-8", "replace"), mtime=0))
    return path


def _first_header(path: Path) -> Any:
    """The header of a history copy, as ``load_runs`` reads it (None when it cannot be read)."""
    try:
        with gzip.open(path, "rt", encoding="utf-8", errors="replace") as fh:
            header = json.loads(fh.readline())
    except (OSError, EOFError, zlib.error, ValueError):
        return None
    return clean_header(cast(Header, header)) if isinstance(header, dict) else None


HISTORY_NAME = re.compile(r"[0-9]{8}T[0-9]{6}Z-[A-Za-z0-9]{1,32}\.jsonl\.gz")  # compact's names


def prune(dest_dir: Path, before: datetime, keep: set[Path] | frozenset[Path] = frozenset()) -> list[Path]:
    """Remove the history copies (``compact``'s names only, none in ``keep``) of runs made before ``before``."""
    gone = []
    for path in dest_dir.glob("*.jsonl.gz"):
        if path in keep or not HISTORY_NAME.fullmatch(path.name):
            continue
        try:
            made = datetime.strptime(path.name[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        except ValueError:
            continue
        if made < before:
            path.unlink()
            gone.append(path)
    return gone
