"""Runtime providers: where an ExecuTorch program runs.

A provider takes a program (``.pte`` bytes, or a bundled program ``.bpte``), the inputs and the run
options, runs ``forward`` ``warmup`` + ``repeats`` times, and returns the outputs, the load time, each
timed run's latency and what it knows of memory (``Execution``). Three providers:

``pybind``
    In this process, through ``executorch.runtime`` (the pip wheel's runtime). ``threads`` resets the
    runtime's thread pool (the only runtime option the pybindings expose; the XNNPACK weight cache and
    workspace sharing are not reachable from Python).
``runner[:PATH]``
    An ``executor_runner``-style binary in a subprocess (``bti_runner``, built by ``bti runner build``;
    or ``$BTI_RUNNER``; or ``python -m harness.pyrunner`` which speaks the same interface through the
    pybindings). A runner killed by a signal is CRASH for that item only; one that overruns
    ``timeout`` is TIMEOUT.
``command:TEMPLATE``
    A template that reaches a device: ``adb -s {serial} shell /data/local/tmp/bti_runner {args}``,
    ``ssh board /opt/bti_runner {args}``, a simulator. Files go there with a ``push`` template
    (``adb -s {serial} push {local} {remote}``) and come back with ``pull``
    (``adb -s {serial} pull {remote} {local}``), run once per file; without them the command sees this
    machine's files. ``remote_dir`` is where the files go on the device.

The runner interface (what ``{args}`` expands to; ``bti_runner`` and ``harness.pyrunner`` implement it)::

    (--model_path FILE.pte | --bundled_program FILE.bpte [--testset_idx N])
    [--inputs in_0.bin,in_1.bin,...] [--input_shapes 2x3,4] [--input_dtypes float32,int64]
    [--warmup N] [--iterations N] [--threads N] --output_dir DIR

Inputs are raw little-endian tensor bytes, one file per input (a bundled program uses its own test
set's inputs unless ``--inputs`` is given). The runner writes each output to ``DIR/out_<i>.bin`` and
prints one JSON line: ``{"load_ms", "latencies_ms": [...], "outputs": [{"file", "dtype", "shape"}],
"max_rss_kb"}``; any error is a non-zero exit with a message on stderr.

Templates are split like a shell command line (``shlex``) and run without a shell; each word is
formatted with ``{args}`` (expanded to several words), ``{program}``, ``{output_dir}``, ``{local}``,
``{remote}`` and the ``vars`` given (``--runtime-var serial=…``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Protocol

from harness.errors import UserError, first_line
from harness.metrics import timed_calls
from harness.status import Status

PROVIDERS = ("pybind", "runner", "command")
DTYPES = ("float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32", "int64", "bool")


class ProviderError(RuntimeError):
    """The provider ran, and the program (or the runner) failed: the item's run stage failed.

    ``status``: the item's status when a subclass says more than "the stage failed" (None: the stage's failure)."""

    status: ClassVar[Status | None] = None


class ProviderCrash(ProviderError):
    """The runner process died (a signal, or no result at all): CRASH for this item only."""

    status = Status.CRASH


class ProviderTimeout(ProviderError):
    """The runner overran its time limit: TIMEOUT for this item only."""

    status = Status.TIMEOUT


class ProviderUnsupported(ProviderError):
    """The provider cannot take this case (e.g. a non-tensor input to a subprocess runner)."""

    status = Status.SKIP


class ProviderSetup(ProviderError):
    """The way to the device failed (a push or pull, a runner that cannot start): ERROR, triage infra,
    never the backend's fault."""

    status = Status.ERROR


@dataclass(frozen=True)
class RunOptions:
    warmup: int = 1
    repeats: int = 3
    threads: int | None = None
    timeout_s: float = 600.0
    testset: int = 0  # which bundled test case (a .bpte)


@dataclass
class Execution:
    """What one provider call returns. ``memory_mb``: what the provider can see (``peak_rss`` of the
    runner process, or this process's growth over load and run)."""

    outputs: list[Any]
    load_ms: float
    latencies_ms: list[float]
    provider: str
    memory_mb: dict[str, float] = field(default_factory=dict)


class Provider(Protocol):
    name: str

    def execute(self, program: bytes, kind: str, inputs: Sequence[Any] | None, opts: RunOptions) -> Execution:
        """Load ``program`` (``kind`` "pte" or "bpte"), run it ``opts.warmup`` + ``opts.repeats`` times on
        ``inputs`` (None: a bundled program's own), return the outputs of the last run and the timings."""
        ...


@dataclass(frozen=True)
class ProviderSpec:
    """A provider as a recipe (``runtime.provider``) or ``--runtime`` names it, parsed and checked."""

    kind: str = "pybind"
    target: str = ""  # runner: the binary; command: the template
    push: str | None = None
    pull: str | None = None
    remote_dir: str | None = None
    vars: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def label(self) -> str:
        return self.kind

    def build(self, isolated: bool = False) -> Provider:
        if self.kind == "pybind":
            return PybindProvider(isolated)
        if self.kind == "runner":
            return ProcessProvider("runner", [*runner_command(self.target), "{args}"])
        return ProcessProvider("command", _split(self.target, "command"), self.push, self.pull, self.remote_dir,
                               dict(self.vars))


def parse_spec(text: str, push: str | None = None, pull: str | None = None, remote_dir: str | None = None,
               variables: Mapping[str, str] | None = None) -> ProviderSpec:
    """``pybind`` | ``runner`` | ``runner:PATH`` | ``command:TEMPLATE``; ValueError with the reason."""
    kind, _, target = text.partition(":")
    kind = kind.strip()
    if kind not in PROVIDERS:
        raise ValueError(f"unknown runtime provider {text!r} (known: pybind, runner[:PATH], command:TEMPLATE)")
    if kind == "pybind" and target:
        raise ValueError("the pybind provider takes no argument")
    if kind == "command":
        words = _split(target, "command")
        if not words:
            raise ValueError("command: needs a template, e.g. command:'ssh board /opt/bti_runner {args}'")
        if "{args}" not in words and not any("{program}" in w for w in words):
            raise ValueError("a command template needs {args} (the runner arguments) or {program}")
    if kind == "command":
        _check_template(words, "command", variables or {})
    for name, tmpl in (("push", push), ("pull", pull)):
        if tmpl is not None:
            if kind != "command":
                raise ValueError(f"--runtime-{name} is for the command provider")
            words = _split(tmpl, name)
            if not any("{local}" in w for w in words) or not any("{remote}" in w for w in words):
                raise ValueError(f"the {name} template needs {{local}} and {{remote}}")
            _check_template(words, name, variables or {})
    if (push is None) != (pull is None):
        raise ValueError("push and pull templates go together (files go to the device and outputs come back)")
    return ProviderSpec(kind, target.strip(), push, pull, remote_dir,
                        MappingProxyType(dict(variables or {})))


FIELDS = ("args", "program", "output_dir", "local", "remote")


def _check_template(words: list[str], what: str, variables: Mapping[str, str]) -> None:
    """Every word must format with the known fields and the given variables: a typo is one line now,
    not a failure of every item later."""
    table = {**dict.fromkeys(FIELDS, "x"), **variables}
    for w in words:
        try:
            w.format(**table)
        except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
            known = ", ".join([*FIELDS, *sorted(variables)])
            raise ValueError(f"the {what} template word {w!r} does not format ({type(exc).__name__}: {exc}; "
                             f"fields: {known}; give others with --runtime-var NAME=VALUE)") from None


def _split(template: str, what: str) -> list[str]:
    try:
        return shlex.split(template)
    except ValueError as exc:
        raise ValueError(f"the {what} template does not parse: {exc}") from None


def runner_command(target: str = "") -> list[str]:
    """The runner to start: ``runner:PATH``, else ``$BTI_RUNNER``, else the one ``bti runner build``
    made, else none (a one-line error naming the ways to get one)."""
    from harness.settings import current

    words = shlex.split(target) if target else list(current().runner)
    if words:
        exe = words[0]
        found = exe if os.sep in exe else shutil.which(exe)
        if not found or not os.path.isfile(found) or not os.access(found, os.X_OK):
            where = "runner:" if target else "$BTI_RUNNER "
            raise UserError(f"the runner {where}{exe} is not an executable file (build one with `bti runner build`)")
        return words
    built = default_runner_path()
    if built.is_file() and os.access(built, os.X_OK):
        return [str(built)]
    raise UserError("no runner binary: build one with `bti runner build`, or give runner:PATH or $BTI_RUNNER "
                    f"(`{sys.executable} -m harness.pyrunner` speaks the same interface)")


def default_runner_path() -> Path:
    from harness.settings import current

    base = current().cache_dir
    return base / "runner" / "bti_runner"


# -- pybind -----------------------------------------------------------------------------------------


@dataclass
class Loaded:
    """Keeps the Program (and its bytes) alive while the Method runs: executorch.runtime's
    ``load_program(buf).load_method(...)`` chain frees the Program under the Method."""

    blob: bytes
    program: Any
    method: Any
    mutations: int = 0


def run_forked(fn: Any) -> Any:
    """``fn()`` in a forked child; its result comes back pickled. A child killed by a signal (the runtime
    aborting on a corrupt program) is ``ProviderCrash`` naming the runtime's last log line; an exception in
    the child is re-raised here as ``ProviderError``."""
    import pickle

    rfd, wfd = os.pipe()
    with tempfile.TemporaryFile() as log:
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 0
            try:
                os.close(rfd)
                os.dup2(log.fileno(), 2)
                try:
                    payload = pickle.dumps(("ok", fn()))
                except Exception as exc:
                    payload = pickle.dumps(("error", f"{type(exc).__name__}: {first_line(str(exc))}"))
                with os.fdopen(wfd, "wb") as w:
                    w.write(payload)
            except BaseException:
                code = 1
            os._exit(code)
        os.close(wfd)
        with os.fdopen(rfd, "rb") as r:
            data = r.read()
        _, status = os.waitpid(pid, 0)
        log.seek(0)
        lines = [x for x in log.read().decode(errors="replace").splitlines() if x.strip() and "cpuinfo" not in x]
    if os.WIFSIGNALED(status):
        last = lines[-1].split("] ", 1)[-1][:200] if lines else "no message"
        raise ProviderCrash(f"the runtime died with signal {os.WTERMSIG(status)} ({last})")
    if not data:
        raise ProviderCrash(f"the runtime process exited {os.WEXITSTATUS(status)} without a result")
    kind, value = pickle.loads(data)
    if kind == "error":
        raise ProviderError(value)
    return value


class PybindProvider:
    name = "pybind"

    def __init__(self, isolated: bool = False) -> None:
        self.isolated = isolated  # each execute in a forked child (bti verify): a runtime abort is a CRASH record

    @staticmethod
    def set_threads(threads: int | None) -> None:
        if threads:
            from executorch.extension.pybindings.portable_lib import _unsafe_reset_threadpool

            _unsafe_reset_threadpool(int(threads))

    @staticmethod
    def load(blob: bytes, method: str = "forward", mutations: int = 0) -> Loaded:
        from executorch.runtime import Runtime

        program = Runtime.get().load_program(blob)
        return Loaded(blob, program, program.load_method(method), mutations)

    @staticmethod
    def run(handle: Loaded, inputs: Sequence[Any]) -> list[Any]:
        outs = handle.method.execute(list(inputs))
        return list(outs)[handle.mutations:]  # the runtime returns mutated inputs first; eager does not

    def execute(self, program: bytes, kind: str, inputs: Sequence[Any] | None, opts: RunOptions) -> Execution:
        if self.isolated:
            return run_forked(lambda: PybindProvider(False).execute(program, kind, inputs, opts))  # type: ignore[no-any-return]
        from harness.env import rss_mb

        if kind == "bpte":
            program, cases = bundled_cases(program)
            if inputs is None:
                inputs = cases[min(opts.testset, len(cases) - 1)][0]
        if inputs is None:
            raise ProviderUnsupported("no inputs: a .pte needs inputs (a .bpte carries its own)")
        self.set_threads(opts.threads)
        rss0 = rss_mb()
        t0 = time.perf_counter()
        try:
            handle = self.load(program)
        except Exception as exc:
            raise ProviderError(f"load: {first_line(str(exc)) or type(exc).__name__}") from exc
        load_ms = (time.perf_counter() - t0) * 1000.0
        rss1 = rss_mb()
        outs, samples = timed_calls(lambda: self.run(handle, inputs), opts.warmup, opts.repeats)
        return Execution(list(outs), load_ms, samples, self.name,
                         {"load_growth": round(rss1 - rss0, 1), "run_growth": round(rss_mb() - rss1, 1)})


# -- a runner in a subprocess, here or on a device ---------------------------------------------------


class ProcessProvider:
    """``runner`` and ``command``: files in a fresh local directory, pushed when there is a ``push``
    template, the runner started from the template, outputs pulled back and read."""

    def __init__(self, name: str, template: list[str], push: str | None = None, pull: str | None = None,
                 remote_dir: str | None = None, variables: dict[str, str] | None = None) -> None:
        self.name = name
        self.template = template
        self.push = _split(push, "push") if push else None
        self.pull = _split(pull, "pull") if pull else None
        self.remote_dir = remote_dir
        self.vars = variables or {}

    def _fill(self, words: list[str], values: dict[str, Any], args: list[str] | None = None) -> list[str]:
        """Format each word; a word that is exactly ``{args}`` becomes the runner arguments, and ``{args}``
        inside a word (``ssh board 'cd /x && ./bti_runner {args}'``) becomes them shell-quoted."""
        out: list[str] = []
        table = {**dict.fromkeys(FIELDS, ""), **self.vars, **values, "args": shlex.join(args or [])}
        for w in words:
            if w == "{args}" and args is not None:
                out.extend(args)
                continue
            try:
                out.append(w.format(**table))
            except (KeyError, IndexError, ValueError, AttributeError, TypeError) as exc:
                raise ProviderSetup(f"runtime template word {w!r} does not format: {exc}") from None
        return out

    def _call(self, argv: list[str], timeout: float, what: str) -> subprocess.CompletedProcess[str]:
        problem: ProviderError | None = None  # raised outside the handler: the record names this error, not its cause
        try:  # its own process group: a timeout kills the runner and whatever it started
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            raise ProviderSetup(f"{what} could not start: {argv[0]}: {exc.strerror or exc}") from None
        try:
            out, err = proc.communicate(timeout=timeout)
            return subprocess.CompletedProcess(argv, proc.returncode, out, err)
        except subprocess.TimeoutExpired:
            problem = ProviderTimeout(f"{what} did not finish within {timeout:g} s: {shlex.join(argv)[:200]}")
        finally:
            if proc.returncode is None:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
        raise problem

    def execute(self, program: bytes, kind: str, inputs: Sequence[Any] | None, opts: RunOptions) -> Execution:
        import torch

        local = Path(tempfile.mkdtemp(prefix="bti-runtime-"))
        try:
            remote = f"{self.remote_dir.rstrip('/')}/{uuid.uuid4().hex[:12]}" if self.remote_dir else str(local)
            name = f"program.{kind}"
            (local / name).write_bytes(program)
            files = [name]
            flag = "--bundled_program" if kind == "bpte" else "--model_path"
            args = [flag, f"{remote}/{name}"]
            if kind == "bpte":
                args += ["--testset_idx", str(opts.testset)]
            if inputs is not None:
                shapes, dtypes = [], []
                for i, x in enumerate(inputs):
                    if not isinstance(x, torch.Tensor):
                        raise ProviderUnsupported(f"input {i} is a {type(x).__name__}; a runner takes tensors only")
                    t = x.detach().cpu().contiguous()
                    (local / f"in_{i}.bin").write_bytes(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
                    files.append(f"in_{i}.bin")
                    shapes.append("x".join(str(d) for d in t.shape) or "scalar")
                    dtypes.append(str(t.dtype).replace("torch.", ""))
                if inputs:
                    args += ["--inputs", ",".join(f"{remote}/in_{i}.bin" for i in range(len(inputs))),
                             "--input_shapes", ",".join(shapes), "--input_dtypes", ",".join(dtypes)]
            args += ["--warmup", str(opts.warmup), "--iterations", str(max(1, opts.repeats)),
                     "--output_dir", f"{remote}/out"]
            if opts.threads:
                args += ["--threads", str(opts.threads)]
            if self.push:
                for f in files:
                    p = self._call(self._fill(self.push, {"local": str(local / f), "remote": f"{remote}/{f}"}),
                                   opts.timeout_s, "push")
                    if p.returncode != 0:
                        raise ProviderSetup(f"push {f} failed (exit {p.returncode}): {_tail(p.stderr)}")
            argv = self._fill(self.template, {"program": f"{remote}/{name}", "output_dir": f"{remote}/out"}, args)
            proc = self._call(argv, opts.timeout_s, f"the {self.name} runtime")
            if proc.returncode < 0 or proc.returncode >= 128:
                sig = -proc.returncode if proc.returncode < 0 else proc.returncode - 128
                raise ProviderCrash(f"the runner died with signal {sig}: {_tail(proc.stderr)}")
            if proc.returncode != 0:
                raise ProviderError(f"runner exit {proc.returncode}: {_tail(proc.stderr)}")
            report = _report(proc.stdout)
            outs = []
            (local / "out").mkdir(exist_ok=True)
            for i, meta in enumerate(report["outputs"]):  # each a checked {file, dtype, shape} (_report)
                fname = Path(str(meta.get("file", f"out_{i}.bin"))).name
                if self.pull:
                    p = self._call(self._fill(self.pull, {"remote": f"{remote}/out/{fname}",
                                                          "local": str(local / "out" / fname)}), opts.timeout_s, "pull")
                    if p.returncode != 0:
                        raise ProviderSetup(f"pull {fname} failed (exit {p.returncode}): {_tail(p.stderr)}")
                outs.append(_read_tensor(local / "out" / fname, meta))
            mem = {"peak_rss": round(report["max_rss_kb"] / 1024.0, 1)} if report.get("max_rss_kb") else {}
            return Execution(outs, report["load_ms"], report["latencies_ms"], self.name, mem)
        finally:
            shutil.rmtree(local, ignore_errors=True)


def _tail(text: str) -> str:
    lines = [x for x in (text or "").splitlines() if x.strip()]
    return (lines[-1] if lines else "no message")[:300]


def _report(stdout: str) -> dict[str, Any]:
    """The runner's last JSON line, every field checked and converted (a malformed line is the runner's
    fault: FAIL_RUN naming what is wrong, never a bti traceback)."""
    for line in reversed((stdout or "").splitlines()):
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            raw = json.loads(line)
            if not isinstance(raw, dict):
                raise TypeError("not a JSON object")
            outputs: list[dict[str, Any]] = []
            for o in raw["outputs"]:
                if not isinstance(o, dict):
                    raise TypeError(f"an output is {type(o).__name__}, not an object")
                shape = [int(d) for d in o.get("shape", [])]
                if any(d < 0 for d in shape):
                    raise ValueError(f"negative size in shape {shape}")
                outputs.append({"file": str(o.get("file", f"out_{len(outputs)}.bin")), "dtype": str(o.get("dtype")),
                                "shape": shape})
            lat = [float(x) for x in raw["latencies_ms"]]
            return {"load_ms": float(raw["load_ms"]), "latencies_ms": lat, "outputs": outputs,
                    "max_rss_kb": float(raw.get("max_rss_kb") or 0)}
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise ProviderError(f"the runner's result line is malformed ({type(exc).__name__}: {exc}): {line[:200]}") from None
    raise ProviderCrash(f"the runner printed no result line: {_tail(stdout)}")


def _read_tensor(path: Path, meta: Mapping[str, Any]) -> Any:
    import torch

    dtype_name = str(meta.get("dtype"))
    if dtype_name not in DTYPES:
        raise ProviderError(f"runner output {path.name}: unknown dtype {dtype_name!r}")
    shape = [int(d) for d in meta.get("shape", [])]
    dtype = getattr(torch, dtype_name)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ProviderError(f"runner output {path.name} is missing: {exc.strerror or exc}") from None
    n = 1
    for d in shape:
        n *= d
    itemsize = torch.empty((), dtype=dtype).element_size()
    if len(data) != n * itemsize:
        raise ProviderError(f"runner output {path.name}: {len(data)} bytes for shape {shape} {dtype_name}")
    if n == 0:
        return torch.empty(shape, dtype=dtype)
    return torch.frombuffer(bytearray(data), dtype=dtype).reshape(shape).clone()


# -- bundled programs --------------------------------------------------------------------------------

# ExecuTorch ScalarType codes (executorch/exir/scalar_type.py) -> torch dtype names, for bundled tensors.
SCALAR_TYPES = {0: "uint8", 1: "int8", 2: "int16", 3: "int32", 4: "int64", 5: "float16", 6: "float32", 7: "float64",
                11: "bool", 15: "bfloat16"}


def _bundled_value(value: Any) -> Any:
    import torch

    if hasattr(value, "scalar_type"):  # a bundled Tensor
        name = SCALAR_TYPES.get(int(value.scalar_type))
        if name is None:
            raise ValueError(f"bundled tensor of unsupported scalar type {value.scalar_type}")
        dtype = getattr(torch, name)
        flat = torch.frombuffer(bytearray(value.data), dtype=dtype) if value.data else torch.empty(0, dtype=dtype)
        return flat.reshape(list(value.sizes)).clone()
    for attr, cast in (("int_val", int), ("double_val", float), ("bool_val", bool)):
        if hasattr(value, attr):
            return cast(getattr(value, attr))
    raise ValueError(f"bundled value of unsupported kind {type(value).__name__}")


def bundled_cases(buf: bytes, method: str = "forward") -> tuple[bytes, list[tuple[list[Any], list[Any]]]]:
    """The program bytes and the (inputs, expected outputs) test cases of a bundled program; ValueError
    on a truncated or corrupt bundle (checked in Python: the runtime's loader crashes on garbage)."""
    from executorch.devtools.bundled_program.serialize import deserialize_from_flatbuffer_to_bundled_program

    try:
        schema = deserialize_from_flatbuffer_to_bundled_program(buf)
    except Exception:
        raise ValueError("not a readable bundled program (truncated or corrupt)") from None
    suites = {s.method_name: s for s in schema.method_test_suites}
    if not suites or not all(suites) or not schema.program:
        raise ValueError("not a readable bundled program (no program or no test suites: truncated or corrupt)")
    if method not in suites:
        raise ValueError(f"bundles no test cases for method {method!r} (it has: {', '.join(sorted(suites)) or 'none'})")
    try:
        cases = [([_bundled_value(v.val) for v in tc.inputs], [_bundled_value(v.val) for v in tc.expected_outputs])
                 for tc in suites[method].test_cases]
    except (ValueError, RuntimeError, TypeError) as exc:
        raise ValueError(f"a bundled tensor does not decode ({first_line(str(exc))}): truncated or corrupt") from None
    if not cases:
        raise ValueError(f"bundles an empty test suite for method {method!r}")
    return bytes(schema.program), cases


def check_program(blob: bytes) -> None:
    """Refuse bytes the runtime would crash on, before anything hands them to a C++ loader: the
    flatbuffer must name an ExecuTorch program and the Python deserializer must read it."""
    if blob[4:8][:2] != b"ET":
        raise ValueError(f"not an ExecuTorch program (file identifier {blob[4:8]!r})")
    from executorch.exir._serialize._program import deserialize_pte_binary

    try:
        deserialize_pte_binary(blob)
    except Exception:
        raise ValueError("not a readable ExecuTorch program (truncated or corrupt)") from None
