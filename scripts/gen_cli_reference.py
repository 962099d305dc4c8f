"""Regenerate the README's CLI reference from `bti --help` (run: python scripts/gen_cli_reference.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- cli-reference:begin -->", "<!-- cli-reference:end -->"


def reference() -> str:
    from harness.cli import cli

    parts = []
    with click.Context(cli, info_name="bti", terminal_width=110, max_content_width=110) as ctx:
        parts.append(f"```\n$ bti --help\n{cli.get_help(ctx)}\n```")
        for name in sorted(cli.commands):
            cmd = cli.commands[name]
            with click.Context(cmd, info_name=f"bti {name}", parent=ctx, terminal_width=110, max_content_width=110) as sub:
                parts.append(f"```\n$ bti {name} --help\n{cmd.get_help(sub)}\n```")
    return "\n\n".join(parts)


def render(readme: str) -> str:
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{reference()}\n{END}{tail}"


def main() -> int:
    path = ROOT / "README.md"
    new = render(path.read_text())
    if "--check" in sys.argv:
        return 0 if new == path.read_text() else 1
    path.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
