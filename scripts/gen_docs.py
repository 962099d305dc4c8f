"""Regenerate the docs' generated sections that are committed, in docs/github-actions.md: the composite action's inputs
and outputs (from action.yml) and every reusable workflow's inputs, outputs and secrets (each
.github/workflows/*.yml with `on: workflow_call`). Run: python scripts/gen_docs.py; `--check` exits 1 when one is stale.
The CLI reference is generated when the site is built (mkdocs-click, docs/cli.md)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "github-actions.md"
ABEGIN, AEND = "<!-- action-inputs:begin -->", "<!-- action-inputs:end -->"
WBEGIN, WEND = "<!-- workflow-inputs:begin -->", "<!-- workflow-inputs:end -->"


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def reusable_workflows() -> dict[str, dict]:
    """Each reusable workflow (path -> its `workflow_call` mapping)."""
    import yaml

    out = {}
    for path in sorted((ROOT / ".github" / "workflows").glob("*.yml")):
        doc = yaml.safe_load(path.read_text())
        on = doc.get(True, doc.get("on"))  # YAML 1.1 reads `on` as true
        if isinstance(on, dict) and "workflow_call" in on:
            out[str(path.relative_to(ROOT))] = on["workflow_call"] or {}
    return out


def workflow_tables() -> str:
    parts = []
    for path, call in reusable_workflows().items():
        parts += [f"### `{path}`", "", "| input | type | default | description |", "|---|---|---|---|"]
        for name, spec in (call.get("inputs") or {}).items():
            default = spec.get("default", "")
            shown = f"`{str(default).lower() if isinstance(default, bool) else default}`" if default != "" else "—"
            req = " (required)" if spec.get("required") else ""
            parts.append(f"| `{name}` | {spec.get('type', 'string')}{req} | {shown} | {_cell(spec.get('description', ''))} |")
        if call.get("outputs"):
            parts += ["", "| output | description |", "|---|---|"]
            parts += [f"| `{n}` | {_cell(o.get('description', ''))} |" for n, o in call["outputs"].items()]
        if call.get("secrets"):
            parts += ["", "| secret | description |", "|---|---|"]
            parts += [f"| `{n}` | {_cell(o.get('description', ''))} |" for n, o in call["secrets"].items()]
        parts.append("")
    return "\n".join(parts).rstrip()


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
    return _between(_between(page, ABEGIN, AEND, action_table()), WBEGIN, WEND, workflow_tables())


def main() -> int:
    path = PAGE
    new = render(path.read_text())
    if "--check" in sys.argv:
        return 0 if new == path.read_text() else 1
    path.write_text(new)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
