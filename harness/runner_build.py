"""``bti runner build``: compile ``bti_runner`` (``harness/runtime_src/bti_runner.cpp``) against the
installed executorch wheel.

What the wheel ships, measured on executorch 1.4.1 (1.5.1: see ``link_inputs``): headers for the runtime core only
(``executorch/include``), one cmake config whose single target points at the pybindings' shared
library, and **no static libraries** (no ``libexecutorch*.a``, kernels, XNNPACK, cpuinfo, pthreadpool or
bundled_program archives, and no ``extension/data_loader``, ``extension/module`` or
``devtools/bundled_program`` headers). So the runner links against the shared libraries inside the
wheel that export all of it — ``extension/pybindings/_portable_lib*.so`` (runtime, portable and
optimized kernels, the XNNPACK backend, bundled_program, thread pool) plus
``backends/qualcomm/libqnn_executorch_backend.so`` (platform layer, logging, backend registry) and
libpython (symbols the pybindings leave undefined; no interpreter is started) — and declares the
handful of bundled-program and thread-pool functions whose headers are missing. It therefore
runs on this machine against this venv (absolute rpaths); a device build needs executorch's own
CMake build. Any missing piece is one line naming it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sysconfig
from pathlib import Path

from harness.errors import UserError
from harness.providers import default_runner_path

SOURCE = Path(__file__).parent / "runtime_src" / "bti_runner.cpp"


def link_inputs() -> tuple[list[str], list[str]]:
    """(include dirs, link arguments) for the installed wheel; UserError naming whatever is missing. Two layouts:
    executorch 1.4 ships everything in ``_portable_lib*.so`` (plus the platform layer in the QNN library);
    executorch 1.5 ships the runtime, kernels, XNNPACK and the thread pool as ``lib/libexecutorch*.so`` and keeps
    bundled_program in the pybindings' ``_C*.so``."""
    import importlib.util

    spec = importlib.util.find_spec("executorch")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("bti runner build: executorch is not installed")
    et = Path(next(iter(spec.submodule_search_locations)))
    torch_spec = importlib.util.find_spec("torch")
    torch_lib = Path(next(iter(torch_spec.submodule_search_locations))) / "lib" if torch_spec and torch_spec.submodule_search_locations else None
    ext = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    include = et / "include"
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    ldversion = sysconfig.get_config_var("LDVERSION") or ""
    libpython = Path(libdir) / f"libpython{ldversion}.so"
    portable = et / "extension" / "pybindings" / f"_portable_lib{ext}"
    if portable.exists():  # executorch 1.4
        libs = [portable, et / "backends" / "qualcomm" / "libqnn_executorch_backend.so"]
    else:  # executorch 1.5: the pybindings first (bti_runner's build-freshness check looks at it)
        libs = [et / "extension" / "pybindings" / f"_C{ext}",
                *(et / "lib" / f"libexecutorch{n}.so" for n in ("", "_kernels_optimized", "_backend_xnnpack", "_threadpool"))]
    missing = [str(p) for p in (include, *libs) if not p.exists()]
    if not libpython.exists():
        missing.append(f"{libpython} (this Python is not a shared build: Py_ENABLE_SHARED="
                       f"{sysconfig.get_config_var('Py_ENABLE_SHARED')})")
    if missing:
        raise UserError(f"bti runner build: the installed wheel lacks {', '.join(missing)}")
    includes = [str(include), str(include / "executorch" / "runtime" / "core" / "portable_type" / "c10")]
    rpaths = dict.fromkeys(str(p.parent) for p in libs)
    link = ["-Wl,--no-as-needed", *map(str, libs), f"-L{libdir}", f"-lpython{ldversion}",
            *(f"-Wl,-rpath,{d}" for d in [*rpaths, libdir]),
            *([f"-Wl,-rpath-link,{torch_lib}", f"-Wl,-rpath,{torch_lib}"] if torch_lib else []), "-lpthread", "-ldl"]
    return includes, link


def build(output: Path | None = None, compiler: str | None = None) -> Path:
    """Compile the runner (about 3 s); reuses the binary when it is newer than its source and the wheel."""
    out = output or default_runner_path()
    cxx = compiler or os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not cxx:
        raise UserError("bti runner build: no C++ compiler (install g++: `apt-get install -y g++`)")
    includes, link = link_inputs()
    deps = [SOURCE, Path(link[1])]  # the first library after --no-as-needed
    if out.is_file() and all(out.stat().st_mtime >= d.stat().st_mtime for d in deps):
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}")
    argv = [cxx, "-std=c++17", "-O2", "-Wno-deprecated-declarations", "-DC10_USING_CUSTOM_GENERATED_MACROS",
            "-o", str(tmp), str(SOURCE), *(f"-I{i}" for i in includes), *link]
    proc = subprocess.run(argv, capture_output=True, text=True, errors="replace")
    if proc.returncode != 0:
        tmp.unlink(missing_ok=True)
        first = next((x for x in proc.stderr.splitlines() if "error" in x), proc.stderr.strip()[:300])
        raise UserError(f"bti runner build: {Path(cxx).name} failed: {first[:300]}")
    os.replace(tmp, out)
    return out
