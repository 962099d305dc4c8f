"""GitHub: ``bti publish …``, ``bti dispatch``, ``bti event …``, ``bti fetch-base``/``fetch-history`` and ``bti relay …``
(torch-free)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from harness.cli.group import cli
from harness.cli.options import compare_opts, read_results_file, thresholds, with_options
from harness.errors import UserError


@cli.group("publish")
def publish() -> None:
    """Publish results to GitHub: sticky PR comment, check run / status, badge."""


_api_opts = [
    click.option("--token-env", default="GITHUB_TOKEN", show_default=True, help="Environment variable holding the token."),
    click.option("--api-url", help="API base URL (default: the settings' github_api_url: $GITHUB_API_URL or api.github.com)."),
]
_gh_opts = [click.option("--repo", required=True, help="owner/name to read from."), *_api_opts]
_pub_opts = [click.option("--repo", help="owner/name to publish to (not needed with --dry-run)."), *_api_opts]


_dry_opts = [
    click.option("--dry-run", is_flag=True, help="Render exactly what would be sent, without a token or the network."),
    click.option("-o", "--output", type=click.Path(path_type=Path), help="With --dry-run: write it here (default: stdout)."),
]


def _dry_out(text: str, output: Path | None) -> None:
    """A dry run's rendering: to stdout, or to a file (a full disk is one line, exit 2)."""
    if output is None:
        click.echo(text, nl=not text.endswith("\n"))
        return
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"--output {output}: cannot write it: {exc.strerror or exc}") from None
    click.echo(f"dry run: written to {output}", err=True)


def _publisher(repo: str | None, token_env: str, api_url: str | None) -> Any:
    from harness.github.client import make_github
    from harness.github.events import REPO
    from harness.github.publisher import Publisher

    if not repo:
        raise UserError("--repo owner/name is needed to publish (or --dry-run to render without sending)")
    if not REPO.fullmatch(repo):
        raise UserError(f"--repo {repo!r}: expected owner/name")
    return Publisher(make_github(os.environ.get(token_env, ""), api_url), repo)


def _workflow_run(path: Path) -> dict[str, Any]:
    """The ``workflow_run`` object of an event file; a missing or malformed file is a one-line user error."""
    try:
        event = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UserError(f"--event-path {path}: cannot read it: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise UserError(f"--event-path {path}: not a JSON event payload: {str(exc).splitlines()[0][:120]}") from None
    run = event.get("workflow_run") if isinstance(event, dict) else None
    if not isinstance(run, dict):
        raise UserError(f"--event-path {path}: not a workflow_run event (no workflow_run object)")
    return run


@publish.command("comment")
@click.option("--results", type=click.Path(path_type=Path), required=True, help="Head results.jsonl.")
@click.option("--base", type=click.Path(path_type=Path), help="Base results.jsonl to compare against.")
@click.option("--pr", type=int, help="Pull request number (or --event-path of a workflow_run event).")
@click.option("--event-path", type=click.Path(path_type=Path), help="A workflow_run event payload (fork PRs): the PR is looked up from it.")
@click.option("--key", default="bti", show_default=True, help="Sticky comment key: one comment per key.")
@click.option("--mode", type=click.Choice(["always", "changes", "failures", "off"]), default="changes", show_default=True,
              help="When to create the comment (an existing one is always kept current); the workflows' default too.")
@click.option("--run-url", help="Link to the workflow run.")
@click.option("--artifact-url", help="Link to the uploaded artifacts.")
@click.option("--no-base-reason", default="", help="Without --base: why there is no base, stated in the comment.")
@with_options(compare_opts)
@with_options(_pub_opts)
@with_options(_dry_opts)
def publish_comment(results: Path, base: Path | None, pr: int | None, event_path: Path | None, key: str, mode: str,
                    run_url: str | None, artifact_url: str | None, no_base_reason: str, sqnr_drop: float, latency_ratio: float,
                    repo: str | None, token_env: str, api_url: str | None, dry_run: bool, output: Path | None) -> None:
    """Create or update the sticky PR comment for KEY. With --dry-run, print the comment's body instead (to stdout, or
    --output), and on stderr whether the mode would create it."""
    from harness.report import comment
    from harness.report.compare import compare
    from harness.report.summary import failures

    comment.marker(key)  # validates the key before anything is read or sent
    header, recs = read_results_file(results)
    base_recs = read_results_file(base)[1] if base else None
    result = compare(base_recs, recs, thresholds(sqnr_drop, latency_ratio)) if base_recs is not None else None
    cmode = comment.CommentMode(mode)
    body = comment.render(key, header, recs, result, comment.Links(run_url, artifact_url), base_records=base_recs,
                          no_base_reason=no_base_reason)
    create = cmode.wants(result, len(failures(recs)))
    if dry_run:
        what = "posts nothing" if cmode is comment.CommentMode.OFF else \
            "would create it, or update the existing one" if create else "would only update an existing comment (none is created)"
        click.echo(f"dry run: comment {key!r}, mode {mode}: {what}", err=True)
        _dry_out(body, output)
        return
    if cmode is comment.CommentMode.OFF:
        click.echo("comment: off")
        return
    pub = _publisher(repo, token_env, api_url)
    if pr is None and event_path is not None:
        pr = pub.pr_for_workflow_run(_workflow_run(event_path))
        if pr is None:
            click.echo("comment: the workflow_run event has no pull request; nothing to do")
            return
    if pr is None:
        raise UserError("publish comment needs --pr or --event-path")
    action, cid = pub.upsert_comment(pr, key, body, create=create)
    click.echo(f"comment: {action} {cid or ''} on #{pr}".rstrip())


def _refuse_untested_upstream(header: dict[str, Any], sha: str) -> None:
    """A check on the dispatched upstream commit claims that commit was tested: refuse unless the run
    installed exactly it (``bti run --upstream-package``, recorded in the header)."""
    up = header.get("upstream") or {}
    if not up.get("sha") or str(up["sha"]).lower() != sha.lower():
        return
    got = up.get("installed") or {}
    if str(got.get("commit") or "").lower() != sha.lower():
        ran = f"{got['package']} {got.get('version')}" + (f" at {got['commit']}" if got.get("commit") else "") if got.get("package") \
            else "whatever was installed (the run recorded no --upstream-package)"
        raise UserError(f"refusing to post on {up.get('repo', 'upstream')}@{sha[:12]}: the results were produced with {ran}, "
                        "not that commit", hint="install the dispatched commit (the action's upstream-install input)")


@publish.command("check")
@click.option("--results", type=click.Path(path_type=Path), required=True)
@click.option("--sha", help="Commit to attach the check (or status) to (with --dry-run: optional).")
@click.option("--name", default="bti", show_default=True, help="Check-run name / status context.")
@click.option("--details-url", help="Link shown on the check.")
@click.option("--allow-unverified", is_flag=True, help="A recipe that verified nothing makes the check neutral, not failed.")
@with_options(_pub_opts)
@with_options(_dry_opts)
def publish_check(results: Path, sha: str | None, name: str, details_url: str | None, allow_unverified: bool, repo: str | None,
                  token_env: str, api_url: str | None, dry_run: bool, output: Path | None) -> None:
    """A check run with the summary and one annotation per failure; a commit status if check runs are not allowed.
    It fails on an unexpected failure, and where a recipe verified nothing (neutral with --allow-unverified).
    With --dry-run, print the requests as JSON instead: the check run's fields and the annotation batches after it."""
    from harness.github.events import SHA
    from harness.github.publisher import Annotation, check_requests
    from harness.report import markdown, safe
    from harness.report.summary import failures, headline, unverified

    if sha is None and not dry_run:
        raise UserError("publish check needs --sha (the commit to attach the check to)")
    if sha is not None and not SHA.fullmatch(sha):
        raise UserError(f"--sha {sha!r}: expected 40 hex characters")
    header, recs = read_results_file(results)
    if sha is not None:
        _refuse_untested_upstream(header, sha)
    fails = failures(recs)
    summary = markdown.render(header, recs, limit=60_000)
    annotations = [Annotation(path=".github", title=r["id"], message=f"{r['status']}: {r.get('detail', '')}") for r in fails]
    empty = unverified(header, recs)
    title = safe.plain(headline(header, recs).split(" ", 1)[-1], 200)  # the reports' headline, without its mark
    conclusion = "failure" if fails or (empty and not allow_unverified) else "neutral" if empty else "success"
    if dry_run:
        create, batches = check_requests(sha or "0" * 40, name, conclusion, title, summary, annotations=annotations,
                                         details_url=details_url)
        click.echo(f"dry run: check {name!r}: {conclusion}, {len(annotations)} annotation(s) in {1 + len(batches)} request(s)",
                   err=True)
        _dry_out(json.dumps({"check_run": create, "annotation_batches": batches}, indent=1, ensure_ascii=False) + "\n", output)
        return
    assert sha is not None
    how = _publisher(repo, token_env, api_url).check(sha, name, conclusion, title, summary,
                                                      annotations=annotations, details_url=details_url)
    click.echo(f"check: published as {how}")


@publish.command("badge")
@click.option("--results", type=click.Path(path_type=Path), required=True)
@click.option("-o", "--out-dir", type=click.Path(path_type=Path), default=Path("out"), show_default=True)
@click.option("--branch", help="Also commit badge.svg/badge.json to this existing branch of --repo.")
@click.option("--repo", help="owner/name (with --branch).")
@click.option("--token-env", default="GITHUB_TOKEN", show_default=True)
@click.option("--api-url", help="API base URL (default: $GITHUB_API_URL or api.github.com).")
@click.option("--dry-run", is_flag=True, help="Write the files and say what would be committed, without a token or the network.")
def publish_badge(results: Path, out_dir: Path, branch: str | None, repo: str | None, token_env: str, api_url: str | None,
                  dry_run: bool) -> None:
    """Write badge SVG + shields.io endpoint JSON; optionally commit them to a branch."""
    from harness.report import badge

    header, recs = read_results_file(results)
    if branch and not repo:
        raise UserError("--branch needs --repo")
    paths = badge.write(header, recs, out_dir)
    for p in paths.values():
        click.echo(f"badge\t{p}")
    if branch and dry_run:
        click.echo(f"dry run: would commit {', '.join(sorted(paths))} to {branch} of {repo} in one commit "
                   "(none if every file is unchanged there)")
    elif branch:
        pub = _publisher(repo, token_env, api_url)
        files = {name: p.read_bytes() for name, p in paths.items()}
        done = pub.commit_files(branch, files, f"bti: update {', '.join(sorted(files))}")
        click.echo(f"badge\t{len(files)} file(s) on {branch}: {'unchanged' if done == 'unchanged' else 'commit ' + done[:12]}")


@cli.command("dispatch")
@click.option("--to", "targets", multiple=True, required=True, help="Vendor repo (owner/name) to notify; repeatable or comma-separated.")
@click.option("--event-type", default="upstream-pull-request", show_default=True)
@click.option("--repo", "src_repo", required=True, help="The upstream repo being tested (owner/name).")
@click.option("--sha", required=True)
@click.option("--pr", type=int)
@click.option("--ref", default="")
@click.option("--suites", default="")
@click.option("--recipes", default="")
@click.option("--token-env", default="GITHUB_TOKEN", show_default=True)
@click.option("--api-url", help="API base URL (default: $GITHUB_API_URL or api.github.com).")
def dispatch(targets: tuple[str, ...], event_type: str, src_repo: str, sha: str, pr: int | None, ref: str, suites: str,
             recipes: str, token_env: str, api_url: str | None) -> None:
    """Send a repository_dispatch (compact payload) to each vendor repo."""
    from harness.github.client import make_github
    from harness.github.events import parse_dispatch
    from harness.github.publisher import Publisher

    payload = {"repo": src_repo, "sha": sha, "pr": pr, "ref": ref, "suites": suites, "recipes": recipes}
    payload = {k: v for k, v in payload.items() if v not in (None, "")}
    parse_dispatch({"action": event_type, "client_payload": payload})  # what the receiver will check
    gh = make_github(os.environ.get(token_env, ""), api_url)
    repos = [r.strip() for t in targets for r in t.split(",") if r.strip()]
    for target in repos:
        Publisher(gh, target).dispatch(event_type, payload)
        click.echo(f"dispatch: {event_type} -> {target}")


@cli.group("event")
def event() -> None:
    """Read GitHub event payloads inside workflows."""


@event.command("dispatch")
@click.option("--event-path", type=click.Path(path_type=Path), envvar="GITHUB_EVENT_PATH", required=True)
@click.option("--github-output", type=click.Path(path_type=Path), envvar="GITHUB_OUTPUT", help="Append key=value outputs here.")
def event_dispatch(event_path: Path, github_output: Path | None) -> None:
    """Validate a repository_dispatch payload (compact or relay form) and emit its fields."""
    from harness.github.events import parse_dispatch, write_github_output

    try:
        payload = json.loads(event_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"{event_path}: cannot read the event payload: {exc}") from None
    if not isinstance(payload, dict):
        raise UserError(f"{event_path}: the event payload is not an object")
    req = parse_dispatch(payload)
    for k, v in req.outputs().items():
        click.echo(f"{k}={v}")
    if github_output:
        write_github_output(str(github_output), req.outputs())


@cli.command("fetch-base")
@click.option("--name", required=True, help="Artifact name (the reusable workflow's <prefix>-merged).")
@click.option("--branch", required=True, help="Take the newest artifact from a run on this branch.")
@click.option("-o", "--out-dir", type=click.Path(path_type=Path), default=Path("base"), show_default=True)
@click.option("--github-output", type=click.Path(path_type=Path), help="Append path= and reason= here ($GITHUB_OUTPUT).")
@with_options(_gh_opts)
def fetch_base(name: str, branch: str, out_dir: Path, github_output: Path | None, repo: str, token_env: str, api_url: str | None) -> None:
    """Download the base branch's latest results (for the PR comment's delta). No base is not an error: the reason is printed."""
    path, reason = _publisher(repo, token_env, api_url).base_results(name, branch, out_dir)
    click.echo(f"base: {path}" if path else f"base: none ({reason})")
    if github_output:
        with github_output.open("a") as fh:
            fh.write(f"path={path or ''}\nreason={' '.join(reason.split())}\n")


@cli.command("fetch-history")
@click.option("--name", required=True, help="Artifact name the previous run kept its history under.")
@click.option("--branch", required=True, help="Take the newest artifact from a run on this branch.")
@click.option("-o", "--out-dir", type=click.Path(path_type=Path), default=Path("history"), show_default=True)
@with_options(_gh_opts)
def fetch_history(name: str, branch: str, out_dir: Path, repo: str, token_env: str, api_url: str | None) -> None:
    """Download the portal's history (the previous run's `bti portal --keep-history` copies). None yet is not an error:
    OUT_DIR is then left empty, for `bti portal OUT_DIR … --keep-history OUT_DIR` to start the history in."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--out-dir {out_dir}: cannot create it: {exc.strerror or exc}") from None
    files, reason = _publisher(repo, token_env, api_url).history_files(name, branch, out_dir)
    click.echo((f"history: {len(files)} run(s) in {out_dir}" + (f" ({reason})" if reason else "")) if files else f"history: none ({reason})")


@cli.group("relay")
def relay() -> None:
    """The PyTorch cross-repo CI relay's callback (RFC-0050): build it from results, or send it."""


def _relay_payload(results: Path, job_name: str, artifact_url: str | None, status: str,
                   allow_unverified: bool = False) -> dict[str, Any]:
    from harness.report.relay import payload
    from harness.results import read_latest

    header, recs = read_latest(results)
    return payload(header, recs, job_name=job_name, artifact_url=artifact_url, status=status, allow_unverified=allow_unverified)


_relay_opts = [
    click.argument("results", type=click.Path(path_type=Path)),
    click.option("--job-name", required=True, help="Unique per matrix leg, e.g. 'acme-npu / xnnpack / shard 1/2'."),
    click.option("--artifact-url", help="Where the results artifact is."),
    click.option("--status", type=click.Choice(["in_progress", "completed"]), default="completed", show_default=True),
    click.option("--allow-unverified", is_flag=True, help="A recipe that verified nothing does not make the conclusion a failure."),
]


@relay.command("payload")
@with_options(_relay_opts)
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write the JSON here (default: stdout).")
def relay_payload(results: Path, job_name: str, artifact_url: str | None, status: str, allow_unverified: bool,
                  output: Path | None) -> None:
    """Print the callback JSON: status, conclusion, test counts, job name, artifact URL, failed tests (within the relay's limits)."""
    text = json.dumps(_relay_payload(results, job_name, artifact_url, status, allow_unverified), indent=1, ensure_ascii=False)
    if output:
        output.write_text(text + "\n")
    else:
        click.echo(text)


@relay.command("send")
@with_options(_relay_opts)
@click.option("--url", required=True, help="The relay's callback URL.")
@click.option("--token-env", default="BTI_RELAY_TOKEN", show_default=True, help="Environment variable with a bearer token (optional).")
def relay_send(results: Path, job_name: str, artifact_url: str | None, status: str, allow_unverified: bool, url: str,
               token_env: str) -> None:
    """POST the callback to the relay; a 5xx is tried once more; any other failure is one line."""
    from urllib.parse import urlsplit

    import requests

    parts = urlsplit(url)
    if not (parts.scheme == "https" or (parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1"))):
        raise UserError(f"--url {url!r}: expected https:// (or a loopback http:// address)")
    header = read_results_file(results)[0]  # a callback about the upstream commit makes the same claim as a check on it
    _refuse_untested_upstream(header, str((header.get("upstream") or {}).get("sha") or ""))
    body = _relay_payload(results, job_name, artifact_url, status, allow_unverified)
    headers = {"Authorization": f"Bearer {os.environ[token_env]}"} if os.environ.get(token_env) else {}
    for attempt in (1, 2):
        try:
            resp = requests.post(url, json=body, headers=headers, timeout=30)
        except requests.RequestException as exc:
            raise UserError(f"relay: POST {url} failed: {type(exc).__name__}") from None
        if resp.status_code < 500 or attempt == 2:
            break
    if resp.status_code >= 300:
        raise UserError(f"relay: POST {url} answered {resp.status_code}: {resp.text.strip()[:200]}")
    counts = body["test_counts"]
    click.echo(f"relay: {body['status']} {body['conclusion'] or ''} {counts} -> {url}")


