"""Agreement with upstream: bti's verdicts against ExecuTorch's own Arm flows, program by program.

Upstream's operator suite (``executorch/backends/test/suite/operators``) runs under pytest with ``-m flow_<flow>``
and pytest-json-report, whose per-subtest metadata (upstream's own conftest) gives each program's result. bti runs
the same programs through its ``executorch-upstream-ops`` adapter on the recipe of the same flow. Each upstream
subtest ``test_<op>_<fn>[<flow>-<params>]`` #n is bti's case ``upstream.<op>.<fn>_<params>_<n>``.

    .venv/bin/python benchmarks/arm_agreement.py                       # arm_tosa_fp and arm_tosa_int, every op file
    .venv/bin/python benchmarks/arm_agreement.py --files add,mul,conv2d --flows arm_tosa_fp
    .venv/bin/python benchmarks/arm_agreement.py --reuse-upstream     # bti again, upstream's report kept in --out
    .venv/bin/python benchmarks/arm_agreement.py --flows xnnpack_static_int8_per_channel --tree ../old   # bti of another checkout

The XNNPACK int8 flows (``xnnpack_static_int8_per_channel``, ``…_per_tensor``, ``xnnpack_dynamic_int8_per_channel``) are
compared the same way. ``--tree DIR`` runs bti from another checkout (``python -m harness`` there, with this venv):
verdicts before and after a change, against the same upstream report.

Verdicts are compared in upstream's classes: pass (delegated or not), skip, or a failure at a stage (quantize,
lower, load, run, output mismatch). A test whose own model fails in eager PyTorch is upstream's "Skip" with the error
and bti's FAIL_EXPORT: both say "the test's own", not the backend's. An XFAIL in bti counts as the failure its rule expected. Prints the counts and
every disagreement with both sides' reasons; writes ``agreement-<flow>.json`` into ``--out``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FLOWS = {"arm_tosa_fp": "arm-tosa-fp", "arm_tosa_int": "arm-tosa-int",
         "xnnpack_static_int8_per_channel": "xnnpack-int8-static-per-channel",
         "xnnpack_static_int8_per_tensor": "xnnpack-int8-static-per-tensor",
         "xnnpack_dynamic_int8_per_channel": "xnnpack-int8-dynamic-per-channel"}
UPSTREAM_CLASS = {"Lowering Failed": "lower", "Quantization Failed": "quantize", "PTE Load Failed": "load",
                  "PTE Run Failed": "run", "Output Mismatch": "mismatch", "Unknown Failure": "other"}
BTI_CLASS = {"PASS": "pass", "PASS_UNDELEGATED": "pass", "SKIP": "skip", "FAIL_QUANTIZE": "quantize",
             "FAIL_LOWER": "lower", "FAIL_SERIALIZE": "lower", "FAIL_LOAD": "load", "FAIL_RUN": "run",
             "FAIL_MISMATCH": "mismatch", "FAIL_EXPORT": "test's own"}


def suite_dir() -> Path:
    spec = importlib.util.find_spec("executorch.backends.test.suite.operators")
    assert spec and spec.submodule_search_locations, "executorch's backend test suite is not installed"
    return Path(next(iter(spec.submodule_search_locations)))


def case_id(nodeid: str, flow: str, subtest: int) -> str:
    """``operators/test_add.py::test_add_dtype[arm_tosa_fp-float32]`` #0 -> ``upstream.add.dtype_float32_0``."""
    path, _, name = nodeid.partition("::")
    op = Path(path).stem[len("test_"):]
    fn, _, params = name.partition("[")
    variant = fn[len("test_"):]
    if variant.startswith(op + "_"):
        variant = variant[len(op) + 1:]
    params = params.rstrip("]")
    for form in (f"{flow}-", f"-{flow}", flow):
        if form in params:
            params = params.replace(form, "", 1)
            break
    variant = f"{variant}_{params}" if params else variant
    return f"upstream.{op}.{variant}_{subtest}".replace("[", "_").replace("]", "_")


def upstream(flow: str, files: list[str] | None, jobs: int, out: Path,
             reuse: bool = False) -> tuple[dict[str, tuple[str, str]], float]:
    suite = suite_dir()
    paths = [str(suite / f"test_{f}.py") for f in files] if files else [str(suite)]
    report = out / f"upstream-{flow}.json"
    t0 = time.perf_counter()
    if not (reuse and report.exists()):
        subprocess.run([sys.executable, "-m", "pytest", "-n", str(jobs), "-q", "-p", "no:cacheprovider", "-m", f"flow_{flow}",
                        "--rootdir", str(suite.parent), "--json-report", f"--json-report-file={report}", *paths],
                       capture_output=True, text=True, stdin=subprocess.DEVNULL)
    wall = time.perf_counter() - t0
    verdicts: dict[str, tuple[str, str]] = {}
    for test in json.loads(report.read_text())["tests"]:
        subtests = (test.get("metadata") or {}).get("subtests") or []
        if test["outcome"] == "skipped" and not subtests:
            verdicts[case_id(test["nodeid"], flow, 0)] = ("skip", str((test.get("setup") or {}).get("longrepr", ""))[-200:])
        for sub in subtests:
            result = sub.get("Result")
            klass = ("pass" if result == "Pass" else ("test's own" if sub.get("Error") else "skip") if result == "Skip"
                     else UPSTREAM_CLASS.get(sub.get("Result Detail"), "other"))
            verdicts[case_id(test["nodeid"], flow, int(sub.get("Subtest") or 0))] = (klass, str(sub.get("Error") or "")[:300])
    return verdicts, wall


def bti(recipe: str, files: list[str] | None, jobs: int, out: Path, tree: Path = ROOT) -> tuple[dict[str, tuple[str, str]], float]:
    dest = out / (f"bti-{recipe}" if tree == ROOT else f"bti-{recipe}-{tree.name}")
    filters = [arg for f in files for arg in ("-k", f"upstream.{f}.*")] if files else []
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "harness", "run", "-s", "executorch-upstream-ops", "-r", recipe, "-j",
                    str(jobs), "--no-reuse", "-o", str(dest.resolve()), *filters], capture_output=True, text=True, cwd=tree)
    wall = time.perf_counter() - t0
    verdicts = {}
    for line in (dest / "results.jsonl").read_text().splitlines()[1:]:
        rec = json.loads(line)
        status = (rec.get("xfail") or {}).get("status") or rec["status"]  # an XFAIL is the failure its rule expects
        verdicts[rec["case"]] = (BTI_CLASS.get(status, status.lower()), str(rec.get("detail") or "")[:300])
    return verdicts, wall


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--flows", default=",".join(FLOWS))
    ap.add_argument("--files", default="", help="comma-separated op files (test_<op>.py); default: all")
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("out-agreement"))
    ap.add_argument("--reuse-upstream", action="store_true", help="read upstream's report from --out if it is there")
    ap.add_argument("--tree", type=Path, default=ROOT, help="run bti from this checkout (default: this one)")
    ns = ap.parse_args()
    files = [f for f in ns.files.split(",") if f] or None
    ns.out.mkdir(parents=True, exist_ok=True)
    for flow in ns.flows.split(","):
        recipe = FLOWS[flow]
        up, up_wall = upstream(flow, files, ns.jobs, ns.out, ns.reuse_upstream)
        ours, bti_wall = bti(recipe, files, ns.jobs, ns.out, ns.tree.resolve())
        both = sorted(set(up) & set(ours))
        agree = [c for c in both if up[c][0] == ours[c][0]]
        differ = [c for c in both if up[c][0] != ours[c][0]]
        print(f"\n## {flow} (upstream pytest {up_wall:.0f} s) vs {recipe} (bti {bti_wall:.0f} s)")
        print(f"programs: upstream {len(up)}, bti {len(ours)}, both {len(both)}; agree {len(agree)} "
              f"({100.0 * len(agree) / max(1, len(both)):.1f} %), differ {len(differ)}")
        print("agreed verdicts:", dict(Counter(up[c][0] for c in agree)))
        print("disagreements (upstream -> bti):", dict(Counter(f"{up[c][0]} -> {ours[c][0]}" for c in differ)))
        for c in differ:
            print(f"  {c}: upstream {up[c][0]} ({up[c][1][:160]!r}) | bti {ours[c][0]} ({ours[c][1][:160]!r})")
        only_up, only_bti = sorted(set(up) - set(ours)), sorted(set(ours) - set(up))
        # bti leaves out the tests upstream marks skipped; upstream records no call after a test's first failure
        print(f"upstream only: {len(only_up)} ({dict(Counter(up[c][0] for c in only_up))}) {only_up[:6]}")
        print(f"bti only: {len(only_bti)} ({dict(Counter(ours[c][0] for c in only_bti))}) {only_bti[:6]}")
        (ns.out / f"agreement-{flow}.json").write_text(json.dumps(
            {"flow": flow, "recipe": recipe, "upstream_s": up_wall, "bti_s": bti_wall, "agree": len(agree),
             "both": len(both), "differ": {c: {"upstream": up[c], "bti": ours[c]} for c in differ},
             "only_upstream": only_up, "only_bti": only_bti}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
