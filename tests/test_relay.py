"""The cross-repo CI relay callback (RFC-0050): limits, and sending it over loopback HTTP."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from werkzeug import Request, Response

from harness.report.relay import MAX_FAILED, MAX_MESSAGE, MAX_TRACE, payload, validate
from harness.results import read_results

from .conftest import TESTS

GOLDEN = TESTS / "golden" / "results.jsonl"


def many_failures(n: int) -> tuple[dict, list[dict]]:
    header, recs = read_results(GOLDEN)
    fail = next(r for r in recs if r["status"] == "FAIL_MISMATCH")
    big = [dict(fail, id=f"op.x{i}[float32,static]@r", detail="é" * 3000, error={"type": "E", "message": "m", "trace": "€" * 5000})
           for i in range(n)]
    return dict(header), big


def test_payload_respects_the_relay_limits() -> None:
    header, recs = many_failures(1500)
    p = payload(header, recs, job_name="acme / xnnpack / 1/2", artifact_url="https://x/artifacts")
    assert p["status"] == "completed" and p["conclusion"] == "failure"
    assert p["test_counts"] == {"passed": 0, "failed": 1500, "skipped": 0}
    assert len(p["failed_tests"]) == MAX_FAILED and p["failed_tests_omitted"] == 500
    first = p["failed_tests"][0]
    assert len(first["message"].encode()) <= MAX_MESSAGE and first["message"] == "é" * (MAX_MESSAGE // 2)
    assert len(first["trace"].encode()) <= MAX_TRACE and first["trace"] == "€" * (MAX_TRACE // 3)
    with pytest.raises(ValueError, match=r"failed_tests\[0\].message: more than 1024 bytes"):
        validate({**p, "failed_tests": [dict(first, message="x" * 1025)]})
    with pytest.raises(ValueError, match="failed_tests: 1001 entries"):
        validate({**p, "failed_tests": [first] * 1001})
    running = payload(header, recs[:1], job_name="j", artifact_url=None, status="in_progress")
    assert running["conclusion"] is None


def test_counts_of_a_real_run() -> None:
    header, recs = read_results(GOLDEN)
    p = payload(dict(header), recs, job_name="j", artifact_url=None)
    c = p["test_counts"]
    assert c["passed"] + c["failed"] + c["skipped"] == len(recs) and c["failed"] == len(p["failed_tests"]) == 3


def test_send_to_loopback_relay(httpserver, bti, tmp_path: Path) -> None:
    got: list[dict] = []
    answers = iter([503, 200])

    def handler(request: Request) -> Response:
        got.append({"auth": request.headers.get("Authorization"), "body": request.get_json()})
        return Response("ok", status=next(answers))

    httpserver.expect_request("/callback", method="POST").respond_with_handler(handler)
    url = httpserver.url_for("/callback")
    res = bti("relay", "send", str(GOLDEN), "--url", url, "--job-name", "acme / shard 1/2", "--artifact-url", "https://a",
              env={"BTI_RELAY_TOKEN": "relay-secret"})
    assert res.code == 0, res.err
    assert len(got) == 2 and got[1]["auth"] == "Bearer relay-secret"  # the 503 was tried once more
    body = got[1]["body"]
    assert body["job_name"] == "acme / shard 1/2" and body["test_counts"]["failed"] == 3 and body["artifact_url"] == "https://a"
    assert "relay-secret" not in res.out + res.err
    httpserver.clear()
    httpserver.expect_request("/callback", method="POST").respond_with_data("no such job", status=404)
    bad = bti("relay", "send", str(GOLDEN), "--url", url, "--job-name", "j")
    assert bad.code == 2 and bad.err.strip() == f"bti: error: relay: POST {url} answered 404: no such job"
    plain = bti("relay", "send", str(GOLDEN), "--url", "http://relay.example/cb", "--job-name", "j")
    assert plain.code == 2 and "expected https://" in plain.err
    out = tmp_path / "p.json"
    assert bti("relay", "payload", str(GOLDEN), "--job-name", "j", "-o", str(out)).code == 0
    assert json.loads(out.read_text())["test_counts"]["failed"] == 3


def test_send_refuses_to_report_an_upstream_commit_that_did_not_run(bti, tmp_path: Path) -> None:
    lines = GOLDEN.read_text().splitlines()
    header = json.loads(lines[0])
    header["upstream"] = {"repo": "pytorch/executorch", "sha": "a" * 40, "installed": {"package": "executorch", "version": "1.4.1", "commit": None}}
    path = tmp_path / "r.jsonl"
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    res = bti("relay", "send", str(path), "--url", "https://relay.example/cb", "--job-name", "j")
    assert res.code == 2 and "refusing to post on pytorch/executorch@aaaaaaaaaaaa" in res.err
    evil = bti("relay", "send", str(GOLDEN), "--url", "http://localhost.evil.example/cb", "--job-name", "j")
    assert evil.code == 2 and "expected https://" in evil.err
