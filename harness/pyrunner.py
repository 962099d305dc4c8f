"""``python -m harness.pyrunner``: the runner interface (see ``harness.providers``) over the pybindings.

It speaks exactly what ``bti_runner`` (the C++ runner ``bti runner build`` makes) speaks, so the
``runner`` and ``command`` providers can be tested, and used on a machine with Python but no compiler.
Exit 0 with one JSON line on stdout; on an error, exit 1 and one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
from pathlib import Path
from typing import Any


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="pyrunner")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--model_path")
    src.add_argument("--bundled_program")
    p.add_argument("--testset_idx", type=int, default=0)
    p.add_argument("--inputs", default="")
    p.add_argument("--input_shapes", default="")
    p.add_argument("--input_dtypes", default="")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--iterations", type=int, default=1)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--output_dir", required=True)
    return p.parse_args(argv)


def _inputs(args: argparse.Namespace) -> list[Any] | None:
    import torch

    if not args.inputs:
        return None
    files = args.inputs.split(",")
    shapes = args.input_shapes.split(",") if args.input_shapes else []
    dtypes = args.input_dtypes.split(",") if args.input_dtypes else []
    if len(shapes) != len(files) or len(dtypes) != len(files):
        raise ValueError("--inputs, --input_shapes and --input_dtypes must list the same number of items")
    out = []
    for f, s, d in zip(files, shapes, dtypes, strict=True):
        shape = [] if s == "scalar" else [int(x) for x in s.split("x")]
        dtype = getattr(torch, d)
        data = Path(f).read_bytes()
        t = torch.frombuffer(bytearray(data), dtype=dtype) if data else torch.empty(0, dtype=dtype)
        out.append(t.reshape(shape).clone())
    return out


def _peak_rss_kb() -> int:
    """This process image's peak (VmHWM): ru_maxrss can report the parent's peak after fork+exec."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    try:
        import torch

        from harness.providers import PybindProvider, RunOptions, bundled_cases, check_program

        path = Path(args.bundled_program or args.model_path)
        blob = path.read_bytes()
        inputs = _inputs(args)
        if args.bundled_program:
            blob, cases = bundled_cases(blob)
            if inputs is None:
                inputs = cases[min(args.testset_idx, len(cases) - 1)][0]
        check_program(blob)
        if inputs is None:
            raise ValueError("--inputs is needed for a .pte")
        ex = PybindProvider().execute(blob, "pte", inputs, RunOptions(args.warmup, args.iterations, args.threads or None))
        outs: list[Any] = ex.outputs
        load_ms, latencies = ex.load_ms, ex.latencies_ms
        out_dir = Path(args.output_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        meta = []
        for i, o in enumerate(outs):
            if isinstance(o, (bool, int, float)):  # a scalar output: int64 / float64 / bool of shape [] (as bti_runner)
                o = torch.tensor(o, dtype=torch.bool if isinstance(o, bool) else torch.int64 if isinstance(o, int) else torch.float64)
            if not isinstance(o, torch.Tensor):
                raise ValueError(f"output {i} is a {type(o).__name__}, not a tensor")
            ot = o.detach().contiguous()
            (out_dir / f"out_{i}.bin").write_bytes(ot.view(torch.uint8).numpy().tobytes() if ot.numel() else b"")
            meta.append({"file": f"out_{i}.bin", "dtype": str(ot.dtype).replace("torch.", ""), "shape": list(ot.shape)})
    except Exception as exc:  # one line on stderr, like a C++ runner's error
        print(f"pyrunner: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}", file=sys.stderr)
        return 1
    rss_kb = _peak_rss_kb()
    print(json.dumps({"load_ms": load_ms, "latencies_ms": latencies, "outputs": meta, "max_rss_kb": rss_kb,
                      "pid": os.getpid()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
