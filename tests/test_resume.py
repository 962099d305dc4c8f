"""A SIGKILL mid-run, then --resume: every item exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import ROOT, TESTS

pytestmark = pytest.mark.slow


def result_lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if obj.get("kind") == "result":
            out.append(obj)
    return out


def test_resume_after_sigkill(bti, tmp_path: Path) -> None:
    jsonl = tmp_path / "results.jsonl"
    expected = bti("list", "-s", "smoke").out.split()
    assert len(expected) == 16
    env = {**os.environ, "PYTHONPATH": f"{TESTS}{os.pathsep}{ROOT}"}
    proc = subprocess.Popen([sys.executable, "-m", "harness", "run", "-s", "smoke", "-o", str(tmp_path), "--no-reuse", "-j", "1"],
                            cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 300
    while len(result_lines(jsonl)) < 4:
        assert proc.poll() is None, "run finished before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)  # the parent and its workers
    proc.wait()
    done_before = {r["id"] for r in result_lines(jsonl)}
    assert 4 <= len(done_before) < 16
    with jsonl.open("a") as fh:  # what a kill in the middle of a write leaves behind
        fh.write('{"kind":"result","id":"op.add.bcast')
    res = bti("run", "-s", "smoke", "-o", str(tmp_path), "--no-reuse", "--resume")
    assert res.code == 0, res.err
    lines = [json.loads(x) for x in jsonl.read_text().splitlines()]
    assert lines[0]["kind"] == "header" and sum(x["kind"] == "header" for x in lines) == 1
    ids = [x["id"] for x in lines[1:]]
    assert sorted(ids) == sorted(expected)  # each item exactly once: none repeated, none lost
    assert f"{16 - len(done_before)} executed" in res.err
