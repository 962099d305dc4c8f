"""Worker pool: warm forked workers, crash/timeout isolation, recycling.

The parent imports torch and executorch once (and never runs torch compute, which would make a
later ``fork`` deadlock on the OpenMP pool); workers are forked from it, so none pays the import.
Each worker receives whole groups (one case × axes, all recipes) and reports, per item, a
``start`` then a ``result`` message. The parent knows at every moment which item a worker is on:

* the worker dies (segfault, abort, OOM kill) → CRASH for that item;
* the item runs past ``timeout`` → the worker is killed → TIMEOUT for that item;

and in both cases the group's remaining items go back to the queue for a fresh worker.
Workers retire after ``max_items`` items or ``max_growth_mb`` of RSS growth, so memory stays flat.
With speedups on, the parent has also lowered a tiny model per recipe (``harness.stages.warm_up``)
and frozen its heap before forking, and a worker runs each group with a single garbage collection
at its end (``harness.speedups.group_gc``).
"""

from __future__ import annotations

import contextlib
import faulthandler
import multiprocessing as mp
import os
import signal
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from harness.cases.case import Item
from harness.causes import Crash, fatal_cause
from harness.env import load_note, peak_rss_mb, process_cpu_s, process_rss_mb, remove_scratch, rss_mb
from harness.recipes import Recipe
from harness.results import Record
from harness.settings import case_timeout, recipe_timeout
from harness.status import Stage, Status
from harness.verdict import GroupContext


@dataclass
class PoolConfig:
    jobs: int
    timeout: float
    run_id: str
    threads: int = 1
    max_items: int = 400
    max_growth_mb: float = 1024.0
    log_dir: str | None = None  # worker stderr/stdout go to <log_dir>/worker-<pid>.log
    bundle_dir: str | None = None  # see RunOptions.bundle_dir
    control: str | None = None  # the control recipe (triage)
    baseline: str | None = None  # the baseline recipe (--baseline)
    attempt: int = 1
    memory_limit_mb: float = 0.0  # a worker above this RSS is killed: CRASH, out of memory (0: no limit)


def _worker_main(conn: Connection, recipes: dict[str, Recipe], cfg: PoolConfig) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if cfg.log_dir:
        os.makedirs(cfg.log_dir, exist_ok=True)
        fd = os.open(os.path.join(cfg.log_dir, f"worker-{os.getpid()}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    faulthandler.enable(all_threads=True)  # a fatal signal prints the Python frames to the log: a CRASH names them
    import torch

    from harness.settings import current, use
    from harness.speedups import group_gc
    from harness.stages import execute_group, watching_stages

    torch.set_num_threads(cfg.threads)
    start_rss = rss_mb()
    done = 0
    while True:
        msg = conn.recv()
        if msg is None:
            return
        group, context = msg
        with group_gc(), use(current().for_case(group[0].case.spec)), \
                watching_stages(lambda stage: conn.send(("stage", stage))):  # a runtime provider gives up before the pool
            execute_group(
                group, recipes, cfg.run_id,
                on_start=lambda item_id: conn.send(("start", item_id)),
                emit=lambda rec: conn.send(("result", rec)), bundle_dir=cfg.bundle_dir,
                control_recipe=cfg.control, context=context, attempt=cfg.attempt, baseline_recipe=cfg.baseline,
            )
        done += len(group)
        rss = rss_mb()
        retire = done >= cfg.max_items or rss - start_rss > cfg.max_growth_mb
        conn.send(("idle", {"rss_mb": rss, "peak_mb": peak_rss_mb(), "retire": retire}))
        if retire:
            return


@dataclass
class _Worker:
    proc: Any
    conn: Connection
    group: list[Item] = field(default_factory=list)
    done: set[str] = field(default_factory=set)
    current: str | None = None
    started: float = 0.0
    timeout: float = 0.0  # its current item's (``case_timeout``: on the item's recipe)
    timed: Item | None = None  # the item whose timeout that is: the one started last
    log_offset: int = 0  # the size of its log when its current item started: what it wrote since is that item's
    cpu_start: float | None = None  # its CPU seconds when its current item started (a TIMEOUT says what it had)
    stage: Stage | None = None  # the stage the worker last told (a CRASH or TIMEOUT's ``died_in``): cleared with each result

    @property
    def busy(self) -> bool:
        return bool(self.group)


class Pool:
    def __init__(self, cfg: PoolConfig, recipes: dict[str, Recipe], on_record: Callable[[Record], None],
                 contexts: dict[str, GroupContext] | None = None) -> None:
        self.cfg = cfg
        self.contexts: dict[str, GroupContext] = dict(contexts or {})  # group -> control and baseline status there
        self.recipes = recipes
        self.on_record = on_record
        self.ctx = mp.get_context("fork")
        self.workers: list[_Worker] = []
        self.stats: list[dict[str, Any]] = []

    def _spawn(self) -> _Worker:
        parent, child = self.ctx.Pipe()
        proc = self.ctx.Process(target=_worker_main, args=(child, self.recipes, self.cfg), daemon=True)
        proc.start()
        child.close()
        worker = _Worker(proc, parent)
        self.workers.append(worker)
        return worker

    def run(self, groups: list[list[Item]]) -> None:
        queue: deque[list[Item]] = deque(groups)
        try:
            while queue or any(w.busy for w in self.workers):
                while queue and len(self.workers) < self.cfg.jobs:
                    self._spawn()
                for w in self.workers:
                    if not w.busy and queue:
                        w.group, w.done, w.current, w.stage = queue.popleft(), set(), None, None
                        w.started, w.timed = time.monotonic(), w.group[0]
                        w.timeout = self._timeout(w.timed)
                        w.cpu_start = process_cpu_s(w.proc.pid)
                        w.conn.send((w.group, self.contexts.get(w.group[0].group)))
                self._poll(queue)
        finally:
            self.shutdown()

    def _poll(self, queue: deque[list[Item]]) -> None:
        busy = [w for w in self.workers if w.busy]
        now = time.monotonic()
        wait_for = min((w.started + w.timeout - now for w in busy), default=1.0)
        ready = wait([*(w.conn for w in busy), *(w.proc.sentinel for w in busy)], timeout=max(0.01, min(wait_for, 1.0)))
        for w in list(busy):
            if w.conn in ready or w.proc.sentinel in ready:
                self._drain(w, queue)
        now = time.monotonic()
        for w in [w for w in self.workers if w.busy and w.proc.is_alive()]:
            if now - w.started > w.timeout:
                cpu = process_cpu_s(w.proc.pid, running_children=True)  # the item's subprocesses started after cpu_start
                note, load = load_note(None if cpu is None or w.cpu_start is None else cpu - w.cpu_start, now - w.started)
                w.proc.kill()
                w.proc.join()
                timed = w.timed or w.group[0]
                said = (f"--timeout {w.timeout:g}s" if w.timeout == self.cfg.timeout
                        else f"{w.timeout:g}s (the case's timeout on this recipe, longer than --timeout)"
                        if recipe_timeout(timed.case.spec, timed.recipe) == w.timeout
                        else f"{w.timeout:g}s (the case's timeout_s, longer than --timeout)")
                self._fail(w, queue, Status.TIMEOUT, f"no result within {said}" + (f": {note}" if note else ""), load=load)
        if self.cfg.memory_limit_mb:
            self._watch_memory(queue)

    def _watch_memory(self, queue: deque[list[Item]]) -> None:
        """Kill a worker whose RSS passed the limit, before the kernel's OOM killer picks a process of its own:
        the item is a CRASH that says so, with both figures."""
        limit = self.cfg.memory_limit_mb
        for w in [w for w in self.workers if w.busy and w.proc.is_alive()]:
            rss = process_rss_mb(w.proc.pid)
            if rss > limit:
                w.proc.kill()
                w.proc.join()
                self._fail(w, queue, Status.CRASH, f"out of memory: the worker's RSS reached {rss / 1024:.1f} GB, above the "
                           f"worker memory limit of {limit / 1024:.1f} GB (--worker-memory, BTI_WORKER_MEMORY_GB)")

    def _timeout(self, item: Item) -> float:
        """An item's timeout: ``--timeout``, or longer where its case declares so, on its recipe (``case_timeout``)."""
        return case_timeout(self.cfg.timeout, item.case.spec, item.recipe)

    def _drain(self, w: _Worker, queue: deque[list[Item]]) -> None:
        try:
            while w.conn.poll():
                kind, payload = w.conn.recv()
                if kind == "stage":
                    w.stage = payload
                elif kind == "start":
                    w.current, w.started, w.log_offset = payload, time.monotonic(), self._log_size(w)
                    w.timed = next((it for it in w.group if it.id == payload), w.group[0])
                    w.timeout = self._timeout(w.timed)
                    w.cpu_start = process_cpu_s(w.proc.pid)
                elif kind == "result":
                    w.done.add(payload["id"])
                    w.current, w.stage = None, None
                    self._emit(payload)
                elif kind == "idle":
                    self.stats.append({"pid": w.proc.pid, **payload})
                    w.group = []
                    if payload["retire"]:
                        w.proc.join(timeout=30)
                        self._remove(w)
                    return
        except (EOFError, ConnectionResetError, OSError):
            pass
        if not w.proc.is_alive() and w in self.workers:
            w.proc.join()
            code = w.proc.exitcode
            name = signal.Signals(-code).name if code is not None and code < 0 else f"exit code {code}"
            hint = " (out of memory? the kernel's OOM killer sends SIGKILL)" if code == -signal.SIGKILL else ""
            crash = self._crash(w, name)
            said = f": {crash.cause}" if crash.cause else f" (in {crash.where})" if crash.where else ""
            where = f" (worker log: {crash.log})" if crash.log else ""
            self._fail(w, queue, Status.CRASH, f"worker died with {name}{hint}{said}{where}", crash)

    def _log_path(self, w: _Worker) -> str:
        return os.path.join(self.cfg.log_dir, f"worker-{w.proc.pid}.log") if self.cfg.log_dir else ""

    def _log_size(self, w: _Worker) -> int:
        try:
            return os.path.getsize(self._log_path(w)) if self.cfg.log_dir else 0
        except OSError:
            return 0

    def _crash(self, w: _Worker, name: str) -> Crash:
        """Why the worker died, from what it wrote to its log since its current item started (the last 256 KB)."""
        path = self._log_path(w)
        if not path:
            return Crash(name)
        try:
            with open(path, "rb") as fh:
                fh.seek(max(w.log_offset, os.path.getsize(path) - 256 * 1024))
                text = fh.read().decode("utf-8", "replace")
        except OSError:
            return Crash(name, log=path)
        cause, frames = fatal_cause(text)
        return Crash(name, cause, frames, path)

    def _fail(self, w: _Worker, queue: deque[list[Item]], status: Status, detail: str, crash: Crash | None = None,
              load: dict[str, float] | None = None) -> None:
        remaining = [it for it in w.group if it.id not in w.done]
        if remaining:
            victim = next((it for it in remaining if it.id == w.current), remaining[0])
            took = round(time.monotonic() - w.started, 3) if victim.id == w.current else None  # a crash's time is a cost
            # the stage it was in; before its item started, the group's module build for it (logged as export)
            died_in = w.stage if victim.id == w.current or w.current is None else None
            self._emit(self._synthetic(victim, status, detail, w.proc.pid, crash, load, took, died_in))
            rest = [it for it in remaining if it is not victim]
            if rest:
                queue.appendleft(rest)
        self._remove(w)

    def _emit(self, rec: Record) -> None:
        GroupContext.note(self.contexts, rec, self.cfg.control, self.cfg.baseline)
        self.on_record(rec)

    def _synthetic(self, item: Item, status: Status, detail: str, pid: int, crash: Crash | None = None,
                   load: dict[str, float] | None = None, seconds: float | None = None, died_in: Stage | None = None) -> Record:
        from harness.verdict import Outcome, decide

        ctx = self.contexts.get(item.group) or GroupContext()
        outcome = Outcome(fixed=status, fixed_detail=detail, worker_pid=pid, control=ctx.control, crash=crash, load=load,
                          duration_s=seconds, died_in=died_in)
        return decide(item, self.recipes[item.recipe], outcome, self.cfg.run_id, self.cfg.attempt, self.cfg.control)

    def _remove(self, w: _Worker) -> None:
        w.group = []
        if w in self.workers:
            self.workers.remove(w)
        w.conn.close()
        if not w.proc.is_alive():  # killed, crashed or retired: what it had under way in the temp directory goes too
            remove_scratch(w.proc.pid)

    def shutdown(self) -> None:
        for w in list(self.workers):
            with contextlib.suppress(BrokenPipeError, OSError):
                w.conn.send(None)
        for w in list(self.workers):
            w.proc.join(timeout=5)
            if w.proc.is_alive():
                w.proc.kill()
                w.proc.join()
            w.conn.close()
        self.workers.clear()
