"""Parse and validate GitHub event payloads (torch-free, no network).

``repository_dispatch`` is accepted in two forms:

* compact: ``client_payload = {repo, sha, pr, ref, suites, recipes}`` (what ``bti dispatch`` sends);
* relay (PyTorch's cross-repo relay): ``client_payload.payload`` is a raw ``pull_request`` or ``push``
  webhook, with ``event_type`` naming it.

Every field is validated against a strict pattern, so nothing from a payload can inject shell or
workflow syntax downstream; a bad field is a one-line ``DispatchError`` naming the field.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from harness.errors import UserError

REPO = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}")
SHA = re.compile(r"[0-9a-f]{40}")
REF = re.compile(r"(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9._/-]{0,254}")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
EVENT_TYPES = ("upstream-pull-request", "upstream-push", "nightly", "pull_request", "push")


class DispatchError(UserError):
    pass


@dataclass(frozen=True)
class DispatchRequest:
    event_type: str
    repo: str
    sha: str
    pr: int | None = None
    ref: str = ""
    suites: str = ""  # comma-separated names
    recipes: str = ""

    def outputs(self) -> dict[str, str]:
        return {k: "" if v is None else str(v) for k, v in asdict(self).items()}


def _check(pattern: re.Pattern[str], value: Any, field: str, what: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        shown = repr(value)[:80]
        raise DispatchError(f"{field}: expected {what}, got {shown}")
    return value


def _pr(value: Any, field: str) -> int | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not (isinstance(value, int) or (isinstance(value, str) and value.isdigit())):
        raise DispatchError(f"{field}: expected a pull request number, got {repr(value)[:80]}")
    number = int(value)
    if not 0 < number < 10**9:
        raise DispatchError(f"{field}: pull request number out of range: {number}")
    return number


def _names(value: Any, field: str) -> str:
    if value is None or value == "":
        return ""
    items = value if isinstance(value, list) else str(value).split(",") if isinstance(value, str) else None
    if items is None:
        raise DispatchError(f"{field}: expected a comma-separated list or a JSON array of names")
    names = [_check(NAME, str(i).strip() if isinstance(i, str) else i, field, "names of letters, digits, . _ -")
             for i in items if not (isinstance(i, str) and not i.strip())]
    files = [n for n in names if n.lower().endswith((".yaml", ".yml"))]
    if files:  # a suite file from a payload could carry `file:` code (opdiff suites): only registered names travel
        raise DispatchError(f"{field}: {files[0]!r} is a file, not a suite or recipe name; a dispatch names registered "
                            "suites and recipes only")
    return ",".join(names)


def parse_dispatch(event: dict[str, Any]) -> DispatchRequest:
    event_type = _check(NAME, event.get("action") or event.get("event_type"), "event_type", "an event type name")
    payload = event.get("client_payload")
    if not isinstance(payload, dict):
        raise DispatchError("client_payload: expected an object")
    if isinstance(payload.get("payload"), dict):
        return _from_relay(event_type, payload)
    unknown = set(payload) - {"repo", "sha", "pr", "ref", "suites", "recipes"}
    if unknown:
        raise DispatchError(f"client_payload: unknown key(s) {', '.join(sorted(unknown))[:120]}")
    return DispatchRequest(
        event_type=event_type,
        repo=_check(REPO, payload.get("repo"), "client_payload.repo", "owner/name"),
        sha=_check(SHA, payload.get("sha"), "client_payload.sha", "40 hex characters"),
        pr=_pr(payload.get("pr"), "client_payload.pr"),
        ref=_check(REF, payload["ref"], "client_payload.ref", "a git ref") if payload.get("ref") else "",
        suites=_names(payload.get("suites"), "client_payload.suites"),
        recipes=_names(payload.get("recipes"), "client_payload.recipes"),
    )


def _from_relay(event_type: str, payload: dict[str, Any]) -> DispatchRequest:
    hook = payload["payload"]
    repo = _check(REPO, (hook.get("repository") or {}).get("full_name"), "client_payload.payload.repository.full_name", "owner/name")
    suites = _names(payload.get("suites"), "client_payload.suites")
    recipes = _names(payload.get("recipes"), "client_payload.recipes")
    if isinstance(hook.get("pull_request"), dict):
        pr = hook["pull_request"]
        head = pr.get("head") or {}
        return DispatchRequest(
            event_type=event_type, repo=repo,
            sha=_check(SHA, head.get("sha"), "client_payload.payload.pull_request.head.sha", "40 hex characters"),
            pr=_pr(pr.get("number", hook.get("number")), "client_payload.payload.pull_request.number"),
            ref=_check(REF, head.get("ref"), "client_payload.payload.pull_request.head.ref", "a git ref"),
            suites=suites, recipes=recipes,
        )
    if "after" in hook and "ref" in hook:
        return DispatchRequest(
            event_type=event_type, repo=repo,
            sha=_check(SHA, hook.get("after"), "client_payload.payload.after", "40 hex characters"),
            ref=_check(REF, hook.get("ref"), "client_payload.payload.ref", "a git ref"),
            suites=suites, recipes=recipes,
        )
    raise DispatchError("client_payload.payload: neither a pull_request nor a push webhook")


def write_github_output(path: str, values: dict[str, str]) -> None:
    """Append ``key=value`` lines to ``$GITHUB_OUTPUT`` (values are validated: no newlines)."""
    with open(path, "a", encoding="utf-8") as fh:
        for key, value in values.items():
            if "\n" in value or "\r" in value:
                raise DispatchError(f"output {key} contains a newline")
            fh.write(f"{key}={value}\n")
