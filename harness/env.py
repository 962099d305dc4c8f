"""Versions and machine facts for the results header."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import resource
from importlib.metadata import PackageNotFoundError, distribution, version
from pathlib import Path
from typing import Any

from harness import __version__


def _pkg(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def installed(package: str) -> dict[str, Any]:
    """What pip installed for ``package``: version, and for a VCS or URL install the commit and URL
    (PEP 610 ``direct_url.json``). Recorded in the header, so a check on an upstream commit is only posted
    when that commit is what ran."""
    try:
        dist = distribution(package)
    except PackageNotFoundError:
        return {"package": package, "version": None, "commit": None, "url": None}
    direct = json.loads(dist.read_text("direct_url.json") or "{}")
    return {"package": package, "version": dist.version, "commit": (direct.get("vcs_info") or {}).get("commit_id"),
            "url": direct.get("url")}


# Packages a verdict can depend on beside torch and executorch: each is in the cache key.
VERDICT_PACKAGES = ("torch", "executorch", "torchao", "openvino", "nncf", "transformers", "torchvision", "timm",
                    "onnxruntime", "onnxscript", "coremltools", "numpy", "tosa-tools", "ethos-u-vela",
                    "ai-ml-sdk-model-converter")


def verdict_versions() -> dict[str, str]:
    """The installed version of each of ``VERDICT_PACKAGES`` (``not installed`` if absent)."""
    return {name: _pkg(name) for name in VERDICT_PACKAGES}


def module_distribution(module: str) -> str | None:
    """``name==version`` of the installed distribution that provides top-level ``module``, if any
    (a backend plugin given as ``module:Class`` or by entry point)."""
    from importlib.metadata import packages_distributions

    top = module.split(".", 1)[0]
    names = packages_distributions().get(top) or []
    return f"{names[0]}=={_pkg(names[0])}" if names else None


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def rss_mb() -> float:
    """This process's resident set size now, in MiB."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


SCRATCH_PREFIX = "bti-lower-"  # a worker's scratch directories: bti-lower-<pid>-<random> in the system temp directory


def scratch_prefix(pid: int | None = None) -> str:
    return f"{SCRATCH_PREFIX}{os.getpid() if pid is None else pid}-"


def remove_scratch(pid: int) -> None:
    """Remove what a dead worker left in the temp directory (killed mid-lowering: its own clean-up never ran)."""
    import glob
    import shutil
    import tempfile

    for path in glob.glob(os.path.join(glob.escape(tempfile.gettempdir()), glob.escape(scratch_prefix(pid)) + "*")):
        shutil.rmtree(path, ignore_errors=True)


def total_memory_gb() -> float:
    """This machine's RAM in GiB (psutil; a cgroup v2 limit below it wins, as in a container)."""
    import psutil

    total = float(psutil.virtual_memory().total) / 2**30
    with contextlib.suppress(OSError, ValueError):
        with open("/sys/fs/cgroup/memory.max") as fh:
            text = fh.read().strip()
        if text != "max":
            total = min(total, int(text) / 2**30)
    return total


def process_rss_mb(pid: int) -> float:
    """Another process's resident set size now, in MiB (0 when it is gone)."""
    import psutil

    try:
        return float(psutil.Process(pid).memory_info().rss) / 2**20
    except (psutil.Error, OSError):
        return 0.0


def process_cpu_s(pid: int, running_children: bool = False) -> float | None:
    """Another process's CPU time so far (user and system), with its reaped children's, and with ``running_children``
    those still running too (a runtime's subprocess); in seconds, None when it is gone. Finding the running children
    reads every process's /proc entry (about 2 ms against 0.09 ms), so the pool asks for them only when an item's time
    is up, not at each item's start."""
    import psutil

    try:
        proc = psutil.Process(pid)
        t = proc.cpu_times()
        total = t.user + t.system + getattr(t, "children_user", 0.0) + getattr(t, "children_system", 0.0)
        for child in proc.children(recursive=True) if running_children else ():
            with contextlib.suppress(psutil.Error, OSError):
                c = child.cpu_times()
                total += c.user + c.system
    except (psutil.Error, OSError):
        return None
    return float(total)


def _cores() -> int | None:
    """The cores this process may run on (its affinity, else the machine's), None when unknown."""
    with contextlib.suppress(AttributeError, OSError):
        return len(os.sched_getaffinity(0))
    return os.cpu_count()


LOAD_NOTE_STARTS = ("its process used", "the machine's load average")  # how the note's clauses begin (root causes omit it)


def load_note(cpu_s: float | None, wall_s: float) -> tuple[str, dict[str, float]]:
    """What a timed-out item had of the machine: the CPU cores its process (and its subprocesses) used on average
    (``cpu_s`` of CPU time over ``wall_s``), and the machine's 5-minute load average against its cores. A load above
    the cores, at least one core of it other processes', means the item waited for a core: a TIMEOUT there may be the
    machine's, not the backend's (RoBERTa's causal LM on ``portable`` timed out beside three processes on two cores and
    passed alone in 41 % of its time). One clause for the record's detail, and the figures."""
    figures: dict[str, float] = {}
    cores = _cores()
    if cores:
        figures["cores"] = float(cores)
    if cpu_s is not None and wall_s > 0:
        figures["worker_cores"] = round(max(0.0, cpu_s) / wall_s, 2)
    with contextlib.suppress(OSError, AttributeError):  # no load average on Windows
        figures["load_5min"] = round(os.getloadavg()[1], 2)
    said = [f"{LOAD_NOTE_STARTS[0]} {figures['worker_cores']:.2f} CPU cores on average"] if "worker_cores" in figures else []
    if "load_5min" in figures:
        load = figures["load_5min"]
        said.append(f"{LOAD_NOTE_STARTS[1]} was {load:.1f}" + (f" on {cores} cores" if cores else ""))
        if cores and load > cores and load - figures.get("worker_cores", 0.0) >= 1.0:
            said.append("more processes than cores slow every item, so run it alone before blaming the backend")
    return "; ".join(said), figures


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MiB (kept across ``PeakMeter`` resets)."""
    return max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, _HIGH_WATER)


_HIGH_WATER = 0.0  # the highest peak a PeakMeter saw: its resets also reset the kernel's ru_maxrss


class PeakMeter:
    """This process's own peak RSS over a span, not since the process began: Linux resets the
    high-water mark (VmHWM) when ``5`` is written to ``/proc/self/clear_refs``. ``start()`` resets,
    ``peak()`` reads it. Where the reset is refused, falls back to the process's peak (then the
    figure only ever rises, and ``exact`` is False)."""

    def __init__(self) -> None:
        self.exact = True

    def start(self) -> float:
        """Reset the high-water mark; returns the RSS now (MiB), the span's starting point."""
        try:
            with open("/proc/self/clear_refs", "w") as fh:
                fh.write("5")
        except OSError:
            self.exact = False
        return round(rss_mb(), 1)

    def peak(self) -> float:
        global _HIGH_WATER
        value = None
        if self.exact:
            try:
                with open("/proc/self/status") as fh:
                    for line in fh:
                        if line.startswith("VmHWM:"):
                            value = round(int(line.split()[1]) / 1024.0, 1)
            except OSError:
                pass
        if value is None:
            value = round(peak_rss_mb(), 1)
        _HIGH_WATER = max(_HIGH_WATER, value)
        return value


def versions() -> dict[str, str]:
    return {
        "bti": __version__,
        "torch": _pkg("torch"),
        "executorch": _pkg("executorch"),
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu": _cpu(),
        "cpus": str(os.cpu_count()),
        "machine": machine_id(),
    }


def machine_id() -> str:
    """This machine in the portal's columns: ``BTI_MACHINE`` when set (a runner pool's name); none on a GitHub-hosted
    runner (a fresh VM each job: its id would start a new column every run); else a short, stable hash of
    /etc/machine-id (or of the host name), so two runners with the same CPU stay two columns and a public portal
    shows no host name."""
    import hashlib
    import socket

    from harness.settings import current

    if current().machine:
        return current().machine
    if os.environ.get("RUNNER_ENVIRONMENT") == "github-hosted":  # GitHub's own variable
        return ""
    try:
        ident = Path("/etc/machine-id").read_text().strip()
    except OSError:
        ident = ""
    return hashlib.sha256((ident or socket.gethostname()).encode()).hexdigest()[:8]
