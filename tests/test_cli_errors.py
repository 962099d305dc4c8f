"""Bad input: exit 2 with one clear line, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import FIXTURES, ROOT


def check_usage_error(res, *needles: str) -> None:
    assert res.code == 2, (res.code, res.err)
    assert "Traceback" not in res.err
    lines = [x for x in res.err.splitlines() if x.strip()]
    assert len(lines) == 1, res.err
    assert lines[0].startswith("bti: error: ")
    for n in needles:
        assert n in lines[0]


def test_malformed_yaml(bti) -> None:
    res = bti("validate", str(FIXTURES / "suites" / "bad_yaml.yaml"))
    check_usage_error(res, "bad_yaml.yaml:", "invalid YAML")


def test_unknown_op(bti, tmp_path: Path) -> None:
    previous = tmp_path / "results.jsonl"
    previous.write_text('{"kind": "header", "schema": 1}\n')
    res = bti("run", "-s", str(FIXTURES / "suites" / "unknown_op.yaml"), "-r", "portable", "-o", str(tmp_path))
    check_usage_error(res, "unknown_op.yaml:7", "unknown op 'aten::definitely_not_an_op'")
    assert previous.read_text() == '{"kind": "header", "schema": 1}\n'  # refused before anything is written


def test_unknown_recipe(bti) -> None:
    res = bti("run", "-s", "smoke", "-r", "nosuch")
    check_usage_error(res, "unknown recipe 'nosuch'", "known recipes:", "xnnpack")


def test_unknown_suite(bti) -> None:
    check_usage_error(bti("list", "-s", "nosuch"), "unknown suite 'nosuch'")


def test_no_items_selected(bti) -> None:
    check_usage_error(bti("run", "-s", "smoke", "-k", "nothing.matches.*"), "no work items match")


@pytest.mark.parametrize("bad", ["truncated", "garbage", "empty"])
def test_unreadable_jsonl(bti, tmp_path: Path, bad: str) -> None:
    p = tmp_path / "r.jsonl"
    header = json.dumps({"kind": "header", "schema": 1, "recipes": {}})
    p.write_text({"truncated": header + '\n{"kind":"result","id":"x', "garbage": "not json\n", "empty": ""}[bad])
    res = bti("report", str(p), "-o", str(tmp_path / "o"))
    check_usage_error(res, str(p))


def test_bad_shard_and_missing_file(bti, tmp_path: Path) -> None:
    check_usage_error(bti("run", "-s", "smoke", "--shard", "3/2"), "--shard")
    check_usage_error(bti("report", str(tmp_path / "missing.jsonl")), "cannot read results")


def test_recipe_file_errors(bti, tmp_path: Path) -> None:
    p = tmp_path / "r.yaml"
    p.write_text("name: x\nbackend: executorch\ntolerances:\n  float32: {atool: 1}\n")
    check_usage_error(bti("validate", str(p)), "tolerances.float32 takes atol, rtol, sqnr_db")


def test_throughput_benchmark_unknown_flow() -> None:
    """The benchmark refuses a flow it does not know, in one line, before running anything."""
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "throughput.py"), "--flows", "int8,xnnpack_dynamic",
                          "--skip-ops"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert "Traceback" not in res.stderr
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert lines == [lines[0]] and "unknown flow xnnpack_dynamic" in lines[0] and "xnnpack_dynamic_int8_per_channel" in lines[0]
    assert res.stdout == ""


def test_a_bare_recipe_file_name_is_found_on_the_recipe_path(bti, tmp_path: Path) -> None:
    """`-r mybackend.yaml` (docs/backends.md): not in the working directory, it is looked up where names are."""
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "mybackend.yaml").write_text("name: mybackend\nbackend: executorch\n")
    env = {"BTI_RECIPE_PATH": str(tmp_path / "mine")}
    listed = bti("list", "-s", "smoke", "-r", "mybackend.yaml", "-k", "op.relu.*", cwd=tmp_path, env=env)
    assert listed.code == 0 and "op.relu.basic[float32,static]@mybackend" in listed.out, listed.err
    check_usage_error(bti("list", "-s", "smoke", "-r", "nosuch.yaml", cwd=tmp_path, env=env),
                      "recipe file nosuch.yaml: not in the working directory, nor in a recipe directory", str(tmp_path / "mine"))
