"""Root causes: what a failure's one-line detail names, and the key that groups one bug across ops and recipes
(torch-free).

* An exception: libraries wrap what went wrong (ExecuTorch's pass manager re-raises "An error occurred when running
  the '…' pass after the following passes: […]", torch.export its own), so the detail leads with the innermost
  exception of the chain (``__cause__``, else ``__context__``): its type, its first line and where it was raised (the
  last frame of its traceback). The wrapper follows; the whole chain stays in the record's ``error.trace``.
* A crash: the worker's process is gone, so its own output says why. ``fatal_cause`` finds the fatal line in what
  the worker wrote to its log while the item ran: a runtime's failed check (ExecuTorch's ``[op_quantize.cpp:427] …
  assert failed (…)``, a C++ ``terminate called … what(): …``, a C ``Assertion … failed``), and the Python frames
  ``faulthandler`` printed.
* A native runtime's error code: ExecuTorch returns one (``method->execute() failed with error 0x1``) after it has
  logged why (``[XNNExecutor.cpp:169] Internal Error: Propagating input shapes failed …``) on the worker's stderr.
  ``runtime_said`` finds that line in what the stage wrote there, and the detail and the signature carry it.
* A C++ library that nests its exceptions as text (OpenVINO: "Exception from src/inference/src/cpp/core.cpp:114:" on a
  line of its own, then the next level's, down to the message): the innermost level's message, with the source line
  that threw it, leads; the outer levels stay in the message's later lines. So every OpenVINO compile failure is not
  one signature.
* ``signature``: type, message with its numbers and addresses blanked, and the function that raised it. One upstream
  bug met by many ops on many recipes is one signature.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import PurePath
from types import TracebackType

_SITE = re.compile(r".*?/(?:site|dist)-packages/|.*/(?=harness/)")  # a package's path from its own directory
_NUMBER = re.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:e[-+]?\d+)?")
_NESTED = re.compile(r"^Exception from (\S+:\d+):?$")  # one level of a C++ exception nested as text (OpenVINO)
# OpenVINO's failed assertion (OPENVINO_ASSERT): "Check 'is_conversion_successful' failed at src/…/frontend.cpp:140:",
# its explanation on the next line
_CHECK = re.compile(r"^Check '.*' failed at \S+:\d+:?$")
_FRAME = re.compile(r'File "(.+)", line (\d+) in (\S+)')  # a frame as faulthandler prints it
# the frames a Python thread waits in when it has nothing to do (a pool's worker, a queue, a selector)
_IDLE = re.compile(r'/(?:concurrent/futures/thread|threading|queue|selectors|socket)\.py", line \d+ in ')
_FATAL = (  # (pattern, what it is), in order of preference: the runtime's own words first
    re.compile(r"assert(?:ion)? failed|Check failed|Assertion .* failed"),
    re.compile(r"terminate called|what\(\):"),
    # glibc's own aborts: its heap checks ("malloc(): unaligned tcache chunk detected", "double free or corruption
    # (out)") and fortify's ("*** stack smashing detected ***: terminated")
    re.compile(r"^(?:malloc|free|realloc|calloc|munmap_chunk|malloc_consolidate|_int_malloc|_int_free)\(\): |"
               r"^double free or corruption|^corrupted (?:size vs\. prev_size|double-linked list)|"
               r"^\*\*\* (?:stack smashing|buffer overflow) detected \*\*\*"),
    # Python's own fatal errors, but not faulthandler's restatement of the signal ("Fatal Python error: Aborted"),
    # which says no more than the signal does
    re.compile(r"Fatal Python error: (?!(?:Segmentation fault|Bus error|Floating point exception|Illegal instruction|Aborted)$)"),
)


def _links(exc: BaseException) -> list[BaseException]:
    """``exc``'s chain, outermost first (``__cause__``, else ``__context__``; a cycle ends it)."""
    out: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and all(link is not seen for seen in out):
        out.append(link)
        link = link.__cause__ or link.__context__
    return out


def root_cause(exc: BaseException) -> BaseException:
    """The innermost exception of ``exc``'s chain (``__cause__``, else ``__context__``)."""
    return _links(exc)[-1]


def _tool_said(exc: subprocess.CalledProcessError) -> str:
    """What a failed tool said: the last line of its stderr (else its output) that says "error", else "fail" or "abort",
    else its last line."""
    text = exc.stderr or exc.output or ""
    lines = [ln.strip() for ln in (text.decode(errors="replace") if isinstance(text, bytes) else str(text)).splitlines()]
    lines = [ln for ln in lines if ln]
    for word in ("error", "fail|abort"):
        said = next((ln for ln in reversed(lines) if re.search(word, ln, re.IGNORECASE)), "")
        if said:
            return said
    return lines[-1] if lines else ""


def _first(exc: BaseException) -> str:
    """An exception's message's first line (its type's name when it has none), without a repeat of that type: a
    message re-raised across a process may carry it. A failed tool (``CalledProcessError``) is named by its program
    and status, then what it said on stderr: its command line holds temporary paths, which would make every item's
    signature differ and say nothing of the cause."""
    name = type(exc).__name__
    if isinstance(exc, subprocess.CalledProcessError):
        cmd = exc.cmd if isinstance(exc.cmd, (list, tuple)) else str(exc.cmd).split()
        prog = PurePath(str(cmd[0])).name if cmd else "command"
        said = _tool_said(exc)
        return f"{prog} exited with status {exc.returncode}" + (f": {said}" if said else "")
    return _innermost((str(exc).strip() or name).splitlines()).removeprefix(f"{name}: ")


def _innermost(lines: list[str]) -> str:
    """A message's first line; where it opens with levels of a C++ exception nested as text (``_NESTED``), the
    innermost level's first line and the source line that threw it. A failed check of OpenVINO's (``_CHECK``: "Check
    'cond' failed at file:line:") says why on the line after it, which joins it."""
    where = ""
    stripped = [ln.strip() for ln in lines]
    for i, line in enumerate(stripped):
        nested = _NESTED.match(line)
        if nested:
            where = nested.group(1)
        elif line:
            if _CHECK.match(line):  # it says where itself
                said = next((ln for ln in stripped[i + 1:] if ln), "")
                if _NESTED.match(said):  # an outer level: the innermost is further down
                    continue
                return f"{line} {said}" if said else line
            said_where = re.search(r"\bat \S+:\d+", line)  # a line that names its own source line
            return f"{line} (thrown at {where})" if where and i and not said_where else line
    return f"Exception from {where}" if where else lines[0].strip() if lines else ""  # nesting alone: its innermost


def where_raised(tb: TracebackType | None) -> str:
    """``path:line in function`` of a traceback's last frame (a package's path from its package directory)."""
    last = None
    while tb is not None:
        last, tb = tb, tb.tb_next
    if last is None:
        return ""
    code = last.tb_frame.f_code
    return f"{_SITE.sub('', code.co_filename)}:{last.tb_lineno} in {code.co_name}"


def describe(exc: BaseException) -> tuple[str, str, str]:
    """(root type, message, where): the message leads with the root cause and where it was raised, then the wrapper's
    first line, then the rest of the root's message."""
    root = root_cause(exc)
    rtype, where = type(root).__name__, where_raised(root.__traceback__)
    head = f"{rtype}: {_first(root)}" + (f" (raised at {where})" if where else "")
    if root is not exc:
        head += f"; wrapped by {type(exc).__name__}: {_first(exc)}"
    lines = (str(root).strip() or rtype).splitlines()
    rest = lines if _NESTED.match(lines[0].strip()) else lines[1:]  # a nested message keeps its outer levels
    return rtype, "\n".join([head, *rest]), where


def chain(exc: BaseException) -> list[str]:
    """Every link of ``exc``'s chain, outermost first: ``Type: first line (raised at …)``."""
    out = []
    for link in _links(exc):
        where = where_raised(link.__traceback__)
        out.append(f"{type(link).__name__}: {_first(link)[:300]}" + (f" (raised at {where})" if where else ""))
    return out


def root_signature(exc: BaseException) -> str:
    """``signature`` of the root cause of ``exc``'s chain."""
    root = root_cause(exc)
    return signature(type(root).__name__, _first(root), where_raised(root.__traceback__))


def signature(kind: str, message: str, where: str = "") -> str:
    """One bug's key: the type, the message's first line with numbers and addresses blanked (shapes and sizes differ
    from op to op), the raising function (not its line, which moves between versions)."""
    first = message.splitlines()[0] if message else ""
    func = where.rsplit(" in ", 1)
    place = f"{func[0].rsplit(':', 1)[0]}:{func[1]}" if len(func) == 2 else where
    return f"{kind}: {_NUMBER.sub('N', first)[:240]}" + (f" @ {place}" if place else "")


@dataclass(frozen=True)
class Crash:
    """Why a worker died, from its own output: the fatal line, the Python frames faulthandler printed, the log."""

    signal: str
    cause: str = ""
    frames: tuple[str, ...] = ()
    log: str = ""

    def as_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"signal": self.signal, "cause": self.cause, "log": self.log}
        if self.frames:
            out["frames"] = list(self.frames)
        return out

    @property
    def where(self) -> str:
        """``path:line in function`` of the innermost Python frame faulthandler printed ("" without one)."""
        m = _FRAME.match(self.frames[0]) if self.frames else None
        return f"{_SITE.sub('', m.group(1))}:{m.group(2)} in {m.group(3)}" if m else ""

    @property
    def signature(self) -> str:
        return signature("CRASH", self.cause or self.signal, self.where)


# ExecuTorch's ET_LOG lines, as the pip runtime writes them ("[method.cpp:1528] CALL_DELEGATE execute failed at
# instruction 0: 0x1") or with the default log's level and time ("E 00:57:19.400820 executorch:method.cpp:1528] …")
_RUNTIME_LINE = re.compile(r"^(?:(?P<level>[DIWEF]) [\d:.]+ executorch:|\[)[\w./-]+\.(?:cpp|cc|c|h|hpp|mm?):\d+\] (?P<msg>.*)")
_RUNTIME_NOISE = re.compile(r"cpuinfo_utils\.cpp:")  # the CPU probe's first-use notes ("Failed to open midr file")
_RUNTIME_BAD = re.compile(r"error|fail|invalid|illegal|assert|mismatch|unsupported|not (?:supported|found|registered|available|a )|"
                          r"attempt|immutable|not mutable|does not match|missing|null|cannot|can't|could not|unable|exceed|"
                          r"overflow|out of (?:range|bounds|memory)|expected|must ", re.IGNORECASE)
# an exception that says no more than a runtime's error code: what the runtime logged says why
_ERROR_CODE = re.compile(r"(?:error|failed)\W{0,3}0x:?[0-9a-fA-F]+\b|error code", re.IGNORECASE)


def runtime_said(text: str) -> str:
    """The first error a native runtime logged in ``text`` (ExecuTorch's ``[file.cpp:line] message``), "" if none.
    The innermost cause is logged first ("[tensor_impl.cpp:108] Attempted to change the tensor rank which is
    immutable"), then each caller's on the way out ("[method.cpp:1243] Error resizing tensor at input 0"); the
    runtime's notes ("Loading method forward") and the CPU probe's are not errors. A line with a level says it: E and F
    are errors, D, I and W not."""
    for line in text.splitlines():
        line = line.strip()
        m = _RUNTIME_LINE.match(line)
        if not m or _RUNTIME_NOISE.search(line):
            continue
        level = m.group("level")
        if level in ("E", "F") or (level is None and _RUNTIME_BAD.search(m.group("msg"))):
            return line[:500]
    return ""


def says_only_a_code(message: str) -> bool:
    """Whether an exception's message is a runtime's error code (``failed with error 0x1``, ``error: 0x:1``), which
    what the runtime logged explains; any other exception speaks for itself."""
    return bool(_ERROR_CODE.search(message.splitlines()[0] if message else ""))


def fatal_cause(text: str) -> tuple[str, tuple[str, ...]]:
    """The fatal line of a dead worker's output (the runtime's failed check, an uncaught C++ exception, Python's
    fatal error), and the innermost Python frames faulthandler dumped ("" and () when the output says nothing)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    cause = ""
    for pattern in _FATAL:
        hits = [i for i, line in enumerate(lines) if pattern.search(line)]
        if hits:
            i = hits[-1]
            cause = lines[i]
            if "what()" in cause and i > 0 and lines[i - 1].startswith("terminate called"):
                cause = f"{lines[i - 1]} {cause}"
            elif cause.startswith("terminate called") and i + 1 < len(lines) and "what()" in lines[i + 1]:
                cause = f"{cause} {lines[i + 1]}"
            break
    # faulthandler: "Current thread 0x… (most recent call first):", then its frames, innermost first. A native thread
    # that is not Python's (a runtime's own pool) has no such block: every Python thread is a "Thread 0x…" block, and
    # the one not idle in the standard library's thread machinery is the one that called into the native code.
    blocks: list[tuple[str, list[str]]] = []
    inside = False
    for line in lines:
        if line.startswith(("Current thread", "Stack (most recent", "Thread 0x")):
            blocks.append((line, []))
            inside = True
        elif inside and line.startswith("File \""):
            blocks[-1][1].append(line)
        else:
            inside = False
    current = [f for head, f in blocks if not head.startswith("Thread 0x")]
    busy = [f for head, f in blocks if head.startswith("Thread 0x") and f and not _IDLE.search(f[0])]
    frames = current[0] if current else busy[0] if len(busy) == 1 else []
    return cause[:500], tuple(frames[:4])
