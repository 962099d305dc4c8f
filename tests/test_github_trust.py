"""Publishing against a hostile results file and an unreliable GitHub (loopback fake, real HTTP)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from github import GithubRetry

from harness.github.client import PublishError, make_github, read_retry
from harness.github.publisher import Annotation, Publisher
from harness.report import comment, markdown, safe
from harness.results import read_results

from .conftest import TESTS
from .github_fake import FakeGitHub

GOLDEN = TESTS / "golden"
TOKEN = "ghs_TRUSTTESTTOKEN0123456789"
SHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
HOSTILE_ID = "op.mul.`x` @octocat <!-- bti:comment:other -->|[float32,static]@fault-perturb"
HOSTILE_DETAIL = ("output[0]: max_abs 1.0 > 1e-4 cc @octocat @bti-org/maintainers <img src=x onerror=alert(1)> "
                  "<!-- bti:comment:other --> `code` | <details>\x1b[31m\x00")


@pytest.fixture
def fake(httpserver) -> FakeGitHub:
    gh = FakeGitHub(httpserver.url_for("/"))
    httpserver.expect_request(re.compile(".*")).respond_with_handler(gh)
    return gh


@pytest.fixture(autouse=True)
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BTI_GITHUB_BACKOFF", "0.01")
    monkeypatch.setenv("BTI_GITHUB_THROTTLE", "0")


def publisher(fake: FakeGitHub, token: str = TOKEN) -> Publisher:
    return Publisher(make_github(token, fake.base, retry=read_retry(total=2, backoff_factor=0.01), throttle=False), fake.repo)


def hostile_results(tmp_path: Path) -> Path:
    """The golden run with one failing record whose id and detail carry mentions, HTML, markers and backticks."""
    lines = (GOLDEN / "results.jsonl").read_text().splitlines()
    out = [lines[0]]
    for line in lines[1:]:
        rec = json.loads(line)
        if rec.get("status") == "FAIL_MISMATCH" and HOSTILE_ID not in "".join(out):
            rec["id"], rec["detail"] = HOSTILE_ID, HOSTILE_DETAIL
        out.append(json.dumps(rec))
    path = tmp_path / "hostile.jsonl"
    path.write_text("\n".join(out) + "\n")
    assert HOSTILE_ID in path.read_text()
    return path


# ---------------------------------------------------------------------------------------------- neutralising
def test_safe_neutralises_every_kind_of_breakout() -> None:
    assert safe.inline(HOSTILE_DETAIL) == (
        "output\\[0\\]: max_abs 1.0 > 1e-4 cc @\u2060octocat @\u2060bti-org/maintainers &lt;img src=x onerror=alert(1)> "
        "&lt;!-- bti:comment:other --> 'code' \\| &lt;details>\\[31m")
    assert safe.code(HOSTILE_ID) == "`op.mul.'x' @octocat <!-- bti:comment:other -->\\|[float32,static]@fault-perturb`"
    assert safe.plain("ping @octocat\nnow") == "ping @\u2060octocat now"
    assert safe.inline("[approve](https://evil) ![](http://t/x.png) see pytorch/pytorch#123") == \
        "\\[approve\\](https://evil) !\\[\\](http://t/x.png) see pytorch/pytorch#\u2060123"
    assert safe.inline("x" * 10, 5) == "xxxx…"


def test_hostile_results_published_bodies(fake: FakeGitHub, bti, tmp_path: Path) -> None:
    results = hostile_results(tmp_path)
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.base, "BTI_GITHUB_THROTTLE": "0"}
    res = bti("publish", "comment", "--results", str(results), "--repo", fake.repo, "--pr", "4", "--key", "bti", env=env)
    assert res.code == 0, res.err
    (body,) = [c["body"] for c in fake.comments[4]]
    row = next(line for line in body.splitlines() if "fault-perturb`" in line and "octocat" in line)
    assert row == ("| `op.mul.'x' @octocat <!-- bti:comment:other -->\\|[float32,static]@fault-perturb` | — | FAIL_MISMATCH (backend) | "
                   + safe.inline(HOSTILE_DETAIL, 240) + " |")
    outside_code = re.sub(r"`[^`\n]*`", "", body)
    assert "<img" not in outside_code and "<details" not in outside_code and "\x1b" not in body and "\x00" not in body
    assert not re.search(r"(?<![`\w])@octocat", outside_code)  # every mention outside a code span carries the joiner
    assert body.startswith(comment.marker("bti"))
    assert outside_code.count("<!--") == 1  # only our own marker is a live HTML comment

    res = bti("publish", "check", "--results", str(results), "--repo", fake.repo, "--sha", SHA, env=env)
    assert res.code == 0, res.err
    (run,) = fake.check_runs.values()
    summary = run["output"]["summary"]
    assert "<img" not in re.sub(r"`[^`\n]*`", "", summary) and "@\u2060octocat" in summary
    note = next(a for a in run["output"]["annotations"] if "octocat" in a["title"])
    assert note["title"] == "op.mul.`x` @\u2060octocat <!-- bti:comment:other -->|[float32,static]@\u2060fault-perturb"
    assert "@\u2060octocat @\u2060bti-org/maintainers" in note["message"] and "\x1b" not in note["message"]

    # the job summary (bti report --step-summary) goes through the same functions
    header, recs = read_results(results)
    md = markdown.render(dict(header), recs)
    assert "<img" not in re.sub(r"`[^`\n]*`", "", md) and safe.code(HOSTILE_ID) in md


def test_another_keys_marker_in_results_never_steers_an_edit(fake: FakeGitHub, tmp_path: Path) -> None:
    pub = publisher(fake)
    header, recs = read_results(hostile_results(tmp_path))
    body = comment.render("bti", dict(header), recs, None)
    assert pub.upsert_comment(4, "bti", body)[0] == "created"
    # the comment of key "other" is not the "bti" one, although that body contains other's marker text
    assert pub.upsert_comment(4, "other", comment.marker("other") + " mine")[0] == "created"
    assert len(fake.comments[4]) == 2 and fake.comments[4][0]["body"] == body


@pytest.mark.parametrize("key", ["a b", "x -->", "<!--", "", "k" * 65, "ключ"])
def test_bad_key_is_one_line_exit_2(bti, key: str) -> None:
    res = bti("publish", "comment", "--results", str(GOLDEN / "results.jsonl"), "--repo", "o/r", "--pr", "1", "--key", key,
              env={"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": "http://127.0.0.1:9"})
    assert res.code == 2 and res.err.startswith("bti: error: --key") and len(res.err.strip().splitlines()) == 1


# ---------------------------------------------------------------------------------------------- whose comment it is
def test_comment_takeover_is_impossible(fake: FakeGitHub) -> None:
    tag = comment.marker("bti")
    fake.identities[TOKEN] = "github-actions[bot]"
    fake.comments[3] = [
        {"id": 1, "body": tag + " I am mallory, and my comment starts with the marker", "author": "mallory"},
        {"id": 2, "body": "quoting: " + tag, "author": "github-actions[bot]"},  # ours, but the marker is not first
    ]
    pub = publisher(fake)
    action, cid = pub.upsert_comment(3, "bti", tag + "\nresults")
    assert action == "created" and cid not in (1, 2)
    assert [c["body"] for c in fake.comments[3][:2]] == [tag + " I am mallory, and my comment starts with the marker",
                                                         "quoting: " + tag]
    assert pub.upsert_comment(3, "bti", tag + "\nnew results") == ("updated", cid)
    assert not any(path == "/user" for _, path, _ in fake.log)
    # another identity (a second bot, a PAT) never edits the first one's comment
    fake.identities["other-token"] = "someone"
    assert publisher(fake, "other-token").upsert_comment(3, "bti", tag + "\nx")[0] == "created"


def test_comments_are_listed_100_a_page(fake: FakeGitHub) -> None:
    fake.comments[5] = [{"id": i, "body": f"noise {i}", "author": "human"} for i in range(250)]
    publisher(fake).upsert_comment(5, "k", comment.marker("k"))
    assert sum(1 for m, p, _ in fake.log if p == "/graphql") == 3


# ---------------------------------------------------------------------------------------------- GitHub's bad days
WRITES = [  # (method, path pattern, how to provoke it)
    ("POST", r"/repos/.*/issues/\d+/comments", "comment-create"),
    ("PATCH", r"/repos/.*/issues/comments/\d+", "comment-edit"),
    ("POST", r"/repos/.*/check-runs", "check-create"),
    ("PATCH", r"/repos/.*/check-runs/\d+", "check-annotations"),
    ("POST", r"/repos/.*/statuses/[0-9a-f]+", "status"),
    ("POST", r"/repos/.*/git/blobs", "badge"),
    ("POST", r"/repos/.*/git/trees", "badge"),
    ("POST", r"/repos/.*/git/commits", "badge"),
    ("PATCH", r"/repos/.*/git/refs/heads/.*", "badge"),
]


def _provoke(fake: FakeGitHub, what: str) -> object:
    pub = publisher(fake)
    tag = comment.marker("k")
    if what == "comment-create":
        return pub.upsert_comment(9, "k", tag + " a")
    if what == "comment-edit":
        return pub.upsert_comment(9, "k", tag + " b")
    if what in ("check-create", "check-annotations"):
        notes = [Annotation(".github", "m", f"t{i}") for i in range(60)]
        return pub.check(SHA, "bti", "failure", "t", "s", annotations=notes)
    if what == "status":
        fake.checks_allowed = False
        return pub.check(SHA, "bti", "failure", "t", "s")
    return pub.commit_files("badges", {"badge.json": b"{}", "badge.svg": b"<svg/>"}, "bti: badges")


def _prepare(fake: FakeGitHub, what: str) -> None:
    fake.identities[TOKEN] = "github-actions[bot]"
    if what == "comment-edit":
        fake.comments[9] = [{"id": 77, "body": comment.marker("k") + " a", "author": "github-actions[bot]"}]
    fake.branch("badges", {"README.md": b"x"})


@pytest.mark.parametrize(("method", "pattern", "what"), WRITES, ids=[f"{m}-{w}-{i}" for i, (m, _, w) in enumerate(WRITES)])
@pytest.mark.parametrize("status", [502, 403])
def test_every_write_survives_a_5xx_and_a_secondary_rate_limit(fake: FakeGitHub, method: str, pattern: str, what: str,
                                                               status: int) -> None:
    _prepare(fake, what)
    if status == 403:
        fake.inject(method, pattern, 403, times=1, **{"Retry-After": "0"})
        fake.faults[-1].body = {"message": "You have exceeded a secondary rate limit."}
    else:
        fake.inject(method, pattern, status, times=1)
    _provoke(fake, what)
    hits = [p for m, p, _ in fake.log if m == method and re.fullmatch(pattern, p)]
    assert len(hits) >= 2  # the failed attempt, then the repeat
    assert all(f.times == 0 for f in fake.faults)
    if what == "comment-create":
        assert len(fake.comments[9]) == 1
    if what == "comment-edit":
        assert fake.comments[9][0]["body"].endswith(" b") and len(fake.comments[9]) == 1
    if what == "check-annotations":
        (run,) = fake.check_runs.values()
        assert run["annotations_batches"] == [50, 10]
    if what == "status":
        assert len(fake.statuses) == 1 and "target_url" not in fake.statuses[0]  # no URL: omitted, not ""
    if what == "badge":
        assert set(fake.files_on("badges")) == {"README.md", "badge.json", "badge.svg"}


@pytest.mark.parametrize(("method", "pattern", "what"), WRITES[:5], ids=[w for _, _, w in WRITES[:5]])
def test_a_plain_403_is_one_clear_line(fake: FakeGitHub, method: str, pattern: str, what: str) -> None:
    _prepare(fake, what)
    fake.inject(method, pattern, 403, times=100)
    fake.faults[-1].body = {"message": "Resource not accessible by integration"}
    if what == "check-create":  # a 403 on check runs falls back to a commit status, by design
        assert _provoke(fake, what) == "status"
        return
    with pytest.raises(PublishError) as info:
        _provoke(fake, what)
    text = info.value.one_line()
    assert "failed with 403 (Resource not accessible by integration)" in text and TOKEN not in text and "\n" not in text


@pytest.mark.parametrize("what", ["check-create", "check-annotations"])
def test_a_check_write_stored_then_502_is_not_repeated(fake: FakeGitHub, what: str) -> None:
    _prepare(fake, what)
    method, pattern = ("POST", r"/repos/.*/check-runs") if what == "check-create" else ("PATCH", r"/repos/.*/check-runs/\d+")
    fake.inject_after(method, pattern, 502, times=1)
    assert _provoke(fake, what) == "check_run"
    (run,) = fake.check_runs.values()  # one check run, and each annotation batch once
    assert run["annotations_batches"] == [50, 10]


def test_comment_lookup_survives_a_502_on_graphql(fake: FakeGitHub) -> None:
    fake.identities[TOKEN] = "github-actions[bot]"
    fake.comments[2] = [{"id": 5, "body": comment.marker("k") + " old", "author": "github-actions[bot]"}]
    fake.inject("POST", r"/graphql", 502, times=1)
    assert publisher(fake).upsert_comment(2, "k", comment.marker("k") + " new") == ("updated", 5)


def test_a_create_stored_then_502_is_never_posted_twice(fake: FakeGitHub) -> None:
    fake.identities[TOKEN] = "github-actions[bot]"
    fake.inject_after("POST", r"/repos/.*/issues/\d+/comments", 502, times=1)
    action, cid = publisher(fake).upsert_comment(6, "k", comment.marker("k") + " body")
    assert action == "created" and len(fake.comments[6]) == 1 and fake.comments[6][0]["id"] == cid
    assert sum(1 for m, p, _ in fake.log if m == "POST" and p.endswith("/comments")) == 1


def test_a_dispatch_answered_with_502_is_not_fired_again(fake: FakeGitHub) -> None:
    fake.inject_after("POST", r"/repos/.*/dispatches", 502, times=1)
    with pytest.raises(PublishError) as info:
        publisher(fake).dispatch("upstream-push", {"repo": "pytorch/pytorch", "sha": SHA})
    assert "not repeated" in info.value.one_line() and len(fake.dispatches) == 1


def test_exhausted_rate_limit_fails_fast_naming_the_reset(fake: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    reset = int(time.time()) + 3600
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(reset)}
    fake.inject("GET", r"/repos/octo-org/octo-repo", 403, times=5, **headers)
    fake.faults[-1].body = {"message": "API rate limit exceeded for installation ID 1."}
    t0 = time.monotonic()
    with pytest.raises(PublishError) as info:
        Publisher(make_github(TOKEN, fake.base, throttle=False), fake.repo).upsert_comment(1, "k", comment.marker("k"))
    assert time.monotonic() - t0 < 10
    when = time.strftime("%H:%M:%S", time.gmtime(reset))
    assert f"rate limit exhausted, it resets at {when} UTC" in info.value.one_line()
    assert "at most 60 s (BTI_GITHUB_MAX_WAIT)" in info.value.one_line()
    # the same for a write, and the wait is configurable
    monkeypatch.setenv("BTI_GITHUB_MAX_WAIT", "5")
    fake.faults.clear()
    fake.inject("POST", r"/repos/.*/issues/\d+/comments", 403, times=5, **headers)
    with pytest.raises(PublishError, match=r"resets at .* UTC.*at most 5 s"):
        publisher(fake).upsert_comment(1, "k", comment.marker("k"))


def test_retry_exhaustion_and_bad_event_files_are_one_line(fake: FakeGitHub, bti, tmp_path: Path) -> None:
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_API_URL": fake.base, "BTI_GITHUB_THROTTLE": "0", "BTI_GITHUB_BACKOFF": "0.01"}
    fake.inject("POST", r"/repos/.*/check-runs", 500, times=100)
    res = bti("publish", "check", "--results", str(GOLDEN / "results.jsonl"), "--repo", fake.repo, "--sha", SHA, env=env)
    assert res.code == 2 and res.err.startswith("bti: error: GitHub API: create check run failed with 500"), res.err
    assert len(res.err.strip().splitlines()) == 1
    fake.faults.clear()
    fake.inject("GET", r"/repos/.*/git/ref/heads/badges", 500, times=100)
    res = bti("publish", "badge", "--results", str(GOLDEN / "results.jsonl"), "-o", str(tmp_path), "--branch", "badges",
              "--repo", fake.repo, env=env)
    assert res.code == 2 and res.err.startswith("bti: error: GitHub API: GET branch badges failed") and len(res.err.splitlines()) == 1
    for content, message in [(None, "cannot read it"), ("{not json", "not a JSON event payload"), ("[1]", "not a workflow_run event")]:
        path = tmp_path / "event.json"
        path.unlink(missing_ok=True)
        if content is not None:
            path.write_text(content)
        res = bti("publish", "comment", "--results", str(GOLDEN / "results.jsonl"), "--repo", fake.repo,
                  "--event-path", str(path), env=env)
        assert res.code == 2 and message in res.err and len(res.err.strip().splitlines()) == 1, res.err


def test_read_retry_keeps_writes_out_of_urllib3() -> None:
    retry = read_retry()
    assert isinstance(retry, GithubRetry) and set(retry.allowed_methods) == {"GET", "HEAD"}
