"""Regenerate the docs' generated section that is committed: the composite action's inputs and outputs, from
action.yml, in docs/github-actions.md (run: python scripts/gen_docs.py; `--check` exits 1 when it is stale).
The CLI reference is generated when the site is built (mkdocs-click, docs/cli.md)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "github-actions.md"
ABEGIN, AEND = "<!-- action-inputs:begin -->", "<!-- action-inputs:end -->"


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


def render(page: str) -> str:
    return _between(page, ABEGIN, AEND, action_table())


def main() -> int:
    path = PAGE
    new = render(path.read_text())
    if "--check" in sys.argv:
        return 0 if new == path.read_text() else 1
    path.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
