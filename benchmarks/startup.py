"""Where ``bti run``'s wall time goes before and while the workers run: imports, upstream discovery,
the warm-up lowering, the pool. Prints one line per phase boundary, seconds since start.

    .venv/bin/python benchmarks/startup.py run -s executorch-upstream-ops -r xnnpack-int8-dynamic-per-channel \\
        -k 'upstream.add.*' -j 2 --no-reuse --no-report -o /tmp/startup

Arguments are ``bti``'s. The functions are wrapped in this process only; nothing else changes.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

T0 = time.perf_counter()


def mark(text: str) -> None:
    print(f"[{time.perf_counter() - T0:6.2f} s] {text}", file=sys.stderr, flush=True)


def timed(owner: Any, name: str) -> None:
    inner: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        mark(f"{name} starts")
        try:
            return inner(*args, **kwargs)
        finally:
            mark(f"{name} ends")

    setattr(owner, name, wrapper)


def main() -> int:
    import harness.runner.pool as pool
    import harness.runner.run as run
    import harness.stages as stages

    mark("harness imported")
    for owner, name in [(run, "warm_imports"), (run, "plan"), (stages, "warm_up"), (pool.Pool, "run")]:
        timed(owner, name)
    emit = pool.Pool._emit
    first: list[bool] = []

    def first_record(self: Any, rec: Any) -> None:
        if not first:
            first.append(True)
            mark("first record")
        emit(self, rec)

    pool.Pool._emit = first_record  # type: ignore[method-assign]
    from harness.cli import main as cli

    try:
        code = cli(sys.argv[1:])
    except SystemExit as exc:  # click's standalone mode
        code = exc.code
    mark(f"bti exited {code}")
    return code if isinstance(code, int) else 1


if __name__ == "__main__":
    raise SystemExit(main())
