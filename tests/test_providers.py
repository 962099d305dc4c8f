"""Runtime providers (#16): the suite and `bti verify` through pybind, a local `command` template with
push/pull, and the C++ `bti_runner` built from the wheel; `bti bench` A/B of an fp32 and an int8 program
of the same case; corrupt bundles; a runner that crashes or hangs is that item's CRASH / TIMEOUT."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest

from harness.judge import device_tolerance

from .test_cli_errors import check_usage_error

pytestmark = pytest.mark.slow

PYRUNNER = f"{shlex.quote(sys.executable)} -m harness.pyrunner"
ITEMS = ("-k", "op.add.bcast_rank4*", "-k", "op.linear.fc*")


def records(path: Path) -> dict[str, dict]:
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    return {r["id"]: r for r in lines if r.get("kind") == "result"}


@pytest.fixture(scope="module")
def runner_bin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The C++ runner, built from the installed wheel (a machine without g++ gets it from apt in `make test`)."""
    from harness.runner_build import build

    return build(tmp_path_factory.mktemp("runner") / "bti_runner")


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from .conftest import run_bti

    out = tmp_path_factory.mktemp("bundles")
    res = run_bti("run", "-s", "smoke", "-r", "xnnpack", "-r", "xnnpack-int8-static-per-channel", "-k", "op.add.bcast_rank4*",
                  "--bundle", "-j", "2", "-o", str(out), "--no-reuse")
    assert res.code == 0, res.err
    return out


@pytest.fixture(scope="module")
def pybind_verified(bundles: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from .conftest import run_bti

    out = tmp_path_factory.mktemp("verified")
    res = run_bti("verify", str(bundles / "programs"), "-o", str(out))
    assert res.code == 0, res.out + res.err
    return out


def test_every_bundle_verifies_through_pybind_with_the_tolerance_it_was_judged_by(bundles: Path, pybind_verified: Path) -> None:
    made = records(bundles / "results.jsonl")
    bptes = sorted((bundles / "programs").glob("*.bpte"))
    assert len(bptes) == sum(1 for r in made.values() if "bpte" in r.get("artifacts", {})) >= 4
    tmp_path = pybind_verified
    got = records(tmp_path / "results.jsonl")
    assert set(got) == {r["id"] for r in made.values() if "bpte" in r.get("artifacts", {})}
    for item_id, rec in got.items():
        assert rec["status"] == "PASS" and rec["runtime"] == "pybind", rec
        # the card's, not a fixed 1e-3: what the item was judged by, as far as eager's bundled outputs can hold it
        assert rec["tolerance"] == device_tolerance(made[item_id]["tolerance"])
        assert rec["artifacts"]["tolerance_from"] == "bundle card"
    assert got["op.add.bcast_rank4[float32,static]@xnnpack-int8-static-per-channel"]["tolerance"] == {"sqnr_db": 10.0}
    assert (tmp_path / "junit.xml").stat().st_size and (tmp_path / "summary.md").stat().st_size  # the normal reports


def test_verify_through_a_command_template_with_push_and_pull(bti, bundles: Path, tmp_path: Path) -> None:
    """A "device" directory reached only by the push/pull templates (cp here, adb or scp on a board)."""
    some = tmp_path / "some"
    some.mkdir()
    for f in sorted((bundles / "programs").glob("*float32_static*.bpte")):
        shutil.copy(f, some)
        shutil.copy(f.with_name(f.name + ".json"), some)
    device = tmp_path / "device"
    res = bti("verify", str(some), "-o", str(tmp_path / "out"), "--runtime", f"command:{PYRUNNER} {{args}}",
              "--runtime-push", "sh -c 'mkdir -p $(dirname {remote}) && cp {local} {remote}'",
              "--runtime-pull", "cp {remote} {local}", "--runtime-remote-dir", str(device), "--no-report")
    assert res.code == 0, res.out + res.err
    got = records(tmp_path / "out" / "results.jsonl")
    assert len(got) == 2 and all(r["status"] == "PASS" and r["runtime"] == "command" for r in got.values()), got
    assert all(r["load_ms"] > 0 and r["latency_ms"]["repeats"] == 3 for r in got.values())
    pushed = list(device.rglob("program.bpte"))
    assert len(pushed) == 2  # the runner read the pushed copies, and wrote its outputs beside them
    assert all((p.parent / "out" / "out_0.bin").is_file() for p in pushed)


def test_verify_through_the_cpp_runner_matches_pybind_bit_for_bit(bti, bundles: Path, runner_bin: Path, tmp_path: Path,
                                                                 pybind_verified: Path) -> None:
    res = bti("verify", str(bundles / "programs"), "-o", str(tmp_path / "runner"), "--runtime", f"runner:{runner_bin}",
              "--no-report")
    assert res.code == 0, res.out + res.err
    got, want = records(tmp_path / "runner" / "results.jsonl"), records(pybind_verified / "results.jsonl")
    assert set(got) == set(want)
    for item_id, rec in got.items():
        assert rec["runtime"] == "runner" and rec["status"] == "PASS"
        assert rec["outputs"] == want[item_id]["outputs"], item_id  # identical error statistics: identical outputs
        assert rec["memory_mb"]["peak_rss"] > 0


def test_the_suite_runs_through_the_runner_with_dynamic_shapes(bti, bundles: Path, runner_bin: Path, tmp_path: Path) -> None:
    res = bti("run", "-s", "smoke", "-r", "xnnpack", "-k", "op.add.bcast_rank4*", "-o", str(tmp_path), "-j", "2",
              "--no-reuse", "--runtime", f"runner:{runner_bin}", "--no-report")
    assert res.code == 0, res.err
    got, pybind = records(tmp_path / "results.jsonl"), records(bundles / "results.jsonl")
    assert any("dynamic" in i for i in got)
    for item_id, rec in got.items():
        assert rec["status"] == pybind[item_id]["status"] == "PASS", rec
        assert rec["runtime"] == "runner" and pybind[item_id]["runtime"] == "pybind"
        assert rec["pte_sha256"] == pybind[item_id]["pte_sha256"]  # the same program, run elsewhere
        assert rec["outputs"] == pybind[item_id]["outputs"]
        assert rec["load_ms"] > 0 and rec["memory_mb"]["runtime_peak_rss"] > 0


def test_a_runner_that_crashes_or_hangs_fails_only_its_item(bti, tmp_path: Path) -> None:
    crash = bti("run", "-s", "smoke", "-r", "portable", "-k", "op.add.bcast_rank4[float32*", "-o", str(tmp_path / "c"),
                "-j", "1", "--no-reuse", "--no-report", "--runtime", "command:sh -c 'kill -SEGV $$' sh {args}")
    assert crash.code == 1, crash.err
    recs = records(tmp_path / "c" / "results.jsonl")
    assert len(recs) == 2 and {r["status"] for r in recs.values()} == {"CRASH"}, recs
    assert len({r["worker_pid"] for r in recs.values()}) == 1  # the worker survived the runner's death
    assert all("signal 11" in r["detail"] and r["triage"] == "infra" for r in recs.values())
    hang = bti("run", "-s", "smoke", "-r", "portable", "-k", "op.add.bcast_rank4?float32,static?", "-o", str(tmp_path / "h"),
               "--timeout", "4", "--no-reuse", "--no-report", "--runtime", "command:sh -c 'sleep 60' sh {args}")
    assert hang.code == 1
    (rec,) = records(tmp_path / "h" / "results.jsonl").values()
    assert rec["status"] == "TIMEOUT" and "did not finish" in rec["detail"], rec


def test_ab_bench_of_the_fp32_and_int8_programs_of_one_case(bti, inproc, bundles: Path, tmp_path: Path) -> None:
    progs = bundles / "programs"
    fp32 = progs / "op.add.bcast_rank4_float32_static_@xnnpack.bpte"
    int8 = progs / "op.add.bcast_rank4_float32_static_@xnnpack-int8-static-per-channel.bpte"
    alone = inproc("bench", str(int8), "--repeats", "5")  # the report: a PASSED int8 bundle was a MISMATCH
    assert alone.code == 0 and "sqnr_db 10 (from bundle card)" in alone.out, alone.out + alone.err
    res = inproc("bench", str(fp32), str(int8), "--repeats", "40", "--json", str(tmp_path / "ab.json"),
              "--markdown", str(tmp_path / "ab.md"))
    assert res.code == 0, res.out + res.err
    data = json.loads((tmp_path / "ab.json").read_text())
    ab = data["ab"]
    assert ab["ci95"][0] <= ab["ratio_b_over_a"] <= ab["ci95"][1]
    assert ab["agreement"]["ok"] and ab["agreement"]["criteria"] == {"sqnr_db": 10.0}
    for side in (data, ab["b"]):
        lat = side["latency_ms"]
        assert lat["repeats"] == 40 and lat["min"] <= lat["median"] <= lat["p90"] <= lat["p99"] and lat["cv"] >= 0
    assert "B/A latency ratio" in (tmp_path / "ab.md").read_text() and "| `op.add" in (tmp_path / "ab.md").read_text()
    strict = inproc("bench", str(fp32), str(int8), "--repeats", "5", "--sqnr-db", "80")
    assert strict.code == 1 and "outputs DIFFER" in strict.out and "SQNR" in strict.out
    recipe = bti("bench", str(int8), "--repeats", "3", "--recipe", "xnnpack-int8-static-per-channel",
                 "--runtime", f"command:{PYRUNNER} {{args}}")
    assert recipe.code == 0 and "(from recipe xnnpack-int8-static-per-channel)" in recipe.out, recipe.out + recipe.err


def test_corrupt_bundles_are_one_line_and_nothing_runs(inproc, bundles: Path, tmp_path: Path) -> None:
    bti = inproc
    good = (bundles / "programs" / "op.add.bcast_rank4_float32_static_@xnnpack.bpte").read_bytes()
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.bpte").write_bytes(good)
    (tmp_path / "in" / "b.bpte").write_bytes(good[: len(good) // 2])
    check_usage_error(bti("verify", str(tmp_path / "in"), "-o", str(tmp_path / "out")), "b.bpte", "truncated or corrupt")
    assert not (tmp_path / "out" / "results.jsonl").exists()  # refused before anything ran
    flipped = bytearray(good)
    flipped[0:4] = bytes(b ^ 0x5A for b in flipped[0:4])  # the root table offset
    (tmp_path / "flip.bpte").write_bytes(bytes(flipped))
    check_usage_error(bti("verify", str(tmp_path / "flip.bpte"), "-o", str(tmp_path / "out")), "flip.bpte")
    (tmp_path / "prog.pte").write_bytes(b"\0\0\0\0ET12" + good[8:])
    check_usage_error(bti("verify", str(tmp_path / "prog.pte")), "not a bundled program")
    check_usage_error(bti("verify", str(tmp_path / "nothing")), "no such file")


def test_bad_runtime_options_are_one_line(inproc, tmp_path: Path) -> None:
    bti = inproc
    check_usage_error(bti("run", "-s", "smoke", "--runtime", "nope"), "unknown runtime provider 'nope'")
    check_usage_error(bti("run", "-s", "smoke", "--runtime-push", "cp {local} {remote}"), "needs --runtime command")
    check_usage_error(bti("run", "-s", "smoke", "--runtime", "command:ssh board"), "needs {args}")
    check_usage_error(bti("run", "-s", "smoke", "--runtime", "command:x {args}", "--runtime-push", "cp {local}"),
                      "{local} and {remote}")
    no_runner = bti("run", "-s", "smoke", "--runtime", "runner", "-o", str(tmp_path), env={"BTI_CACHE_DIR": str(tmp_path)})
    check_usage_error(no_runner, "no runner binary", "bti runner build")


def test_a_recipe_picks_its_provider_and_bti_runner_names_the_runner(bti, tmp_path: Path) -> None:
    res = bti("run", "-s", "smoke", "-r", "portable-runner", "-k", "op.add.bcast_rank4?float32,dynamic?", "-o", str(tmp_path),
              "--no-reuse", "--no-report", env={"BTI_RUNNER": PYRUNNER})
    assert res.code == 0, res.err
    (rec,) = records(tmp_path / "results.jsonl").values()
    assert rec["status"] == "PASS" and rec["runtime"] == "runner" and rec["latency_ms"]["repeats"] == 2, rec


def test_a_runner_printing_a_malformed_result_is_that_items_failure(bti, bundles: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad_runner.sh"
    bad.write_text('#!/bin/sh\necho \'{"load_ms": "x", "latencies_ms": [1], "outputs": [5]}\'\n')
    bad.chmod(0o755)
    bpte = next((bundles / "programs").glob("*float32_static*@xnnpack.bpte"))
    res = bti("verify", str(bpte), "-o", str(tmp_path / "out"), "--runtime", f"runner:{bad}", "--no-report")
    assert res.code == 1 and "Traceback" not in res.err, res.err
    (rec,) = records(tmp_path / "out" / "results.jsonl").values()
    assert rec["status"] == "FAIL_RUN" and "result line is malformed" in rec["detail"], rec


def test_templates_and_runners_are_checked_before_any_work(inproc, tmp_path: Path) -> None:
    bti = inproc
    check_usage_error(bti("run", "-s", "smoke", "--runtime", "command:{foo} {args}"), "{foo}", "does not format")
    check_usage_error(bti("run", "-s", "smoke", "--runtime", "command:sh -c 'echo }' {args}"), "does not format")
    check_usage_error(bti("run", "-s", "smoke", "--runtime", "runner:/nonexistent/bti_runner"), "not an executable file")


def test_bad_cards_and_mismatched_ab_are_one_line(inproc, bundles: Path, tmp_path: Path) -> None:
    bti = inproc
    progs = bundles / "programs"
    bpte = progs / "op.add.bcast_rank4_float32_static_@xnnpack.bpte"
    (tmp_path / "c").mkdir()
    shutil.copy(bpte, tmp_path / "c" / "x.bpte")
    (tmp_path / "c" / "x.bpte.json").write_text('{"tolerance": {"atol": "x"}}')
    check_usage_error(bti("verify", str(tmp_path / "c"), "-o", str(tmp_path / "o")), "x.bpte.json", "atol is not a number")
    (tmp_path / "c" / "x.bpte.json").write_text('{"tolerance": {"atol": 0.1}, "axes": "zz"}')
    check_usage_error(bti("verify", str(tmp_path / "c"), "-o", str(tmp_path / "o")), "'axes' is not a dict")
    dynamic = progs / "op.add.bcast_rank4_float32_dynamic_@xnnpack.bpte"
    check_usage_error(bti("bench", str(bpte), str(dynamic)), "A and B take different inputs")
    check_usage_error(bti("bench", str(bpte), "--json", str(tmp_path / "no" / "dir" / "b.json")), "no directory")


def test_a_program_that_aborts_the_runtime_is_a_crash_not_the_end_of_bti() -> None:
    import os

    from harness.providers import ProviderCrash, ProviderError, run_forked

    assert run_forked(lambda: 41 + 1) == 42
    with pytest.raises(ProviderCrash, match="signal 6"):
        run_forked(os.abort)
    with pytest.raises(ProviderError, match="ZeroDivisionError"):
        run_forked(lambda: 1 / 0)
