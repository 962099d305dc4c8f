"""Facts about the machine that a rule can be limited to (``when:`` in a recipe's ``skip``/``xfail``/``expect``), as
``versions:`` limits one to installs: an expected failure that comes from the hardware holds only where the hardware
is the kind it was measured on, and a vendor's machine of another kind sees the item judged plainly.

Each fact is asked of the library that decides it, once per process, in a short child process (the parent forks
workers, and a runtime's thread pool does not survive a fork), and is a short string, or None when it cannot be known
here (the library is not installed, or the device does not answer). A rule whose fact is None does not hold.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Fact:
    code: str  # Python that prints the fact's value (run in a child process)
    values: tuple[str, ...]  # the values it can take: a rule naming another is a typo, refused when the recipe loads


FACTS: dict[str, Fact] = {
    # OpenVINO's CPU plugin runs a float32 model at this precision by default: bf16 on CPUs with native bfloat16 (AMX,
    # AVX512_BF16), else f32. The ExecuTorch OpenVINO backend passes no precision hint, so its programs run at it.
    "openvino-cpu-precision": Fact(
        "import openvino as ov; print(ov.Core().get_property('CPU', 'INFERENCE_PRECISION_HINT').get_type_name())",
        ("bf16", "f16", "f32")),
}


@functools.cache
def fact(name: str) -> str | None:
    """The named fact on this machine (``FACTS``), asked once per process."""
    try:
        res = subprocess.run([sys.executable, "-c", FACTS[name].code], capture_output=True, text=True, timeout=120,
                             stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = res.stdout.strip().splitlines()
    return lines[-1].strip() if res.returncode == 0 and lines else None
