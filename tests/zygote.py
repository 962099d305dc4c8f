"""A warm start for the CLI in tests: one process per pytest worker imports torch and ExecuTorch once, then forks a
child for each `run_bti` call, which runs ``python -m harness ARGS`` as a new interpreter would (and ``python -c``
for a test's standalone script): its own working
directory, environment, ``sys.path`` (the directory first, then ``PYTHONPATH``), stdin from /dev/null, stdout and
stderr to files, its exit code (or the signal that ended it) reported back. So a test pays ExecuTorch's import
(about 4 s of CPU a call, ~90 `bti run` calls in a session) once per worker.

What a child shares with the process it forks from, and a fresh interpreter would not: the third-party modules
already imported (torch, ExecuTorch and what they import), nothing of bti's or the tests'. A call whose
environment would change how those import (``PYTHONPATH`` set by the test, ``LD_*``, ``TORCH_*``…) starts a real
interpreter instead (``warm_enough``), as does every call when the warm process cannot start.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

# a caller's variable with one of these prefixes changes what the pre-imported modules did at import: not warm
IMPORT_TIME = ("PYTHON", "LD_", "TORCH", "PYTORCH", "OMP_", "MKL_", "CUDA", "XNNPACK", "EXECUTORCH")


def warm_enough(caller_env: dict[str, str] | None) -> bool:
    return not any(k.startswith(IMPORT_TIME) for k in caller_env or {})


class Zygote:
    """The parent's side: starts the warm process on first use, hands it calls, waits for their exit codes."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.dir = Path(tempfile.mkdtemp(prefix="bti-zygote-"))
        self.lock = threading.Lock()
        self.count = 0
        self.failed = False

    def _start(self) -> subprocess.Popen[bytes] | None:
        if self.proc is None and not self.failed:
            try:
                self.proc = subprocess.Popen([sys.executable, __file__], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL, cwd=self.dir)
            except OSError:
                self.failed = True
            atexit.register(self.close)
        return self.proc if self.proc is not None and self.proc.poll() is None else None

    def close(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def run(self, args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str, str] | None:
        """``python -m harness *args`` in a forked child (see ``python``)."""
        return self.python(["-m", "harness", *args], cwd, env, timeout)

    def python(self, argv: list[str], cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str, str] | None:
        """``python *argv`` (``-m module …`` or ``-c code …``) in a forked child: (exit code, stdout, stderr), or None
        where there is no warm process (run a real interpreter then). A child past ``timeout`` is killed with its
        process group, and ``subprocess.TimeoutExpired`` raised, as ``subprocess.run`` would."""
        if argv[0] not in ("-m", "-c") or len(argv) < 2:
            raise ValueError(f"python -m MODULE or -c CODE, not {argv[:2]}")
        with self.lock:
            proc = self._start()
            if proc is None or proc.stdin is None:
                return None
            self.count += 1
            base = self.dir / str(self.count)
            req = {"argv": argv, "cwd": str(cwd), "env": env, "out": f"{base}.out", "err": f"{base}.err", "status": f"{base}.status"}
            try:
                proc.stdin.write((json.dumps(req) + "\n").encode())
                proc.stdin.flush()
            except OSError:
                return None
        status = Path(req["status"])
        deadline = time.monotonic() + timeout
        while not status.exists():
            if proc.poll() is not None:
                return None
            if time.monotonic() > deadline:
                pid = int(Path(f"{base}.pid").read_text()) if Path(f"{base}.pid").exists() else 0
                if pid:
                    _kill_group(pid)
                raise subprocess.TimeoutExpired(["python", *argv], timeout)
            time.sleep(0.02)
        code = int(status.read_text())
        out, err = (Path(req[k]).read_text(errors="replace") for k in ("out", "err"))
        for suffix in (".out", ".err", ".status", ".pid"):
            Path(f"{base}{suffix}").unlink(missing_ok=True)
        return code, out, err


def _kill_group(pid: int) -> None:
    for kill in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        try:
            kill()
            return
        except OSError:
            continue


# ---------------------------------------------------------------------------------------------- the warm process
def _child(req: dict[str, Any], base_path: list[str]) -> None:
    """In the forked child: become ``python ARGV`` started in ``cwd`` with ``env``, then exit."""
    import atexit as child_atexit
    import importlib
    import runpy
    import traceback

    code = 1
    try:
        os.setpgid(0, 0)  # its own group: a timeout kills bti's workers with it
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        for fd, key in ((1, "out"), (2, "err")):
            os.dup2(os.open(req[key], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 (fd 0, the child's for its life)
        os.chdir(req["cwd"])
        os.environ.clear()
        os.environ.update(req["env"])
        extra = [p for p in req["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:] = [req["cwd"], *extra, *base_path]
        flag, target, *rest = req["argv"]
        sys.argv = [flag, *rest]  # as the interpreter leaves it: -m's argv[0] becomes the module's file (runpy)
        tempfile.tempdir = None
        importlib.invalidate_caches()
        try:
            if flag == "-m":
                runpy.run_module(target, run_name="__main__", alter_sys=True)
            else:
                exec(compile(target, "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
            code = 0
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
        except BaseException:
            traceback.print_exc()
        child_atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def serve() -> None:
    """Import what every call needs, then fork a child per request line on stdin; write each child's pid, then its
    exit code (negative: the signal that ended it), to the files the request names."""
    # the imports every call would repeat; not ExecuTorch's runtime (portable_lib), which bti loads after the
    # backends' own libraries (OpenVINO's delegate must register first)
    import executorch.exir  # noqa: F401
    import torch  # noqa: F401

    base_path = sys.path[1:]  # without this script's directory
    children: dict[int, str] = {}
    pending = b""
    open_input = True
    while open_input or children:
        ready = select.select([0], [], [], 0.02)[0] if open_input else []
        if ready:
            chunk = os.read(0, 65536)
            open_input = bool(chunk)
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                req = json.loads(line)
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    _child(req, base_path)
                Path(req["status"]).with_suffix(".pid").write_text(str(pid))
                children[pid] = req["status"]
        while children:
            pid, st = os.waitpid(-1, os.WNOHANG)
            if pid == 0:
                break
            status = children.pop(pid, None)
            if status is not None:
                Path(status + ".tmp").write_text(str(os.waitstatus_to_exitcode(st)))
                os.replace(status + ".tmp", status)
        if not open_input and children:
            time.sleep(0.02)


if __name__ == "__main__":
    serve()
