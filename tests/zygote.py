"""A warm start for the CLI in tests: one process per pytest worker does what `bti` does first (``harness.quiet``),
imports torch and ``executorch.exir`` once, then forks a child for each `run_bti` call, which runs ``python -m harness
ARGS`` as a new interpreter would: its own working directory, environment, ``sys.path`` (the directory first, then
``PYTHONPATH``), stdin from /dev/null, stdout and stderr to files; its exit code (or the signal that ended it) is
reported once every process of its group has ended, as ``subprocess.run`` waits for its pipes to close. So a test pays
the import (about 4 s of CPU a call, ~90 `bti run` calls in a session) once per worker.

What a child shares with the warm process, and a new interpreter would not: the third-party modules already imported
(torch, ``executorch.exir`` and what they import) and ``harness.quiet``; nothing else of bti's. ExecuTorch's runtime
(``portable_lib``) is not imported there: bti loads it after the backends' own libraries (OpenVINO's delegate fails to
load otherwise). A call whose environment differs from the warm process's in what those imports read (``TORCH*``,
``LD_*``, ``PYTHON*`` but the tests' own ``PYTHONPATH``…) runs in a new interpreter instead (``Zygote.usable``), as does
every call where the warm process cannot start; a ``PYTHONPATH`` of the call's own that only adds modules this
interpreter cannot import (the docs' installed examples) runs warm. ``tests/test_faults.py`` checks that a run's exit code, stdout and stderr
are the same both ways.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# a variable with one of these prefixes can change what the warm process's imports did: a call must match it
IMPORT_TIME = ("PYTHON", "LD_", "TORCH", "PYTORCH", "OMP_", "MKL_", "CUDA", "XNNPACK", "EXECUTORCH")


def _import_env(env: dict[str, str], pythonpath: str) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME) and not (k == "PYTHONPATH" and v == pythonpath)}


def _new_names_only(pythonpath: str) -> bool:
    """Whether every top-level module or package in these directories is one this interpreter cannot import (so the
    warm process, whose path is this one's, cannot have imported it: none is shadowed). A zip, a file or a name that
    is found here says no."""
    import importlib.util

    for entry in filter(None, pythonpath.split(os.pathsep)):
        if not os.path.isdir(entry):
            return False
        for name in os.listdir(entry):
            top = name.split(".", 1)[0]
            if name.endswith((".dist-info", ".egg-info", ".pth")) or name == "__pycache__" or not top.isidentifier():
                continue  # metadata (entry points are read at call time, from the child's own sys.path)
            if importlib.util.find_spec(top) is not None:
                return False
    return True


class Zygote:
    """The parent's side: starts the warm process on first use, hands it calls, waits for their exit codes."""

    def __init__(self, pythonpath: str, plain_env: dict[str, str] | None = None) -> None:
        """``plain_env``: a warm process for standalone scripts (``run_script``), started with that environment, that
        imports torch and ``executorch.exir`` and nothing of bti's (no ``harness.quiet``)."""
        self.pythonpath = pythonpath  # the tests' own PYTHONPATH (tests, examples, the repository): imports none of torch
        self.proc: subprocess.Popen[bytes] | None = None
        self.plain = plain_env
        self.env: dict[str, str] = dict(plain_env or {})
        self.dir = Path(tempfile.mkdtemp(prefix="bti-zygote-"))
        self.lock = threading.Lock()
        self.count = 0
        self.failed = False
        atexit.register(self.close)

    def usable(self, env: dict[str, str]) -> bool:
        """Whether a call with ``env`` can run warm: what the imports read is the warm process's, but for a
        ``PYTHONPATH`` of its own whose modules the warm process could not have imported (``_new_names_only``): the
        child puts it first on ``sys.path``, as a new interpreter would."""
        if self.failed:
            return False
        theirs, mine = _import_env(env, self.pythonpath), _import_env(self.env or dict(os.environ), self.pythonpath)
        if theirs == mine:
            return True
        own = theirs.pop("PYTHONPATH", None)
        return own is not None and "PYTHONPATH" not in mine and theirs == mine and _new_names_only(own)

    def _start(self) -> subprocess.Popen[bytes] | None:
        if self.proc is None and not self.failed:
            self.env = dict(os.environ if self.plain is None else self.plain)
            argv = [sys.executable, __file__, *([] if self.plain is None else ["--plain"])]
            try:
                self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL, cwd=self.dir, env=self.env)
            except OSError:
                self.failed = True
        return self.proc if self.proc is not None and self.proc.poll() is None else None

    def close(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def run(self, args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str, str] | None:
        """``python -m harness *args`` in a forked child: (exit code, stdout, stderr), or None where there is no warm
        process (run a new interpreter then). A child past ``timeout`` is killed with its process group, and
        ``subprocess.TimeoutExpired`` raised, as ``subprocess.run`` would."""
        return self._call({"args": args, "cwd": str(cwd), "env": env}, timeout)

    def run_script(self, script: Path, env: dict[str, str], timeout: float) -> tuple[int, str, str] | None:
        """``python SCRIPT`` in its directory with ``harness`` made unimportable, forked as ``run`` is."""
        return self._call({"script": str(script), "args": [], "cwd": str(script.parent), "env": env}, timeout)

    def run_or_spawn(self, args: list[str], cwd: Path, env: dict[str, str], timeout: float,
                     argv: list[str], warm: bool = True) -> tuple[int, str, str]:
        """``run`` where ``warm``, the call can run warm (``usable``) and the warm process is there, else ``argv`` in a
        new process with the same working directory and environment: (exit code, stdout, stderr)."""
        got = self.run(args, cwd, env, timeout) if warm and self.usable(env) else None
        if got is not None:
            return got
        proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        return proc.returncode, proc.stdout, proc.stderr

    def _call(self, req: dict[str, Any], timeout: float) -> tuple[int, str, str] | None:
        args = req["args"]
        with self.lock:
            proc = self._start()
            if proc is None or proc.stdin is None:
                return None
            self.count += 1
            base = self.dir / str(self.count)
            req = {**req, "base": str(base)}
            try:
                proc.stdin.write((json.dumps(req) + "\n").encode())
                proc.stdin.flush()
            except OSError:
                return None
        status, pid_file = Path(f"{base}.status"), Path(f"{base}.pid")
        deadline = time.monotonic() + timeout
        while not status.exists():
            if proc.poll() is not None:
                return None
            if time.monotonic() > deadline:
                _kill_group(pid_file)
                raise subprocess.TimeoutExpired(["python", "-m", "harness", *args], timeout)
            time.sleep(0.02)
        code = int(status.read_text())
        out, err = (Path(f"{base}.{k}").read_text(errors="replace") for k in ("out", "err"))
        for suffix in ("out", "err", "status", "pid"):
            Path(f"{base}.{suffix}").unlink(missing_ok=True)
        return code, out, err


def _kill_group(pid_file: Path) -> None:
    """Kill the child's process group (bti's workers with it); the pid file is written before the child runs."""
    for _ in range(100):
        if pid_file.exists():
            break
        time.sleep(0.02)
    with contextlib.suppress(OSError, ValueError):
        os.killpg(int(pid_file.read_text()), signal.SIGKILL)


# ---------------------------------------------------------------------------------------------- the warm process
def _child(req: dict[str, Any], base_path: list[str]) -> None:
    """In the forked child: become ``python -m harness ARGS`` started in ``cwd`` with ``env``, then exit."""
    import atexit as child_atexit
    import importlib
    import runpy
    import traceback

    code = 1
    try:
        os.setpgid(0, 0)  # its own group: a timeout kills bti's workers with it, and the parent waits for the group
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        for fd, key in ((1, "out"), (2, "err")):
            os.dup2(os.open(f"{req['base']}.{key}", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 (fd 0, the child's for its life)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        extra = [p for p in req["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:] = [req["cwd"], *extra, *base_path]
        sys.argv = [req["script"]] if "script" in req else ["-m", *req["args"]]  # runpy makes argv[0] the module's file
        tempfile.tempdir = None
        importlib.invalidate_caches()
        try:
            if "script" in req:
                sys.modules["harness"] = None  # type: ignore[assignment]  # as tests/test_repro.py's BLOCK_BTI
                runpy.run_path(req["script"], run_name="__main__")
            else:
                runpy.run_module("harness", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
        threading._shutdown()  # type: ignore[attr-defined]  # join non-daemon threads, as interpreter exit does
        child_atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def _write(path: str, text: str) -> None:
    Path(path + ".tmp").write_text(text)
    os.replace(path + ".tmp", path)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def serve(plain: bool) -> None:
    """Import what every call needs, then fork a child per request line on stdin; write each child's pid, then, once
    its process group has ended, its exit code (negative: the signal that ended it). ``plain``: nothing of bti's."""
    if not plain:
        sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # this repository's harness, as the tests import it
        from harness.quiet import quiet  # what `bti` does before it imports torch (harness.cli.main)

        quiet()
    import executorch.exir  # noqa: F401  (the imports every call would repeat)
    import torch  # noqa: F401

    ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: a child's orphaned workers are reaped here
    # without this script's directory, nor the warm process's own PYTHONPATH: a call's comes from its environment
    own = {os.path.abspath(e) for e in os.environ.get("PYTHONPATH", "").split(os.pathsep) if e}
    base_path = [e for e in sys.path[1:] if os.path.abspath(e) not in own]
    running: dict[int, str] = {}  # pid -> base
    draining: dict[int, tuple[str, int]] = {}  # pgid -> (base, exit code): the child ended, its group not yet
    open_input, pending = True, b""
    while open_input or running or draining:
        if open_input and select.select([0], [], [], 0.02)[0]:
            chunk = os.read(0, 65536)
            open_input, pending = bool(chunk), pending + chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                req = json.loads(line)
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    _child(req, base_path)
                _write(req["base"] + ".pid", str(pid))
                running[pid] = req["base"]
        elif not open_input:
            time.sleep(0.02)
        while True:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            if pid in running:
                draining[pid] = (running.pop(pid), os.waitstatus_to_exitcode(st))
        for pgid in [g for g in draining if not _group_alive(g)]:
            base, code = draining.pop(pgid)
            _write(base + ".status", str(code))


if __name__ == "__main__":
    serve("--plain" in sys.argv[1:])
