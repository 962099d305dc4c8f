"""PyGithub over real HTTP against a loopback GitHub (tests/github_fake.py served by pytest-httpserver)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from github import GithubRetry

from harness.github.client import PublishError, make_github
from harness.github.publisher import Annotation, Publisher
from harness.report import comment
from harness.report.compare import compare
from harness.results import read_results

from .conftest import TESTS
from .github_fake import FakeGitHub, Fault

WEBHOOKS = TESTS / "fixtures" / "github-webhooks"
GOLDEN = TESTS / "golden"
TOKEN = "ghp_TOPSECRET0123456789"
SHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"


@pytest.fixture
def fake(httpserver) -> FakeGitHub:
    gh = FakeGitHub(httpserver.url_for("/"))
    httpserver.expect_request(re.compile(".*")).respond_with_handler(gh)
    return gh


def publisher(fake: FakeGitHub, **retry: float) -> Publisher:
    r = GithubRetry(total=int(retry.get("total", 3)), backoff_factor=retry.get("backoff", 0.01))
    return Publisher(make_github(TOKEN, fake.base, retry=r, throttle=False), fake.repo)


def golden_body(key: str = "xnnpack") -> str:
    header, recs = read_results(GOLDEN / "results.jsonl")
    base = [dict(r, status="PASS", detail="") if r["recipe"] == "fault-perturb" else r for r in recs]
    return comment.render(key, dict(header), recs, compare(base, recs), comment.Links("https://run", "https://artifacts"), base)


def test_sticky_comment_created_once_then_edited(fake: FakeGitHub) -> None:
    pub = publisher(fake)
    fake.comments[2] = [{"id": 1, "body": "a human comment"}]
    actions = [pub.upsert_comment(2, "xnnpack", golden_body() + f"\nrun {i}") [0] for i in range(3)]
    assert actions == ["created", "updated", "updated"]
    ours = [c for c in fake.comments[2] if comment.marker("xnnpack") in c["body"]]
    assert len(ours) == 1 and ours[0]["body"].endswith("run 2")
    assert pub.upsert_comment(2, "xnnpack", ours[0]["body"])[0] == "unchanged"
    pub.upsert_comment(2, "portable", golden_body("portable"))  # another key owns another comment
    assert len(fake.comments[2]) == 3
    assert not any(path == "/user" for _, path, _ in fake.log)  # GITHUB_TOKEN gets 403 there


def test_comment_found_across_pages(fake: FakeGitHub) -> None:
    fake.comments[5] = [{"id": i, "body": f"noise {i}"} for i in range(75)]
    pub = publisher(fake)
    pub.upsert_comment(5, "k", comment.marker("k") + " first")
    assert pub.upsert_comment(5, "k", comment.marker("k") + " second")[0] == "updated"
    assert sum(comment.marker("k") in c["body"] for c in fake.comments[5]) == 1


def test_comment_truncates_gracefully(fake: FakeGitHub) -> None:
    header, recs = read_results(GOLDEN / "results.jsonl")
    many = [dict(recs[0], id=f"op.big.case{i}[float32,static]@xnnpack", status="FAIL_RUN", detail="boom " * 60) for i in range(3000)]
    body = comment.render("big", dict(header), many, compare([], many), comment.Links("https://run/1", "https://art/1"), limit=8_000)
    assert len(body) <= 8_000 and "comment truncated" in body and body.rstrip().endswith("[artifacts (JSONL, JUnit, Markdown, CSV)](https://art/1)")
    full = comment.render("big", dict(header), many, compare([], many))
    assert len(full) <= comment.LIMIT
    publisher(fake).upsert_comment(3, "big", full)
    assert len(fake.comments[3][0]["body"]) <= 65_536


def test_comment_modes() -> None:
    _header, recs = read_results(GOLDEN / "results.jsonl")
    same = compare(recs, recs)
    assert not comment.CommentMode.CHANGES.wants(same, 3)
    assert comment.CommentMode.CHANGES.wants(compare([], recs), 0)
    assert comment.CommentMode.FAILURES.wants(same, 1) and not comment.CommentMode.FAILURES.wants(same, 0)
    assert comment.CommentMode.ALWAYS.wants(same, 0) and not comment.CommentMode.OFF.wants(same, 9)


def test_check_run_batches_annotations_and_caps_them(fake: FakeGitHub) -> None:
    notes = [Annotation(".github", f"failure {i}", f"item {i}") for i in range(20_000)]
    how = publisher(fake).check(SHA, "bti", "failure", "20000 failures", "x" * 70_000, annotations=notes)
    assert how == "check_run"
    (run,) = fake.check_runs.values()
    assert run["annotations_batches"] == [50, 50]  # 2 writes, not 400
    assert len(run["output"]["summary"]) == 65_535
    assert run["output"]["summary"].endswith("_19900 more failure(s) have no annotation (capped at 100); see the summary and the artifacts._")


def test_check_falls_back_to_commit_status(fake: FakeGitHub) -> None:
    fake.checks_allowed = False
    how = publisher(fake).check(SHA, "bti/xnnpack", "failure", "3 unexpected failures", "summary", details_url="https://run")
    assert how == "status" and not fake.check_runs
    assert fake.statuses == [{"state": "failure", "target_url": "https://run", "description": "3 unexpected failures",
                              "context": "bti/xnnpack", "sha": SHA}]


def test_retry_after_403_rate_limit(fake: FakeGitHub) -> None:
    fake.inject("POST", r"/repos/.*/issues/\d+/comments", 403, times=1, **{"Retry-After": "1"})
    t0 = time.monotonic()
    assert publisher(fake).upsert_comment(7, "k", comment.marker("k"))[0] == "created"
    assert time.monotonic() - t0 >= 1.0  # honoured Retry-After
    posts = [p for m, p, _ in fake.log if m == "POST" and p.endswith("/comments")]
    assert len(posts) == 2 and len(fake.comments[7]) == 1


def _graphql_fault(fake: FakeGitHub, errors: list[dict], times: int = 1, **headers: str) -> None:
    """GitHub's GraphQL endpoint answering 200 with ``errors`` (a timeout, a rate limit): PyGithub raises a 400."""
    from .github_fake import Fault

    fake.faults.append(Fault("POST", r"/graphql", 200, times, headers, {"errors": errors}))


def test_graphql_errors_are_reported_in_githubs_words(fake: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    """A #26 silent bug: a GraphQL 200 with errors read "list comments of #N failed with 400"."""
    _graphql_fault(fake, [{"type": "FORBIDDEN", "message": "Resource not accessible by integration\n<b>x</b>"}])
    with pytest.raises(PublishError) as info:
        publisher(fake).upsert_comment(7, "k", comment.marker("k"))
    text = info.value.one_line()
    assert "list comments of #7: GitHub answered with errors: FORBIDDEN: Resource not accessible by integration" in text
    assert "failed with 400" not in text and "\n" not in text
    reset = int(time.time()) + 3600
    monkeypatch.setenv("BTI_GITHUB_MAX_WAIT", "5")
    _graphql_fault(fake, [{"type": "RATE_LIMITED", "message": "API rate limit exceeded for installation ID 1."}],
                   **{"x-ratelimit-reset": str(reset)})
    with pytest.raises(PublishError) as info:
        publisher(fake).upsert_comment(7, "k", comment.marker("k"))
    text = info.value.one_line()
    assert "GitHub answered with errors: RATE_LIMITED: API rate limit exceeded for installation ID 1." in text
    assert f"it resets at {time.strftime('%H:%M:%S', time.gmtime(reset))} UTC" in text and "BTI_GITHUB_MAX_WAIT" in text


def test_a_graphql_timeout_is_repeated(fake: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "sleep", lambda s: None)  # the wait itself is not under test
    _graphql_fault(fake, [{"message": "Something went wrong while executing your query. This may be the result of a timeout"}])
    assert publisher(fake).upsert_comment(7, "k", comment.marker("k"))[0] == "created"
    assert len([p for m, p, _ in fake.log if m == "POST" and p == "/graphql"]) == 2 and len(fake.comments[7]) == 1


def test_5xx_is_retried_then_reported_clearly(fake: FakeGitHub) -> None:
    fake.inject("GET", r"/repos/octo-org/octo-repo", 502, times=2)
    assert publisher(fake).upsert_comment(8, "k", comment.marker("k"))[0] == "created"
    fake.inject("GET", r"/repos/octo-org/octo-repo", 500, times=50)
    with pytest.raises(PublishError) as info:
        publisher(fake, total=2).upsert_comment(8, "k", comment.marker("k"))
    text = info.value.one_line()
    assert "GitHub API: GET repository octo-org/octo-repo failed" in text and TOKEN not in text


def test_404_has_a_clear_message(fake: FakeGitHub) -> None:
    pub = Publisher(make_github(TOKEN, fake.base, retry=GithubRetry(total=1), throttle=False), "nobody/missing")
    with pytest.raises(PublishError) as info:
        pub.upsert_comment(1, "k", comment.marker("k"))
    assert re.search("failed with 404 .*check the repository name", info.value.one_line())


def test_fork_pr_found_from_workflow_run_event(fake: FakeGitHub) -> None:
    event = json.loads((WEBHOOKS / "workflow_run.completed.payload.json").read_text())
    run = event["workflow_run"]
    assert run["pull_requests"] == []  # what GitHub sends for fork PRs
    fake.pulls = [{"number": 41, "head": {"sha": "0" * 40, "ref": run["head_branch"], "repo_owner": "someone"}},
                  {"number": 42, "head": {"sha": run["head_sha"], "ref": run["head_branch"],
                                          "repo_owner": run["head_repository"]["owner"]["login"]}}]
    assert publisher(fake).pr_for_workflow_run(run) == 42
    fork = json.loads((WEBHOOKS / "workflow_run.completed.fork-pr.json").read_text())["workflow_run"]
    assert fork["pull_requests"] == [] and fork["head_repository"]["fork"] is True
    fake.pulls.append({"number": 43, "head": {"sha": fork["head_sha"], "ref": fork["head_branch"],
                                              "repo_owner": fork["head_repository"]["owner"]["login"]}})
    assert publisher(fake).pr_for_workflow_run(fork) == 43
    # octokit's example lists PR #2 of Codertocat/Hello-World (another repository, another head): never taken
    with_prs = json.loads((WEBHOOKS / "workflow_run.completed.with-pull-requests.payload.json").read_text())["workflow_run"]
    fake.pulls = []
    assert with_prs["pull_requests"][0]["number"] == 2 and publisher(fake).pr_for_workflow_run(with_prs) is None
    run_head = with_prs["head_sha"]
    foreign = {"number": 4, "head": {"sha": run_head}, "base": {"repo": {"url": f"{fake.base}/repos/someone/else"}}}
    assert publisher(fake).pr_for_workflow_run({**with_prs, "pull_requests": [foreign]}) is None  # right head, other repo
    lookalike = {"number": 44, "head": {"sha": run_head, "ref": with_prs["head_branch"],
                                       "repo_owner": with_prs["head_repository"]["owner"]["login"]},
                 "base": {"repo": {"full_name": "someone/else"}, "ref": "main", "sha": "0" * 40}}
    fake.pulls = [lookalike]
    assert publisher(fake).pr_for_workflow_run({**with_prs, "pull_requests": []}) is None  # the head lookup checks the base too
    fake.pulls = []
    ours = {"number": 3, "head": {"sha": "f" * 40}, "base": {"repo": {"url": f"{fake.base}/repos/{fake.repo}"}}}
    assert publisher(fake).pr_for_workflow_run({**with_prs, "pull_requests": [ours]}) is None  # head is not the run's
    assert publisher(fake).pr_for_workflow_run({**with_prs, "pull_requests": [ours], "head_sha": "f" * 40}) == 3


def test_cli_publish_comment_via_workflow_run_event(fake: FakeGitHub, bti, tmp_path: Path) -> None:
    event = json.loads((WEBHOOKS / "workflow_run.completed.payload.json").read_text())
    run = event["workflow_run"]
    fake.pulls = [{"number": 9, "head": {"sha": run["head_sha"], "ref": run["head_branch"],
                                         "repo_owner": run["head_repository"]["owner"]["login"]}}]
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.base, "BTI_GITHUB_THROTTLE": "0"}
    args = ["publish", "comment", "--results", str(GOLDEN / "results.jsonl"), "--base", str(GOLDEN / "results.jsonl"),
            "--repo", fake.repo, "--event-path", str(WEBHOOKS / "workflow_run.completed.payload.json"), "--key", "vendor",
            "--mode", "always"]  # no change against the base: only "always" creates it
    for _ in range(3):
        res = bti(*args, env=env)
        assert res.code == 0, res.err
    assert len(fake.comments[9]) == 1 and comment.marker("vendor") in fake.comments[9][0]["body"]
    assert TOKEN not in res.out + res.err


def test_cli_dispatch_and_errors_never_print_the_token(fake: FakeGitHub, bti) -> None:
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.base, "BTI_GITHUB_THROTTLE": "0"}
    res = bti("dispatch", "--to", "vendor-a/x,vendor-b/y", "--event-type", "upstream-pull-request", "--repo", "pytorch/pytorch",
              "--sha", SHA, "--pr", "12", "--ref", "feature/x", "--suites", "ops", "--recipes", "xnnpack,portable", env=env)
    assert res.code == 0, res.err
    assert [r for r, _ in fake.dispatches] == ["vendor-a/x", "vendor-b/y"]
    body = fake.dispatches[0][1]
    assert body["event_type"] == "upstream-pull-request"
    assert body["client_payload"] == {"repo": "pytorch/pytorch", "sha": SHA, "pr": 12, "ref": "feature/x", "suites": "ops",
                                      "recipes": "xnnpack,portable"}
    bad = bti("dispatch", "--to", "vendor-a/x", "--repo", "pytorch/pytorch", "--sha", "not-a-sha", env=env)
    assert bad.code == 2 and "client_payload.sha: expected 40 hex characters" in bad.err
    missing = bti("publish", "comment", "--results", str(GOLDEN / "results.jsonl"), "--repo", "nobody/missing", "--pr", "1", env=env)
    assert missing.code == 2 and "404" in missing.err and TOKEN not in missing.err + missing.out
    assert len(missing.err.strip().splitlines()) == 1


def test_cli_check_and_badge_branch(fake: FakeGitHub, bti, tmp_path: Path) -> None:
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.base, "BTI_GITHUB_THROTTLE": "0"}
    res = bti("publish", "check", "--results", str(GOLDEN / "results.jsonl"), "--repo", fake.repo, "--sha", SHA, env=env)
    assert res.code == 0 and "check_run" in res.out
    (run,) = fake.check_runs.values()
    assert run["conclusion"] == "failure" and run["output"]["summary"].startswith("# bti results")
    first = fake.branch("badges", {"README.md": b"badges"})
    args = ["publish", "badge", "--results", str(GOLDEN / "results.jsonl"), "-o", str(tmp_path), "--branch", "badges", "--repo", fake.repo]
    res = bti(*args, env=env)
    assert res.code == 0, res.err
    files = fake.files_on("badges")
    assert json.loads(files["badge.json"])["schemaVersion"] == 1 and b"<svg" in files["badge.svg"] and files["README.md"] == b"badges"
    head = fake.refs["badges"]
    assert fake.commits[head][1] == [first]  # every badge in one commit on top of the branch
    assert sum(1 for m, p, _ in fake.log if m == "POST" and p.endswith("/git/commits")) == 1
    again = bti(*args, env=env)
    assert again.code == 0 and "unchanged" in again.out and fake.refs["badges"] == head


def test_the_first_badge_creates_its_branch(fake: FakeGitHub, bti, tmp_path: Path) -> None:
    """A repository's first periodic run: no badges branch yet. It is created holding the badges only (a commit without
    parents, not a copy of the default branch); the next publish finds it."""
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.base, "BTI_GITHUB_THROTTLE": "0"}
    args = ["publish", "badge", "--results", str(GOLDEN / "results.jsonl"), "-o", str(tmp_path), "--branch", "badges", "--repo", fake.repo]
    assert "badges" not in fake.refs
    res = bti(*args, env=env)
    assert res.code == 0, res.err
    head = fake.refs["badges"]
    assert fake.commits[head][1] == [] and set(fake.files_on("badges")) == {p.name for p in tmp_path.glob("badge*")}
    again = bti(*args, env=env)
    assert again.code == 0 and "unchanged" in again.out and fake.refs["badges"] == head
    del fake.refs["badges"]
    fake.stored_faults.append(Fault("POST", r".*/git/refs$", 502, 1))  # created, then answered 502: not created twice
    res = bti(*args, env=env)
    assert res.code == 0 and "commit " + fake.refs["badges"][:12] in res.out, (res.out, res.err)
    del fake.refs["badges"]
    fake.inject("GET", r".*/git/ref/heads/badges", 403)  # a refusal is not a missing branch: nothing is created
    res = bti(*args, env=env)
    assert res.code == 2 and "GET branch badges failed with 403" in res.err and "badges" not in fake.refs


@pytest.mark.parametrize("commit", [None, "f" * 40, SHA], ids=["nothing-installed", "other-commit", "the-commit"])
def test_check_on_the_upstream_commit_only_when_that_commit_ran(fake: FakeGitHub, bti, tmp_path: Path, commit: str | None) -> None:
    lines = (GOLDEN / "results.jsonl").read_text().splitlines()
    header = json.loads(lines[0])
    header["upstream"] = {"repo": fake.repo, "sha": SHA, "installed": {"package": "executorch", "version": "1.4.1", "commit": commit}}
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.base, "BTI_GITHUB_THROTTLE": "0"}
    res = bti("publish", "check", "--results", str(path), "--repo", fake.repo, "--sha", SHA, env=env)
    if commit == SHA:
        assert res.code == 0 and len(fake.check_runs) == 1, res.err
        return
    ran = "executorch 1.4.1" + (f" at {commit}" if commit else "")
    assert res.code == 2 and res.err.startswith(f"bti: error: refusing to post on {fake.repo}@{SHA[:12]}: the results were produced with {ran}")
    assert not fake.check_runs and not fake.statuses
    other = bti("publish", "check", "--results", str(path), "--repo", fake.repo, "--sha", "e" * 40, env=env)
    assert other.code == 0  # any other commit (the vendor's own PR head) is not a claim about upstream


def test_fetch_base_takes_the_newest_artifact_of_the_base_branch(fake: FakeGitHub, bti, tmp_path: Path) -> None:
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.base, "BTI_GITHUB_THROTTLE": "0"}
    golden = (GOLDEN / "results.jsonl").read_bytes()
    fake.add_artifact("bti-k-1234-merged", "main", {"results.jsonl": b"old"})
    fake.add_artifact("bti-k-1234-merged", "main", {"results.jsonl": golden, "junit.xml": b"<x/>"})
    fake.add_artifact("bti-k-1234-merged", "feature", {"results.jsonl": b"not the base"})
    fake.add_artifact("bti-k-1234-merged", "main", {"results.jsonl": b"expired"}, expired=True)
    fake.add_artifact("bti-k-1234-merged", "main", {"results.jsonl": b"a fork's branch called main"}, fork=True)
    out = tmp_path / "out.txt"
    res = bti("fetch-base", "--repo", fake.repo, "--name", "bti-k-1234-merged", "--branch", "main", "-o", str(tmp_path / "base"),
              "--github-output", str(out), env=env)
    assert res.code == 0, res.err
    assert (tmp_path / "base" / "results.jsonl").read_bytes() == golden
    assert f"path={tmp_path / 'base' / 'results.jsonl'}" in out.read_text()
    assert fake.blob_auth is None  # the token never follows the redirect to storage
    none = bti("fetch-base", "--repo", fake.repo, "--name", "bti-other-merged", "--branch", "main", "-o", str(tmp_path / "b2"),
               "--github-output", str(out), env=env)
    assert none.code == 0 and none.out.strip() == "base: none (no unexpired bti-other-merged artifact from a run on main)"
    assert out.read_text().endswith("path=\nreason=no unexpired bti-other-merged artifact from a run on main\n")
    # the comment says why there is no base
    res = bti("publish", "comment", "--results", str(GOLDEN / "results.jsonl"), "--repo", fake.repo, "--pr", "5",
              "--no-base-reason", "no unexpired bti-other-merged artifact from a run on main", env=env)
    assert res.code == 0, res.err
    assert "_No base results to compare against: no unexpired bti-other-merged artifact from a run on main._" in fake.comments[5][0]["body"]


def test_fetch_history_then_portal_keeps_history(fake: FakeGitHub, bti, tmp_path: Path) -> None:
    """The periodic workflow's portal job: the previous run's history copies come back from its artifact (names
    checked: no path escapes the directory), the portal adds this run and prunes what is past --history-days."""
    import gzip
    import json

    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.base, "BTI_GITHUB_THROTTLE": "0"}
    golden = (GOLDEN / "results.jsonl").read_text().splitlines()
    header = json.loads(golden[0])

    def copy(run_id: str, created: str) -> bytes:
        lines = [json.dumps({**header, "run_id": run_id, "created": created}), *golden[1:]]
        return gzip.compress(("\n".join(lines) + "\n").encode())

    fake.add_artifact("bti-portal-history", "main", {
        "20260101T000000Z-ancient.jsonl.gz": copy("ancient", "2026-01-01T00:00:00+00:00"),
        "20261120T031700Z-prev.jsonl.gz": copy("prev", "2026-11-20T03:17:00+00:00"),
        "../../escape.jsonl.gz": b"x", "notes.txt": b"not history"})
    res = bti("fetch-history", "--repo", fake.repo, "--name", "bti-portal-history", "--branch", "main", "-o", str(tmp_path / "history"), env=env)
    assert res.code == 0, res.err
    assert sorted(p.name for p in (tmp_path / "history").iterdir()) == ["20260101T000000Z-ancient.jsonl.gz", "20261120T031700Z-prev.jsonl.gz"]
    assert not (tmp_path / "escape.jsonl.gz").exists()
    now = tmp_path / "now.jsonl"
    now.write_text("\n".join([json.dumps({**header, "run_id": "today", "created": "2026-11-21T03:17:00+00:00"}), *golden[1:]]) + "\n")
    res = bti("portal", str(tmp_path / "history"), str(now), "-o", str(tmp_path / "site"), "--keep-history", str(tmp_path / "history"))
    assert res.code == 0, res.err
    assert "3 runs" in res.out  # the portal saw all three ...
    kept = sorted(p.name for p in (tmp_path / "history").iterdir())
    assert kept == ["20261120T031700Z-prev.jsonl.gz", "20261121T031700Z-today.jsonl.gz"]  # ... and keeps 90 days
    none = bti("fetch-history", "--repo", fake.repo, "--name", "bti-nothing", "--branch", "main", "-o", str(tmp_path / "h2"), env=env)
    assert none.code == 0 and none.out.strip() == "history: none (no unexpired bti-nothing artifact from a run on main)"
    assert (tmp_path / "h2").is_dir() and not any((tmp_path / "h2").iterdir())  # where the first run's portal starts it
    first = bti("portal", str(tmp_path / "h2"), str(now), "-o", str(tmp_path / "site2"), "--keep-history", str(tmp_path / "h2"))
    assert first.code == 0 and "1 runs" in first.out, first.err
    assert [p.name for p in (tmp_path / "h2").iterdir()] == ["20261121T031700Z-today.jsonl.gz"]
    bad = bti("fetch-history", "--repo", fake.repo, "--name", "bti-nothing", "--branch", "main", "-o", str(now / "h3"), env=env)
    assert bad.code == 2 and bad.err.strip().splitlines() == [f"bti: error: --out-dir {now / 'h3'}: cannot create it: Not a directory"]


def test_fetch_history_passes_over_an_unusable_artifact(fake: FakeGitHub, bti, tmp_path: Path) -> None:
    """The newest history artifact holds only broken copies (truncated gzip, not a results file): the history is not
    lost; the next older artifact's copies come back, and the output says which run's artifact was passed over."""
    import gzip
    import json

    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.base, "BTI_GITHUB_THROTTLE": "0"}
    header = json.loads((GOLDEN / "results.jsonl").read_text().splitlines()[0])
    good = gzip.compress((json.dumps({**header, "run_id": "good"}) + "\n").encode())
    fake.add_artifact("bti-portal-history", "main", {"20261119T000000Z-good.jsonl.gz": good})
    flipped = bytearray(good)
    flipped[11] ^= 0xFF  # a flipped byte at the start of the deflate stream: zlib.error, not an OSError
    newest = fake.add_artifact("bti-portal-history", "main", {"20261120T000000Z-cut.jsonl.gz": good[: len(good) // 2],
                                                              "20261120T000000Z-flip.jsonl.gz": bytes(flipped),
                                                              "20261120T000000Z-junk.jsonl.gz": gzip.compress(b"[1, 2]\n")})
    res = bti("fetch-history", "--repo", fake.repo, "--name", "bti-portal-history", "--branch", "main", "-o", str(tmp_path / "h"), env=env)
    assert res.code == 0, res.err
    assert [p.name for p in (tmp_path / "h").iterdir()] == ["20261119T000000Z-good.jsonl.gz"]  # nothing partial left
    assert res.out.strip() == (f"history: 1 run(s) in {tmp_path / 'h'} (passed over: run {newest + 1}'s artifact holds no usable "
                               "history copy)")


def test_check_on_a_run_that_verified_nothing_is_never_a_success(fake: FakeGitHub, bti, tmp_path: Path) -> None:
    header = {"kind": "header", "schema": 1, "run_id": "r", "recipes": {"qnn": "h"},
              "recipe_info": {"qnn": {"unavailable": "environment variable QNN_SDK_ROOT is not set"}}}
    rec = {"kind": "result", "id": "op.add.a[float32,static]@qnn", "case": "op.add.a", "suite": "smoke", "recipe": "qnn",
           "backend": "executorch", "status": "UNAVAILABLE", "detail": "environment variable QNN_SDK_ROOT is not set"}
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(header) + "\n" + json.dumps(rec) + "\n")
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.base, "BTI_GITHUB_THROTTLE": "0"}
    res = bti("publish", "check", "--results", str(path), "--repo", fake.repo, "--sha", SHA, "--name", "a", env=env)
    assert res.code == 0, res.err
    res = bti("publish", "check", "--results", str(path), "--repo", fake.repo, "--sha", SHA, "--name", "b",
              "--allow-unverified", env=env)
    assert res.code == 0, res.err
    runs = {r["name"]: r for r in fake.check_runs.values()}
    assert runs["a"]["conclusion"] == "failure" and runs["a"]["output"]["title"].startswith("nothing verified")
    assert "QNN_SDK_ROOT" in runs["a"]["output"]["title"]
    assert runs["b"]["conclusion"] == "neutral"
    out = tmp_path / "gh-output"
    assert bti("report", str(path), "-o", str(tmp_path / "rep"), "--format", "md", "--github-output", str(out), "--quiet").code == 0
    assert "unverified=qnn\n" in out.read_text() and "failed=0\n" in out.read_text()


def test_dry_runs_render_exactly_what_would_be_sent_without_a_token(fake: FakeGitHub, bti, tmp_path: Path) -> None:
    """`--dry-run` prints the comment's body and the check run's requests as publishing sends them, and calls nothing."""
    results, env = str(GOLDEN / "results.jsonl"), {"GITHUB_API_URL": fake.base, "BTI_GITHUB_THROTTLE": "0", "GITHUB_TOKEN": ""}
    common = ["--results", results, "--base", results, "--key", "vendor", "--mode", "always", "--run-url", "https://run/1"]
    dry = bti("publish", "comment", *common, "--dry-run", "-o", str(tmp_path / "comment.md"), env=env)
    checked = bti("publish", "check", "--results", results, "--dry-run", "--sha", SHA, "--details-url", "https://run/1", env=env)
    badge = bti("publish", "badge", "--results", results, "-o", str(tmp_path / "b"), "--branch", "badges", "--repo", fake.repo,
                "--dry-run", env=env)
    assert dry.code == checked.code == badge.code == 0, dry.err + checked.err + badge.err
    assert not fake.log and "would create it" in dry.err and "would commit badge" in badge.out  # nothing was called
    assert (tmp_path / "b" / "badge.svg").is_file()
    env["GITHUB_TOKEN"] = TOKEN
    assert bti("publish", "comment", *common, "--repo", fake.repo, "--pr", "5", env=env).code == 0
    assert bti("publish", "check", "--results", results, "--repo", fake.repo, "--sha", SHA, "--details-url", "https://run/1",
               env=env).code == 0
    assert fake.comments[5][0]["body"] == (tmp_path / "comment.md").read_text(encoding="utf-8")
    sent = json.loads(checked.out)
    (run,) = fake.check_runs.values()
    want = {k: v for k, v in run.items() if k not in ("annotations_batches", "external_id")}
    assert sent["check_run"] == want and run["conclusion"] == "failure"
    assert [len(sent["check_run"]["output"].get("annotations") or []), *map(len, sent["annotation_batches"])] == \
        run["annotations_batches"]


def test_dry_runs_need_no_repo_and_publishing_does(bti, tmp_path: Path) -> None:
    results = str(GOLDEN / "results.jsonl")
    nothing = bti("publish", "comment", "--results", results, "--pr", "3")
    assert nothing.code == 2 and "--repo owner/name is needed" in nothing.err and len(nothing.err.strip().splitlines()) == 1
    nosha = bti("publish", "check", "--results", results, "--repo", "o/n")
    assert nosha.code == 2 and "needs --sha" in nosha.err
    full = bti("publish", "comment", "--results", results, "--dry-run", "-o", "/proc/no/such/dir/comment.md")
    assert full.code == 2 and "cannot write it" in full.err
    out = bti("publish", "comment", "--results", results, "--dry-run")
    assert "bti:comment:bti" in out.out and "mode changes" in out.err  # to stdout; the workflows' default mode
