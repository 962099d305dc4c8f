"""``bti repro``: one recorded failure as a standalone script (torch and executorch, no bti)."""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.group import cli


@cli.command()
@click.argument("item")
@click.option("--results", type=click.Path(dir_okay=False, path_type=Path), default=Path("out/results.jsonl"), show_default=True,
              help="The results file that recorded the failure.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Where the script goes (default: repro/<item>.py beside the results file).")
@click.option("-s", "--suite", "suites", multiple=True, help="A suite file the case comes from (as `bti run -s FILE.yaml` "
              "was given; repeatable). Built-in suites are found by name; a path is never taken from the results.")
@click.option("--passing", is_flag=True, help="Write a passing item too, as a control beside a failing one: its script runs "
              "the same stages and comparison and ends PASSED AS RECORDED (exit 0).")
def repro(item: str, results: Path, output: Path | None, suites: tuple[str, ...], passing: bool) -> None:
    """Write ITEM's failure (an item id, as in the results: op.add.basic[float32,static]@xnnpack) as a standalone
    Python script that needs torch and executorch alone: the module, the seeded inputs, the recipe's export,
    quantize, lower, serialize, load and run calls, and the comparison that failed, with the versions bti ran.
    Run it with `python FILE`: its last line says REPRODUCED (exit 1), DIFFERENT (exit 3) or NOT REPRODUCED (exit 0).
    Works for ExecuTorch recipes (the module of a non-operator case is its exported program)."""
    from harness import repro as rp

    path = rp.write(results, item, output, suites, passing=passing)
    click.echo(str(path))
