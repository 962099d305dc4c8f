"""Regenerate harness/suites/core_aten_ops.txt: every operator overload torch tags ``core``.

    .venv/bin/python scripts/gen_core_ops.py

The list is data so that ``bti report --coverage`` works from the JSONL alone, without torch.
"""

from __future__ import annotations

from pathlib import Path

import torch

OUT = Path(__file__).resolve().parent.parent / "harness" / "suites" / "core_aten_ops.txt"


def main() -> int:
    core = set()
    for name in torch._C._dispatch_get_all_op_names():
        if not name.startswith("aten::"):
            continue
        base, _, overload = name[len("aten::"):].partition(".")
        try:
            op = getattr(getattr(torch.ops.aten, base), overload or "default")
        except AttributeError:
            continue
        if torch.Tag.core in op.tags:
            core.add(f"aten::{base}.{overload or 'default'}")
    OUT.write_text(f"# torch {torch.__version__}: operator overloads tagged torch.Tag.core ({len(core)})\n" + "\n".join(sorted(core)) + "\n")
    print(f"{len(core)} core ops -> {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
