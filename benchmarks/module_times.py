"""Where `make test`'s wall time goes, module by module and worker by worker: a pytest plugin that records each test's
worker, start and end, and a summary of what it recorded. Measures; asserts nothing.

    BTI_TIMELINE=/tmp/timeline.jsonl .venv/bin/python -m pytest -p benchmarks.module_times \\
        -n 2 --dist loadscope --no-loadscope-reorder -q
    .venv/bin/python benchmarks/module_times.py /tmp/timeline.jsonl

Load it with ``-p benchmarks.module_times`` from the repository's root, not through ``PYTHONPATH``: a ``PYTHONPATH``
other than the tests' own sends every ``run_bti`` call to a new interpreter instead of the warm one (tests/zygote.py),
which changes what is measured.

The summary lists each worker's modules in the order they ran (start, end, seconds), each worker's last end (the
gap between the two is a worker left idle at the end), and the modules by worker-seconds: the order that
``LONGEST_FIRST`` in tests/conftest.py keeps.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "main")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    start = time.time()
    yield
    path = os.environ.get("BTI_TIMELINE")
    if path:
        with open(path, "a", encoding="utf-8") as out:  # one short line per test: appends from both workers do not interleave
            out.write(json.dumps({"id": item.nodeid, "worker": WORKER, "start": start, "end": time.time()}) + "\n")


def summarize(path: Path) -> None:
    rows: list[dict[str, Any]] = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    t0 = min(r["start"] for r in rows)
    per_module: dict[str, float] = defaultdict(float)
    for worker in sorted({r["worker"] for r in rows}):
        spans: list[list[Any]] = []
        for r in sorted((r for r in rows if r["worker"] == worker), key=lambda r: r["start"]):
            module = r["id"].split("::")[0]
            per_module[module] += r["end"] - r["start"]
            if spans and spans[-1][0] == module:
                spans[-1][2] = r["end"] - t0
            else:
                spans.append([module, r["start"] - t0, r["end"] - t0])
        print(f"{worker}: last test ended at {spans[-1][2]:.0f} s")
        for module, start, end in spans:
            print(f"  {start:6.0f} {end:6.0f} {end - start:6.0f}  {module}")
    print("\nworker-seconds by module:")
    for module, seconds in sorted(per_module.items(), key=lambda kv: -kv[1]):
        print(f"  {seconds:7.1f}  {module}")


if __name__ == "__main__":
    summarize(Path(sys.argv[1]))
