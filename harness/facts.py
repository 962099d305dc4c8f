"""Facts about the machine that a rule can be limited to (``when:`` in a recipe's ``skip``/``xfail``/``expect``), as
``versions:`` limits one to installs: an expected failure that comes from the hardware holds only where the hardware
is the kind it was measured on, and a vendor's machine of another kind sees the item judged plainly.

Each fact is asked of the library that decides it, once per process, and is a short string (or None when it cannot be
known here: the library is not installed, or the device does not answer). A rule whose fact is None does not hold.
"""

from __future__ import annotations

import functools
from collections.abc import Callable


def _openvino_cpu_precision() -> str | None:
    """The inference precision OpenVINO's CPU plugin runs a float32 model at by default: ``bf16`` on CPUs with native
    bfloat16 (AMX, AVX512_BF16), else ``f32``. The ExecuTorch OpenVINO backend passes no precision hint, so its
    programs run at this one."""
    try:
        import openvino as ov

        return str(ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT").get_type_name())
    except Exception:  # not installed, or no CPU plugin: unknown here
        return None


FACTS: dict[str, Callable[[], str | None]] = {
    "openvino-cpu-precision": _openvino_cpu_precision,
}


@functools.cache
def fact(name: str) -> str | None:
    """The named fact on this machine (``FACTS``), asked once per process."""
    return FACTS[name]()
