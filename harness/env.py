"""Versions and machine facts for the results header."""

from __future__ import annotations

import platform
from importlib.metadata import PackageNotFoundError, version

from harness import __version__


def _pkg(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def versions() -> dict[str, str]:
    import os

    return {
        "bti": __version__,
        "torch": _pkg("torch"),
        "executorch": _pkg("executorch"),
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "cpu": _cpu(),
        "cpus": str(os.cpu_count()),
    }
