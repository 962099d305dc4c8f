"""Versions and machine facts for the results header."""

from __future__ import annotations

import json
import os
import platform
import resource
from importlib.metadata import PackageNotFoundError, distribution, version
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


def peak_rss_mb() -> float:
    """This process's peak resident set size so far, in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def versions() -> dict[str, str]:
    return {
        "bti": __version__,
        "torch": _pkg("torch"),
        "executorch": _pkg("executorch"),
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu": _cpu(),
        "cpus": str(os.cpu_count()),
    }
