"""Regenerate the README's generated sections: the CLI reference from `bti --help` and the
composite action's inputs/outputs from action.yml (run: python scripts/gen_cli_reference.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- cli-reference:begin -->", "<!-- cli-reference:end -->"
ABEGIN, AEND = "<!-- action-inputs:begin -->", "<!-- action-inputs:end -->"


def reference() -> str:
    from harness.cli import cli

    parts = []
    with click.Context(cli, info_name="bti", terminal_width=110, max_content_width=110) as ctx:
        parts.append(f"```\n$ bti --help\n{cli.get_help(ctx)}\n```")
        def walk(group: click.Group, prefix: str, parent: click.Context) -> None:
            for name in sorted(group.commands):
                cmd = group.commands[name]
                # info_name is the command's own name: click prefixes the parents' names (the real help prints "bti publish badge")
                with click.Context(cmd, info_name=name, parent=parent, terminal_width=110, max_content_width=110) as sub:
                    parts.append(f"```\n$ {prefix} {name} --help\n{cmd.get_help(sub)}\n```")
                    if isinstance(cmd, click.Group):
                        walk(cmd, f"{prefix} {name}", sub)

        walk(cli, "bti", ctx)
    return "\n\n".join(parts)


def action_table() -> str:
    import yaml

    action = yaml.safe_load((ROOT / "action.yml").read_text())
    rows = ["| input | default | description |", "|---|---|---|"]
    for name, spec in action["inputs"].items():
        default = spec.get("default", "")
        rows.append(f"| `{name}` | {f'`{default}`' if default else '—'} | {spec['description']} |")
    rows += ["", "| output | description |", "|---|---|"]
    rows += [f"| `{name}` | {spec['description']} |" for name, spec in action["outputs"].items()]
    return "\n".join(rows)


def _between(text: str, begin: str, end: str, body: str) -> str:
    head, rest = text.split(begin, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body}\n{end}{tail}"


def render(readme: str) -> str:
    return _between(_between(readme, BEGIN, END, reference()), ABEGIN, AEND, action_table())


def main() -> int:
    path = ROOT / "README.md"
    new = render(path.read_text())
    if "--check" in sys.argv:
        return 0 if new == path.read_text() else 1
    path.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
