"""Facts about the machine that a rule can be limited to (``when:`` in a recipe's ``skip``/``xfail``/``expect``), as
``versions:`` limits one to installs: an expected failure that comes from the hardware holds only where the hardware
is the kind it was measured on, and a vendor's machine of another kind sees the item judged plainly.

Each fact is asked of the library that decides it in a short child process (the parent forks workers, and a runtime's
thread pool does not survive a fork), and is a short string, or None when it cannot be known here (the library is not
installed, or the device does not answer). A rule whose fact is None does not hold. The answer is kept per process
and on disk (``$XDG_CACHE_HOME/bti/facts.json``, keyed by the fact's code, the library's version and the CPU's model
and flags), so a machine asks once, not every ``bti run`` (asking imports the library: most of a second).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import platform
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Fact:
    code: str  # Python that prints the fact's value (run in a child process)
    values: tuple[str, ...]  # the values it can take: a rule naming another is a typo, refused when the recipe loads
    package: str  # the distribution that decides it: its version is part of the on-disk key
    env: tuple[str, ...] = ()  # environment variables that change the answer: their values are part of the key too


X86 = ("x86_64", "amd64", "i386", "i686")  # platform.machine(), lower case, on an x86 CPU


def _cpu_flags(*any_of: str) -> str:
    """Code printing whether the x86 CPU lists any of these /proc/cpuinfo flags: present or absent, "n/a" off x86, and
    nothing (None) where /proc/cpuinfo cannot say."""
    return ("import platform, pathlib\n"
            "p = pathlib.Path('/proc/cpuinfo')\n"
            "flags = set(p.read_text(errors='replace').split()) if p.exists() else None\n"
            f"x86 = platform.machine().lower() in {X86!r}\n"
            f"print('n/a' if not x86 else '' if flags is None else 'present' if flags & set({tuple(sorted(any_of))!r}) else 'absent')")


def _onednn_isa(imports: str, work: str) -> str:
    """Code printing the instruction set a library's oneDNN runs on, from oneDNN's own verbose "isa:" line (written to
    standard output while ``work`` runs, after ``imports``): amx, avx512 (AVX-512 or AVX10 without AMX), avx2, avx,
    sse41, aarch64 or other, and nothing (None) where oneDNN says nothing."""
    return ("import ctypes, os, tempfile\n"
            "os.environ['ONEDNN_VERBOSE'] = '1'\n"
            f"{imports}\n"
            "libc = ctypes.CDLL(None)\n"
            "with tempfile.TemporaryFile() as f:\n"
            "    saved = os.dup(1)\n"
            "    libc.fflush(None)\n"
            "    os.dup2(f.fileno(), 1)\n"
            "    try:\n"
            f"        {work}\n"
            "        libc.fflush(None)\n"
            "    finally:\n"
            "        os.dup2(saved, 1)\n"
            "    f.seek(0)\n"
            "    said = f.read().decode(errors='replace')\n"
            "isa = next((ln.split('isa:', 1)[1] for ln in said.splitlines() if ',info,cpu,isa:' in ln), '')\n"
            "print('' if not isa else 'amx' if 'AMX' in isa else 'avx512' if 'AVX-512' in isa or 'AVX10' in isa\n"
            "      else 'avx2' if 'AVX2' in isa else 'avx' if 'AVX' in isa else 'sse41' if 'SSE4.1' in isa\n"
            "      else 'aarch64' if 'AArch64' in isa else 'other')")


FACTS: dict[str, Fact] = {
    # OpenVINO's CPU plugin runs a float32 model at this precision by default: bf16 on CPUs with native bfloat16 (AMX,
    # AVX512_BF16), else f32. The ExecuTorch OpenVINO backend passes no precision hint, so its programs run at it.
    "openvino-cpu-precision": Fact(
        "import openvino as ov; print(ov.Core().get_property('CPU', 'INFERENCE_PRECISION_HINT').get_type_name())",
        ("bf16", "f16", "f32"), "openvino", ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")),  # a cap below AMX/BF16: f32
    # whether the x86 CPU has VNNI (AVX512_VNNI, AVX_VNNI, AMX_INT8): without it, int8 dot products go through
    # vpmaddubsw, whose 16-bit intermediate sums saturate (OpenVINO's "saturation (overflow) issue" on SSE, AVX2 and
    # AVX-512 CPUs before VNNI), so an int8 program's results depend on it
    "cpu-vnni": Fact(_cpu_flags("avx512_vnni", "avx_vnni", "amx_int8"), ("present", "absent", "n/a"), "openvino"),
    # whether the x86 CPU has AVX-512 (avx512f): XNNPACK picks its float microkernels by the CPU's features at run time,
    # and its AVX-512 and AVX2 kernels of one op differ at the boundaries (log of NaN, +inf and 3e38)
    "cpu-avx512": Fact(_cpu_flags("avx512f"), ("present", "absent", "n/a"), "executorch"),
    # the instruction set torch's oneDNN runs on here, as oneDNN itself reports it (its verbose mode's "isa:" line, read
    # around one float32 GELU, which ATen hands to oneDNN): eager PyTorch is the reference, and oneDNN's AVX-512 and AVX2
    # kernels differ at the boundaries (float32 GELU of +inf: NaN on AVX-512). ONEDNN_MAX_CPU_ISA caps it, so it is part
    # of the key. Nothing printed (None) where oneDNN does not say
    # AMX is told apart from AVX-512 alone: on a CPU with AMX (Intel's, with AVX512_FP16) a static int8 program's float32
    # calibration lands elsewhere than on an AMD CPU with AVX-512, VNNI and BF16 (DeBERTa-v2's QA head: 10.0 dB from fp32
    # against 6.9), and bf16 matrix multiplies are AMX's tile multiplies
    "torch-onednn-isa": Fact(
        _onednn_isa("import torch", "torch.nn.functional.gelu(torch.ones(64))"),
        ("amx", "avx512", "avx2", "avx", "sse41", "aarch64", "other"), "torch", ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")),
    # the instruction set OpenVINO's CPU plugin runs on here, as its own oneDNN reports it around one small convolution
    # (a float32 matrix multiply at f32 precision is not oneDNN's there): with AMX its int8 kernels are AMX's (tile multiplies), whose results on a quantized network can depart
    # from the program where the same program on AVX-512 VNNI does not (timm's visformer). ONEDNN_MAX_CPU_ISA caps
    # OpenVINO's oneDNN too (and with it the bf16 default precision), so it is part of the key
    "openvino-cpu-isa": Fact(
        _onednn_isa("import numpy as np\nimport openvino as ov\nfrom openvino import opset13 as ops",
                    "x = ops.parameter([1, 8, 16, 16], np.float32)\n"
                    "        w = ops.constant(np.ones((8, 8, 3, 3), np.float32))\n"
                    "        m = ov.Model([ops.convolution(x, w, [1, 1], [1, 1], [1, 1], [1, 1])], [x])\n"
                    "        ov.Core().compile_model(m, 'CPU')(np.ones((1, 8, 16, 16), np.float32))"),
        ("amx", "avx512", "avx2", "avx", "sse41", "aarch64", "other"), "openvino", ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")),
    # whether ATen sends float16 convolutions to oneDNN (torch.ops.mkldnn._is_mkldnn_fp16_supported(): ideep's float16,
    # on CPUs with AVX512_FP16 or AVX-NE-CONVERT; ATen's use_mkldnn), else to its own im2col kernels: eager's float16
    # rounding, the noise floor a float16 output is held to, is the one or the other's. oneDNN's ISA cap moves it
    "torch-fp16-convolution": Fact("import torch; print('onednn' if torch.ops.mkldnn._is_mkldnn_fp16_supported() else 'aten')",
                                   ("onednn", "aten"), "torch", ("ONEDNN_MAX_CPU_ISA", "DNNL_MAX_CPU_ISA")),
}


@functools.cache
def fact(name: str) -> str | None:
    """The named fact on this machine (``FACTS``): from the on-disk cache when this machine and the library's version
    asked this question (the fact's code, under its ``env``) before, else asked (and kept)."""
    from harness.cases.case import stable_hash
    from harness.results import atomic_write_text
    from harness.versions import installed_version

    version = installed_version(FACTS[name].package)
    if version is None:
        return None
    # the fact's own code is in the key too: a changed question is asked again, not served its old answer
    key = stable_hash([name, FACTS[name].code, version, _cpu(), *(os.environ.get(v, "") for v in FACTS[name].env)])
    path = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "bti" / "facts.json"
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    if isinstance(known, dict) and isinstance(known.get(key), str):
        return str(known[key])
    value = _ask(name)
    if value is not None:
        with contextlib.suppress(OSError):  # a read-only home: asked again next time
            atomic_write_text(path, json.dumps({**(known if isinstance(known, dict) else {}), key: value}))
    return value


def _cpu() -> str:
    """What identifies this CPU for a fact: its model name and feature flags (Linux), else the platform's words."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return f"{platform.machine()} {platform.processor()}"
    lines = {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in text.splitlines()) if k.strip() in ("model name", "flags")}
    return f"{platform.machine()} {lines.get('model name', '')} {lines.get('flags', '')}"


def _ask(name: str) -> str | None:
    try:
        res = subprocess.run([sys.executable, "-c", FACTS[name].code], capture_output=True, text=True, timeout=120,
                             stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = res.stdout.strip().splitlines()
    return lines[-1].strip() if res.returncode == 0 and lines else None
