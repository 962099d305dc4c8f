"""The evidence behind a FAIL_MISMATCH triage: for each mismatching item of a results file, the elements where the
program and eager PyTorch differ, with the inputs there (where an input has the output's shape).

    .venv/bin/python benchmarks/mismatch_evidence.py out/results.jsonl [-k 'op.*.nan_inf*'] [-n 4]

Each item is built from its case and seed, lowered and run again in this process (speedups on, as a worker runs it),
so the values are the program's own. A line reads ``out[k][index]: inputs [...] eager E backend B (n of N differ)``;
an element differs where neither equals the other (NaN equal to NaN) and they are further apart than 1e-3 relative.
The recipes' xfail reasons for core-ops' non-finite samples quote these figures.
"""

from __future__ import annotations

import argparse
import fnmatch
import json


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("results")
    ap.add_argument("-k", action="append", default=[], help="item-id glob (repeatable); default: every mismatch")
    ap.add_argument("-n", type=int, default=4, help="differing elements shown per output")
    ns = ap.parse_args()

    import torch

    from harness import stages
    from harness.runner.matrix import Filters
    from harness.runner.run import plan, warm_imports

    with open(ns.results, encoding="utf-8") as fh:
        records = [json.loads(line) for line in fh if line.strip()][1:]
    wanted: dict[tuple[str, str], list[str]] = {}
    for rec in records:
        if rec.get("status") == "FAIL_MISMATCH" and (not ns.k or any(fnmatch.fnmatchcase(rec["id"], k) for k in ns.k)):
            wanted.setdefault((rec["suite"], rec["recipe"]), []).append(rec["id"].rsplit("@", 1)[0])
    for (suite, recipe_name), groups in wanted.items():
        recipes, items = plan([suite], [recipe_name], Filters(patterns=tuple(g.replace("[", "[[]") for g in groups)), check=False)
        warm_imports(recipes, True)
        for item in items:
            group = stages.Group(item)
            rec, outs, _ = stages.run_item(item, recipes[0], group, "evidence")
            print(f"== {item.id}: {rec['status']} {rec.get('detail', '')[:160]}")
            inputs = [t for t in group.built.run if isinstance(t, torch.Tensor)]
            for k, (out, ref) in enumerate(zip(outs or [], group.ref, strict=False)):
                if not isinstance(out, torch.Tensor) or out.shape != ref.shape:
                    continue
                out, ref = out.detach(), ref.detach()
                if out.dtype.is_floating_point:
                    same = (out == ref) | (torch.isnan(out) & torch.isnan(ref)) | ((out - ref).abs() <= 1e-3 * (1 + ref.abs()))
                else:
                    same = out == ref
                differ = (~same).nonzero()
                for index in differ[: ns.n]:
                    at = tuple(index.tolist())
                    there = [x[at].item() if x.shape == out.shape else None for x in inputs]
                    print(f"   out[{k}]{list(at)}: inputs {there} eager {ref[at].item()} backend {out[at].item()}"
                          f"   ({len(differ)} of {out.numel()} differ)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
