"""Crash, timeout, mismatch and tolerance through a deliberately misbehaving backend (tests/fault_backend.py)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from .conftest import FIXTURES, PYTHONPATH, run_bti

pytestmark = pytest.mark.slow


def test_fault_isolation(bti, tmp_path: Path) -> None:
    recipes = ["fault-segfault", "fault-abort", "fault-sleep", "fault-spin", "fault-perturb", "fault-noise"]
    args = ["run", "-s", str(FIXTURES / "suites" / "tiny.yaml"), "-o", str(tmp_path), "--no-reuse", "--timeout", "10", "-j", "2"]
    for r in recipes:
        args += ["-r", r]
    res = bti(*args)
    assert res.code == 1, res.err  # unexpected failures
    lines = [json.loads(x) for x in (tmp_path / "results.jsonl").read_text().splitlines()]
    records = {r["id"]: r for r in lines[1:]}
    assert len(records) == len(lines) - 1 == 4 * len(recipes)  # every item exactly once
    mul = "op.mul.a[float32,static]@"
    assert records[mul + "fault-segfault"]["status"] == "CRASH"
    # no fatal line in its output, so the detail names faulthandler's innermost frame: the backend's own os.kill
    assert re.search(r"worker died with SIGSEGV \(in \S*tests/fault_backend\.py:\d+ in run\)",
                     records[mul + "fault-segfault"]["detail"])
    assert records[mul + "fault-segfault"]["error"]["signature"].endswith("tests/fault_backend.py:run")
    assert records[mul + "fault-abort"]["status"] == "CRASH"
    assert "SIGABRT" in records[mul + "fault-abort"]["detail"]
    assert records[mul + "fault-sleep"]["status"] == "TIMEOUT"
    # each TIMEOUT says what its worker did with the time: the sleeping one next to no CPU, the spinning one most of a
    # core (at least a third of one with the other worker and the machine's other processes on the same cores)
    sleep, spin = records[mul + "fault-sleep"], records[mul + "fault-spin"]
    assert spin["status"] == "TIMEOUT" and spin["load"]["worker_cores"] > 0.33 > 0.2 > sleep["load"]["worker_cores"], (
        spin["detail"], sleep["detail"])
    # a crash's and a timeout's time is recorded as any item's: what the item cost there (the zoo's costs and timeouts
    # per recipe read it, so a row that crashes late on one recipe is not held to a time shorter than its crash)
    assert sleep["duration_s"] >= 10 <= spin["duration_s"] and 0 < records[mul + "fault-segfault"]["duration_s"] < 10
    # and the stage each died in, as its worker told the pool
    assert [records[mul + f"fault-{r}"]["died_in"] for r in ("segfault", "abort", "sleep", "spin")] == ["run"] * 4
    assert records[mul + "fault-perturb"]["status"] == "FAIL_MISMATCH"
    assert records[mul + "fault-perturb"]["detail"].startswith("output[0]: max_abs 1 against fp64 exceeds atol")
    noise = records[mul + "fault-noise"]
    assert noise["status"] == "PASS" and 0 < float(noise["outputs"][0]["max_abs"]) < 1e-4
    for item_id, rec in records.items():
        if not item_id.startswith(mul):
            assert rec["status"] == "PASS", (item_id, rec.get("detail"))
            assert rec["outputs"][0]["max_abs"] == 0.0
    md = (tmp_path / "summary.md").read_text()
    assert "| CRASH | worker crashed |" in md and "| TIMEOUT | timed out |" in md


def test_a_crash_in_the_compiler_is_held_by_a_rule_naming_the_lowering_and_a_lowered_item_shows_it_stale(
        bti, tmp_path: Path) -> None:
    """The worker tells the pool each stage as it starts, so a CRASH names the stage it died in (``died_in``). A rule
    that expects a crash in the lowering holds the program whose compiler dies, and is an XPASS on the programs that
    lowered (the crash is gone there): the stale-rule scan reads those."""
    res = bti("run", "-s", str(FIXTURES / "suites" / "tiny.yaml"), "-r", "fault-segfault-lower", "-o", str(tmp_path),
              "--no-reuse", "--allow-unverified")
    assert res.code == 1, res.err  # the XPASSes
    records = {r["case"]: r for r in map(json.loads, (tmp_path / "results.jsonl").read_text().splitlines()[1:])}
    crashed = records["op.mul.a"]
    assert crashed["status"] == "XFAIL" and crashed["died_in"] == "lower" and crashed["xfail"]["status"] == "CRASH", crashed
    assert crashed["detail"].startswith("CRASH: worker died with SIGSEGV (in "), crashed["detail"]
    for case in ("op.add.a", "op.relu.a", "op.neg.a"):
        assert records[case]["status"] == "XPASS" and records[case]["xfail"]["lowered"], records[case]
        assert records[case]["detail"].startswith("expected to fail (CRASH in lower matching /SIGSEGV/: the compiler"), records[case]


CRASHY = """
import os
import signal

from harness.cases.case import Case
from harness.cases.contract import BaseCaseSource, Built


class Crashy(BaseCaseSource):
    name, description, kinds = "crashy", "a module whose build kills its process", ("crashy",)

    def discover(self):
        return [Case(id=f"model.crashy.{v}", suite=self.name, kind="crashy", spec={}, op=None, source="crashy_pkg")
                for v in ("dies", "lives")]

    def build(self, case, axes, seed):
        import torch

        if case.id.endswith("dies"):
            os.kill(os.getpid(), signal.SIGSEGV)
        x = (torch.randn(2, 4, generator=torch.Generator().manual_seed(seed)),)
        return Built(torch.nn.Linear(4, 3).eval(), x, x, None)
"""


def test_a_crash_while_the_module_is_built_names_the_export_stage(bti, tmp_path: Path) -> None:
    """The group's module is built before its first item starts (once for every recipe). A crash there is the item the
    group would have run, and its ``died_in`` is export, the stage the build is logged under; the group's other item,
    run again in a new worker, crashes the same way, and the other case is untouched."""
    site = tmp_path / "site"
    (site / "crashy_pkg").mkdir(parents=True)
    (site / "crashy_pkg" / "__init__.py").write_text(CRASHY)
    (site / "crashy_pkg-0.1.dist-info").mkdir()
    (site / "crashy_pkg-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: crashy-pkg\nVersion: 0.1\n")
    (site / "crashy_pkg-0.1.dist-info" / "entry_points.txt").write_text("[bti.case_sources]\ncrashy = crashy_pkg:Crashy\n")
    res = bti("run", "-s", "crashy", "-r", "portable", "-r", "xnnpack", "-o", str(tmp_path / "out"), "-j", "1",
              "--no-reuse", "--no-report", env={"PYTHONPATH": f"{site}{os.pathsep}{PYTHONPATH}"}, fresh=True)
    assert res.code == 1, res.err
    records = {r["id"]: r for r in map(json.loads, (tmp_path / "out" / "results.jsonl").read_text().splitlines()[1:])}
    for recipe in ("portable", "xnnpack"):
        dies, lives = records[f"model.crashy.dies[float32,static]@{recipe}"], records[f"model.crashy.lives[float32,static]@{recipe}"]
        assert dies["status"] == "CRASH" and dies["died_in"] == "export", dies
        assert re.search(r"worker died with SIGSEGV \(in \S*crashy_pkg/__init__\.py:\d+ in build\)", dies["detail"]), dies["detail"]
        assert lives["status"] == "PASS" and "died_in" not in lives, lives


def test_a_slow_row_is_judged_within_its_own_time_and_run_twice_not_five_times(bti, tmp_path: Path) -> None:
    """A zoo row declares its own time (``timeout_s``, at least 600 s; BERT-large's one call takes 14 minutes on the
    portable kernels). A program slower than ``--timeout`` passes within its case's own time, in the pool and in the
    worker's settings alike (a runtime provider gives up at 0.9 of it); an operator's, as slow, is a TIMEOUT that names
    ``--timeout``. A warm call of 10 s or more ends the timing, and the determinism check (a figure this recipe does not
    ask for) makes no fifth call: two calls, not five, and the record says why the check is missing."""
    state = tmp_path / "state"
    state.mkdir()
    res = bti("run", "-s", "zoo", "-k", "zoo.torchbench.basic_gnn_sage*", "-s", str(FIXTURES / "suites" / "tiny.yaml"),
              "-k", "op.mul.*", "-s", str(FIXTURES / "suites" / "slow.yaml"), "-k", "op.neg.own_time*", "-k", "op.neg.recipe_*", "-r", "fault-slow", "--timeout", "5",
              "--no-reuse", "--repeats", "3", "--warmup", "1", "-o", str(tmp_path / "out"), env={"BTI_FAULT_STATE": str(state)})
    records = {r["case"]: r for r in map(json.loads, (tmp_path / "out" / "results.jsonl").read_text().splitlines()[1:])}
    zoo, op, own = records["zoo.torchbench.basic_gnn_sage"], records["op.mul.a"], records["op.neg.own_time"]
    # a case's time on one recipe (``timeouts``, the zoo's per recipe: 3 x its seconds there): 60 s on fault-slow
    assert records["op.neg.recipe_time"]["status"] == "PASS", records["op.neg.recipe_time"].get("detail")
    short = records["op.neg.recipe_short"]  # 6 s there: the 10 s program ends, and the record names the recipe's time
    assert short["status"] == "TIMEOUT" and short["detail"].startswith(
        "no result within 6s (the case's timeout on this recipe, longer than --timeout): its process used "), short["detail"]
    assert zoo["status"] == "PASS", (zoo["status"], zoo.get("detail"))
    assert zoo["latency_ms"]["repeats"] == 1 and "deterministic" not in zoo["accuracy"], zoo
    assert zoo["accuracy"]["deterministic_unchecked"].startswith("not checked: a call took 10 s"), zoo["accuracy"]
    assert op["status"] == "TIMEOUT" and op["detail"].startswith("no result within --timeout 5s: its process used "), res.err
    # a suite's case may declare its own time too (``timeout_s: 7``): the 10 s program ends there, and the record says so
    assert own["status"] == "TIMEOUT" and own["detail"].startswith("no result within 7s (the case's timeout_s, longer than "
                                                                   "--timeout): its process used ")
    # and what the item had of the machine: the program sleeps, so its process used next to no CPU while it waited
    cores = len(os.sched_getaffinity(0))
    assert own["load"]["worker_cores"] < 0.5 and own["load"]["cores"] == cores and "load_5min" in own["load"]
    assert f"load average was {own['load']['load_5min']:.1f} on {cores} cores" in own["detail"]
    # each call wrote the provider's time there: the zoo row's two at 0.9 x 600 s, the operators' at 0.9 x 5, 6, 7 and 60 s
    assert sorted((state / "calls").read_text().split(), key=float) == ["4.5", "5.4", "6.3", "54", "54", "540", "540"]


def test_a_crash_names_its_cause_from_the_workers_own_output(bti, tmp_path: Path) -> None:
    """A worker killed by the runtime's own failed check: the record carries the check's words, the Python frames
    faulthandler printed and the log, and it is the backend's (the control passes); a crash that says nothing but is
    the same on every attempt is the backend's too, not the machine's."""
    res = bti("run", "-s", "smoke", "-k", "op.linear.fc*", "-k", "op.relu.*", "-r", "portable", "-r", "crash-per-channel",
              "-o", str(tmp_path / "a"), "--no-reuse", "--dtype", "float32")
    assert res.code == 1, res.err
    recs = {r["id"]: r for r in map(json.loads, (tmp_path / "a" / "results.jsonl").read_text().splitlines()[1:])}
    rec = recs["op.linear.fc[float32,static]@crash-per-channel"]
    assert rec["status"] == "CRASH" and rec["triage"] == "backend", rec
    assert "worker died with SIGABRT: [op_quantize.cpp:" in rec["detail"] and "assert failed" in rec["detail"]
    crash = rec["crash"]
    assert crash["signal"] == "SIGABRT" and Path(crash["log"]).is_file() and f"(worker log: {crash['log']})" in rec["detail"]
    assert any("harness/" in f or "executorch/" in f for f in crash["frames"]), crash  # faulthandler's frames
    assert rec["error"]["signature"].startswith("CRASH: [op_quantize.cpp:N] In function quantize_per_channel_out()")
    assert recs["op.relu.basic[float32,static]@crash-per-channel"]["status"] == "PASS"  # the rest of the group ran on
    silent = bti("run", "-s", str(FIXTURES / "suites" / "tiny.yaml"), "-k", "op.mul.*", "-r", "fault-abort", "-o",
                 str(tmp_path / "b"), "--no-reuse", "--rerun-failures", "1")
    assert silent.code == 1, silent.err
    abort = [json.loads(x) for x in (tmp_path / "b" / "results.jsonl").read_text().splitlines()[1:]][-1]  # the settled one
    assert abort["status"] == "CRASH" and abort["crash"]["cause"] == "" and len(abort["attempts"]) == 2
    assert abort["triage"] == "backend" and abort["detail"].endswith("(the same crash on all 2 attempts)"), abort


def test_a_run_forked_from_the_tests_warm_process_is_what_a_new_interpreter_gives(tmp_path: Path) -> None:
    """tests/zygote.py forks `run_bti`'s calls from a process that imported torch once: the same run (a pass, a
    mismatch, a segfault in a worker, an abort) and a bad argument give the same exit code, stdout, stderr and records
    as in a new interpreter."""
    args = ["run", "-s", str(FIXTURES / "suites" / "tiny.yaml"), "-r", "portable", "-r", "fault-perturb", "-r", "fault-segfault",
            "-r", "fault-abort", "--no-reuse", "--no-report", "--timeout", "60", "-j", "2"]
    warm, fresh = run_bti(*args, "-o", str(tmp_path / "w")), run_bti(*args, "-o", str(tmp_path / "f"), fresh=True)
    assert warm.code == fresh.code == 1
    assert (warm.out, warm.err.replace(str(tmp_path / "w"), "OUT")) == (fresh.out, fresh.err.replace(str(tmp_path / "f"), "OUT"))

    def seen(out: Path) -> list[tuple[str, str]]:
        recs = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()[1:]]
        return sorted((r["id"], r["status"]) for r in recs)

    assert seen(tmp_path / "w") == seen(tmp_path / "f") and {s for _, s in seen(tmp_path / "w")} >= {"PASS", "CRASH"}
    bad = [run_bti("run", "-s", "nosuch", fresh=f) for f in (False, True)]
    assert bad[0].code == bad[1].code == 2 and bad[0].err == bad[1].err and bad[0].err.count("\n") == 1


def test_a_pythonpath_that_only_adds_modules_runs_warm(tmp_path: Path) -> None:
    """A call's own PYTHONPATH (the docs' installed examples) runs warm where it only adds modules: one that could
    shadow a module the warm process imported, or any other variable its imports read, gets a new interpreter."""
    from .zygote import Zygote

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    zygote = Zygote(PYTHONPATH, plain_env=env)  # never started: usable() only compares environments
    site = tmp_path / "site"
    (site / "bti_example_new").mkdir(parents=True)
    (site / "bti_example_new" / "__init__.py").touch()
    (site / "bti_example_new-0.1.dist-info").mkdir()
    assert zygote.usable(env) and zygote.usable({**env, "PYTHONPATH": str(site)})
    assert not zygote.usable({**env, "PYTHONPATH": str(site), "TORCH_LOGS": "+dynamo"})
    assert not zygote.usable({**env, "PYTHONPATH": str(tmp_path / "missing")})
    (site / "yaml.py").touch()  # would shadow an installed module
    assert not zygote.usable({**env, "PYTHONPATH": str(site)})
