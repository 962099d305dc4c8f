"""Write the bytecode of what `bti run` imports (torch, ExecuTorch, each recipe's backend stack), once, after `make`'s
``pip install --no-compile``.

pip compiles every installed ``.py`` file by default: about 25,000 files and 42 s of CPU for `.venv` (44 s for
`.venv-1.4`), of which a broad `bti run` imports under a third (6,455 files, 12 s). With ``--no-compile`` the rest is
never compiled; this script compiles the part every run needs at set-up, so a shell with ``PYTHONDONTWRITEBYTECODE``
set still starts `bti` from bytecode. What else a process imports is compiled on first import: the Makefile keeps
bytecode writing on for its own recipes.

    .venv/bin/python scripts/compile_imports.py
"""

from __future__ import annotations

import sys


def main() -> int:
    sys.dont_write_bytecode = False  # before any import below: this is the point of the script
    try:
        from harness.recipes import available_recipe_files, load_recipe
        from harness.runner.run import warm_imports

        recipes = [load_recipe(name) for name in available_recipe_files()]
        warm_imports(recipes, speedups=True)
    except Exception as exc:  # a broken install: say it in one line (bti's own start-up check says more)
        print(f"bti: set-up could not import what bti runs: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    print(f"bti: bytecode written for the imports of {len(recipes)} recipes ({len(sys.modules)} modules)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
