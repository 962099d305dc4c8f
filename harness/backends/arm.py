"""Arm targets of the ExecuTorch backend, all built on ExecuTorch's own Arm code (``executorch.backends.arm``).

Partitioners (a recipe's ``partitioners:``) and what ``compile_specs:`` they read:

- ``tosa``: ``TOSAPartitioner``; ``tosa_spec`` (``TOSA-1.0+FP`` by default, ``TOSA-1.0+INT`` for int8). A lowered
  program runs on the TOSA reference model (PyPI ``tosa-tools``), as upstream's ``arm_tosa_*`` flows run it:
  the edge program runs in Python, and every TOSA delegate call goes to the reference model
  (``TosaReferenceModelDispatch``).
- ``ethos-u``: ``EthosUPartitioner``; ``target`` (``ethos-u55-128``, ``ethos-u85-256``…), optional
  ``system_config`` and ``memory_mode``. Lowering compiles with vela (PyPI ``ethos-u-vela``), whose own estimates
  (cycles, SRAM and flash, operators on the NPU) are recorded as ``partition.vela``. The program runs on a Corstone
  FVP through upstream's ``run_corstone`` where one is installed (the recipe's ``run_requires``).
- ``vgf``: ``VgfPartitioner``; ``tosa_spec``. Lowering needs the ML SDK model converter (PyPI
  ``ai-ml-sdk-model-converter``); running needs the Vulkan ML emulation layer and a VGF runtime.

``quantize: {quantizer: arm}`` is the quantizer ExecuTorch pairs with the partitioner's compile spec
(``TOSAQuantizer``, ``EthosUQuantizer``, ``VgfQuantizer``), symmetric int8, per-channel weights unless
``per_channel: false``.
"""

from __future__ import annotations

import contextlib
import csv
import inspect
import io
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PARTITIONERS = ("tosa", "ethos-u", "vgf")
RUNTIME_LABEL = {"tosa": "tosa-reference-model", "ethos-u": "corstone-fvp"}
# upstream's name (run_corstone's target_board) for the board whose FVP runs each Ethos-U family; the FVP
# executables themselves are the recipes' run_requires
BOARD = {"ethos-u55": "corstone-300", "ethos-u65": "corstone-300-u65", "ethos-u85": "corstone-320"}


def compile_spec(name: str, specs: Mapping[str, Any]) -> Any:
    """The ExecuTorch compile spec a recipe's partitioner name and ``compile_specs`` describe."""
    if name == "tosa":
        from executorch.backends.arm.tosa.compile_spec import TosaCompileSpec

        return TosaCompileSpec(str(specs.get("tosa_spec", "TOSA-1.0+FP")))
    if name == "ethos-u":
        from executorch.backends.arm.ethosu import EthosUCompileSpec

        return EthosUCompileSpec(str(specs.get("target", "ethos-u55-128")), system_config=specs.get("system_config"),
                                 memory_mode=specs.get("memory_mode"))
    if name == "vgf":
        from executorch.backends.arm.vgf import VgfCompileSpec

        _find_model_converter()
        return VgfCompileSpec(str(specs["tosa_spec"]) if "tosa_spec" in specs else None)
    raise ValueError(f"not an Arm partitioner: {name!r}")


def partitioner(name: str, specs: Mapping[str, Any]) -> Any:
    from executorch.backends.arm.util._factory import create_partitioner

    return create_partitioner(compile_spec(name, specs))


def quantizer(name: str, specs: Mapping[str, Any], per_channel: bool, dynamic: bool) -> Any:
    """ExecuTorch's quantizer for the partitioner's compile spec, symmetric int8 (upstream's flows' config)."""
    from executorch.backends.arm.quantizer import get_symmetric_quantization_config
    from executorch.backends.arm.util._factory import create_quantizer

    q = create_quantizer(compile_spec(name, specs))
    q.set_global(get_symmetric_quantization_config(is_per_channel=per_channel, is_dynamic=dynamic))
    return q


def _find_model_converter() -> None:
    """ExecuTorch looks for ``model-converter`` on PATH; the PyPI package puts it beside this interpreter, which a
    venv used without activating leaves off PATH. Point ExecuTorch's own variable at it (this process only)."""
    from harness.backends import find_executable

    found = find_executable("model-converter")
    if found and not os.environ.get("MODEL_CONVERTER_PATH") and not shutil.which("model-converter"):
        os.environ["MODEL_CONVERTER_PATH"] = found


# -- running: the TOSA reference model -----------------------------------------------------------------------------


@dataclass
class ReferenceModel:
    """A TOSA-lowered program, run as upstream's ``arm_tosa_*`` flows run it: the edge program in Python, each
    TOSA delegate call on the TOSA reference model."""

    module: Any
    runtime_label: str = RUNTIME_LABEL["tosa"]


def reference_model(lowered: Any) -> ReferenceModel:
    return ReferenceModel(lowered.exported_program().module())


def run_reference(handle: ReferenceModel, inputs: tuple[Any, ...]) -> list[Any]:
    import torch
    from executorch.backends.arm.test.runner_utils import TosaReferenceModelDispatch

    class Dispatch(TosaReferenceModelDispatch):  # type: ignore[misc]
        # upstream's raises on leaving when no TOSA delegate ran: a program the partitioner left whole on the CPU
        # still runs (PASS_UNDELEGATED), like any other recipe's
        def __exit__(self, *exc: Any) -> None:
            torch.overrides.TorchFunctionMode.__exit__(self, *exc)  # type: ignore[no-untyped-call]

    with torch.no_grad(), Dispatch():
        out = handle.module(*inputs)
    return list(out) if isinstance(out, (list, tuple)) else [out]


# -- running: a Corstone FVP (where one is installed) ----------------------------------------------------------------


@dataclass
class CorstoneRun:
    """An Ethos-U program for a Corstone FVP, run with upstream's ``run_corstone`` and an ``arm_executor_runner``
    ELF (``ARM_EXECUTOR_RUNNER``: built with upstream's ``backends/arm/scripts/build_executor_runner.sh``)."""

    manager: Any
    board: str
    elf: str
    runtime_label: str = RUNTIME_LABEL["ethos-u"]


def corstone(lowered: Any, target: str) -> CorstoneRun:
    board = next((b for prefix, b in BOARD.items() if target.startswith(prefix)), None)
    if board is None:
        raise ValueError(f"no Corstone FVP runs {target!r} (known: {', '.join(BOARD)})")
    return CorstoneRun(lowered.to_executorch(), board, os.environ["ARM_EXECUTOR_RUNNER"])


def run_corstone(handle: CorstoneRun, inputs: tuple[Any, ...]) -> list[Any]:
    from executorch.backends.arm.test.runner_utils import run_corstone as upstream_run

    with tempfile.TemporaryDirectory(prefix="bti-fvp-") as tmp:
        return list(upstream_run(handle.manager, inputs, tmp, handle.board, handle.elf))


# -- vela's estimates ------------------------------------------------------------------------------------------------

_SUMMED = ("cycles_total", "cycles_npu", "nn_macs", "inference_time")
_PEAK = ("sram_memory_used", "dram_memory_used")
_FLASH = ("on_chip_flash_memory_used", "off_chip_flash_memory_used")


@contextlib.contextmanager
def vela_estimates(into: list[dict[str, Any]]) -> Iterator[None]:
    """While lowering, give each vela compilation (one per partition) a directory of its own and keep its summary:
    vela writes it there as CSV and prints its operator placement, which this captures (it would go to the
    worker's stdout). ExecuTorch calls ``vela_compile`` by name from its Ethos-U backend module."""
    try:
        import executorch.backends.arm.ethosu.backend as ethosu
    except ImportError:
        yield
        return
    original = ethosu.vela_compile
    signature = inspect.signature(original)  # its keywords differ between executorch releases (block_placements)

    def compile_and_keep(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)
        with tempfile.TemporaryDirectory(prefix="bti-vela-") as tmp:
            bound.arguments["intermediate_path"] = tmp
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                result = original(*bound.args, **bound.kwargs)
            into.append(_summary(Path(tmp), printed.getvalue()))
        return result

    ethosu.vela_compile = compile_and_keep
    try:
        yield
    finally:
        ethosu.vela_compile = original


def _summary(directory: Path, printed: str) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for path in sorted(directory.glob("output/*_summary_*.csv")):
        with path.open(newline="", encoding="utf-8") as f:
            row = next(csv.DictReader(f), {}) or {}
    for key in ("npu", "cpu"):
        m = re.search(rf"^{key.upper()} operators = (\d+)", printed, re.M)
        if m:
            row[f"{key}_operators"] = int(m.group(1))
    return row


def summarize(partitions: list[dict[str, Any]]) -> dict[str, Any]:
    """One program's estimates from its partitions' vela summaries: cycles, MACs, operators and inference time add
    up (the partitions run one after another); SRAM and DRAM are the largest partition's; flash adds up."""
    if not partitions:
        return {}

    def num(row: dict[str, Any], key: str) -> float:
        try:
            return float(row.get(key) or 0.0)
        except ValueError:
            return 0.0

    first = partitions[0]
    out: dict[str, Any] = {"partitions": len(partitions),
                           "config": " / ".join(str(first.get(k, "?")) for k in
                                                ("accelerator_configuration", "system_config", "memory_mode"))}
    for key in _SUMMED:
        out[key] = sum(num(p, key) for p in partitions)
    out["inference_time_ms"] = round(out.pop("inference_time") * 1000.0, 6)
    for key in ("cycles_total", "cycles_npu", "nn_macs"):
        out[key] = int(out[key])
    for key in _PEAK:
        out[key.replace("_memory_used", "_kib")] = round(max(num(p, key) for p in partitions), 3)
    out["flash_kib"] = round(sum(num(p, k) for p in partitions for k in _FLASH), 3)
    for key in ("npu_operators", "cpu_operators"):
        if all(key in p for p in partitions):
            out[key] = sum(int(p[key]) for p in partitions)
    return out
