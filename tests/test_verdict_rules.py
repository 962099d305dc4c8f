"""The one status decision (harness/verdict.py) and the recipe rules it reads, torch-free and fast:
xfail rules that name their failure, suite-scoped rules, expected delegation, capabilities, triage,
attempts that disagree, the cache key and recipe validation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from harness.cases.case import Axes, Case, Item
from harness.errors import RecipeError
from harness.recipes import parse_recipe
from harness.status import Stage, Status
from harness.verdict import Comparison, ErrorInfo, Outcome, StageOutcome, decide, lowest_sqnr_db, settle_attempts, triage

from .conftest import TESTS, bad_recipe

OP_SPEC = {"args": [{"tensor": {"shape": ["N", "C", "H", "W"]}}]}


def recipe(tmp_path: Path, text: str, name: str = "r"):
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\nbackend: executorch\n" + text)
    return parse_recipe(path)


def item(case_id: str = "op.conv2d.basic", suite: str = "ops", dtype: str = "float32", shape: str = "static",
         recipe_name: str = "r", spec: dict | None = None) -> Item:
    case = Case(case_id, suite, "op", spec=spec if spec is not None else OP_SPEC, dtypes=(dtype,), shapes=(shape,))
    return Item(case, recipe_name, Axes(dtype, shape))


def failed(stage: Stage, message: str) -> Outcome:
    return Outcome(stages=(StageOutcome(Stage.EXPORT, 0.1), StageOutcome(stage, 0.2, error=ErrorInfo("E", message))))


PASSED = Outcome(stages=(StageOutcome(Stage.EXPORT, 0.1), StageOutcome(Stage.RUN, 0.1)),
                 comparison=Comparison(True, "", (), {}))


# ------------------------------------------------------------------------------------------------- xfail rules
XFAIL = """xfail:
  - {match: "op.conv2d.*", status: FAIL_LOWER, message: "IndexError|tuple index", reason: "partitioner bug #1"}
"""


def test_a_lowered_item_under_a_rule_that_expects_a_failure_before_the_run_is_an_xpass(tmp_path: Path) -> None:
    """A lowered-only recipe (Ethos-U without its FVP) never runs the program, but it did export, quantize, lower and
    serialize: a rule that expects one of those to fail no longer holds there, and says so (FNet's `_fft_c2c` rule held
    on every ExecuTorch recipe but lowered on Ethos-U and VGF, whose recipes turn IR validity off, silently). A rule
    that expects the run or the comparison to fail says nothing about an item that did not run."""
    lowered = Outcome(stages=(StageOutcome(Stage.EXPORT, 0.1), StageOutcome(Stage.LOWER, 0.1)), lowered="no FVP here")
    stale = decide(item(), recipe(tmp_path, XFAIL), lowered, "run")
    assert stale["status"] == "XPASS" and stale["xfail"]["expects"] == "FAIL_LOWER matching /IndexError|tuple index/"
    assert stale["detail"].startswith("expected to fail (FAIL_LOWER matching /IndexError|tuple index/: partitioner bug #1)"
                                      " but lowered and serialized; not run here: no FVP here"), stale["detail"]
    # the program never ran: its XPASS is not cached (the item runs where its runtime appears, as a LOWERED item does),
    # and opdiff's table, where XPASS means it ran and was compared, has it as never run
    from harness.opdiff.report import opdiff_status
    from harness.runner.cache import ResultCache

    cache = ResultCache(tmp_path / "cache", {})
    cache.put(recipe(tmp_path, XFAIL), stale)
    assert not list((tmp_path / "cache").rglob("*.json")) and opdiff_status(stale) == "SKIPPED"
    ran = decide(item(), recipe(tmp_path, "xfail:\n  - {match: 'op.conv2d.*', status: FAIL_LOWER, reason: r}\n"), PASSED, "run")
    cache.put(recipe(tmp_path, XFAIL), ran)  # an XPASS that ran is cached as before, and is OK to opdiff
    assert ran["status"] == "XPASS" and len(list((tmp_path / "cache").rglob("*.json"))) == 1 and opdiff_status(ran) == "OK"
    delegation = decide(item(), recipe(tmp_path, "xfail:\n  - {match: 'op.conv2d.*', status: FAIL_DELEGATION, reason: r}\n"),
                        lowered, "run")
    assert delegation["status"] == "XPASS"  # its partition was checked before it was found not runnable here
    for expects in ("FAIL_RUN", "FAIL_MISMATCH", "[FAIL_LOWER, FAIL_RUN]", "FAIL_LOAD"):
        rules = f'xfail:\n  - {{match: "op.conv2d.*", status: {expects}, reason: "after the run"}}\n'
        rec = decide(item(), recipe(tmp_path, rules), lowered, "run")
        assert rec["status"] == "LOWERED" and "xfail" not in rec, (expects, rec)
    assert decide(item(), recipe(tmp_path, ""), lowered, "run")["status"] == "LOWERED"


def test_a_crash_rule_that_names_its_stage_holds_only_there_and_goes_stale_where_the_item_lowers(tmp_path: Path) -> None:
    """A crash in the compiler (Vela's stack overflow) and a crash in the runtime are two failures. A rule with
    ``stage: lower`` holds a CRASH whose worker was in the lowering (the pool's ``died_in``) and not one in the run; and
    a LOWERED item has passed the lowering, so under that rule it is an XPASS: the crash is gone (the stale-rule scan
    sees it). A CRASH rule without a stage says nothing of a LOWERED item, as before: its crash may be the run's."""
    rules = """xfail:
  - {match: "op.conv2d.*", status: CRASH, stage: lower, message: "SIGSEGV", reason: "the compiler overflows its stack"}
"""
    crash = Outcome(fixed=Status.CRASH, fixed_detail="worker died with SIGSEGV (in vela.py:137 in process_regor)",
                    died_in=Stage.LOWER)
    held = decide(item(), recipe(tmp_path, rules), crash, "run")
    assert held["status"] == "XFAIL" and held["died_in"] == "lower" and held["xfail"]["expects"] == (
        "CRASH in lower matching /SIGSEGV/"), held
    in_run = decide(item(), recipe(tmp_path, rules), dataclasses.replace(crash, died_in=Stage.RUN), "run")
    assert in_run["status"] == "CRASH" and "[unexpected: the xfail rule expects CRASH in lower" in in_run["detail"]
    unknown = decide(item(), recipe(tmp_path, rules), dataclasses.replace(crash, died_in=None), "run")
    assert unknown["status"] == "CRASH" and "died_in" not in unknown  # a record that does not say where: not held
    lowered = Outcome(stages=(StageOutcome(Stage.EXPORT, 0.1), StageOutcome(Stage.LOWER, 0.1)), lowered="no FVP here")
    stale = decide(item(), recipe(tmp_path, rules), lowered, "run")
    assert stale["status"] == "XPASS" and stale["xfail"]["lowered"] == "no FVP here", stale
    for stageless in ("CRASH", "[CRASH, FAIL_LOWER]"):
        plain = f'xfail:\n  - {{match: "op.conv2d.*", status: {stageless}, reason: "r"}}\n'
        assert decide(item(), recipe(tmp_path, plain), lowered, "run")["status"] == "LOWERED"
        assert decide(item(), recipe(tmp_path, plain), dataclasses.replace(crash, died_in=Stage.RUN), "run")["status"] == "XFAIL"
    in_run_rule = rules.replace("stage: lower", "stage: run")
    assert decide(item(), recipe(tmp_path, in_run_rule), lowered, "run")["status"] == "LOWERED"  # the run never came
    # a runtime provider's runner that died: the stage it died in is the stage that failed
    provider = Outcome(stages=(StageOutcome(Stage.EXPORT, 0.1), StageOutcome(Stage.RUN, 0.2, error=ErrorInfo(
        "RunnerDied", "the runner died with SIGSEGV", status=Status.CRASH))))
    assert decide(item(), recipe(tmp_path, in_run_rule.replace('message: "SIGSEGV", ', "")), provider, "run")["status"] == "XFAIL"


@pytest.mark.parametrize(("rule", "message"), [
    ("{match: x, status: CRASH, stage: compile, reason: r}",
     "xfail `stage:` is one of export, quantize, lower, serialize, load, run, compare, not 'compile'"),
    ("{match: x, status: CRASH, stage: Lower, reason: r}", "xfail `stage:` is one of export"),
    ("{match: x, status: CRASH, stage: [lower], reason: r}", "xfail `stage:` is one of export"),
    ("{match: x, status: FAIL_LOWER, stage: lower, reason: r}", "xfail `stage:` narrows a CRASH or TIMEOUT"),
    ("{match: x, status: [CRASH, FAIL_RUN], stage: run, reason: r}", "xfail `stage:` narrows a CRASH or TIMEOUT"),
])
def test_a_bad_xfail_stage_is_one_line_and_exit_2(inproc, tmp_path: Path, rule: str, message: str) -> None:
    bad_recipe(inproc, tmp_path, f"xfail:\n  - {rule}", message)


def test_xfail_holds_only_the_named_failure(tmp_path: Path) -> None:
    r = recipe(tmp_path, XFAIL)
    rec = decide(item(), r, failed(Stage.LOWER, "tuple index out of range"), "run")
    assert rec["status"] == "XFAIL" and rec["xfail"]["status"] == "FAIL_LOWER" and "partitioner bug #1" in rec["detail"]
    # the same item failing another way is a failure, with the xfail reason beside it
    crash = decide(item(), r, Outcome(fixed=Status.CRASH, fixed_detail="worker died with SIGSEGV"), "run")
    assert crash["status"] == "CRASH" and "[unexpected: the xfail rule expects FAIL_LOWER" in crash["detail"]
    assert "partitioner bug #1" in crash["detail"] and crash["triage"] == "infra"
    timeout = decide(item(), r, Outcome(fixed=Status.TIMEOUT, fixed_detail="no result"), "run")
    assert timeout["status"] == "TIMEOUT"
    other_stage = decide(item(), r, failed(Stage.RUN, "tuple index out of range"), "run")
    assert other_stage["status"] == "FAIL_RUN"
    other_message = decide(item(), r, failed(Stage.LOWER, "KeyError: 'weight'"), "run")
    assert other_message["status"] == "FAIL_LOWER" and "unexpected" in other_message["detail"]
    passed = decide(item(), r, PASSED, "run")
    assert passed["status"] == "XPASS" and passed["xfail"]["reason"] == "partitioner bug #1"
    assert Status(passed["status"]).is_failure


def test_a_mismatch_rule_with_a_floor_holds_only_a_departure_no_worse_than_it(inproc, tmp_path: Path) -> None:
    """`min_sqnr_db`: the rule holds a FAIL_MISMATCH whose outputs are each at least that far (in dB) from their
    reference, the quantized program's figure where there is one; a worse one, or one with no figure (a shape), stays
    a failure that names the rule's floor."""
    rules = ('quantize: {quantizer: xnnpack, per_channel: false, dynamic: false}\n'
             'xfail:\n  - {match: "op.conv2d.*", status: FAIL_MISMATCH, message: "against the quantized program", '
             'min_sqnr_db: 5, reason: "saturation"}\n')
    r = recipe(tmp_path, rules)
    assert r.quantized

    def mismatch(*outputs: dict) -> Outcome:
        return Outcome(stages=(StageOutcome(Stage.EXPORT, 0.1), StageOutcome(Stage.RUN, 0.1)), comparison=Comparison(
            False, "output[0]: a systematic error against the quantized program", tuple(outputs), {}))

    near = mismatch({"sqnr_db": 30.0, "quantized": {"sqnr_db": 11.8}}, {"sqnr_db": 2.0, "quantized": {"sqnr_db": 40.0}})
    assert decide(item(), r, near, "run")["status"] == "XFAIL"  # the program's figure counts, not fp32's
    far = decide(item(), r, mismatch({"sqnr_db": 30.0, "quantized": {"sqnr_db": 4.9}}), "run")
    assert far["status"] == "FAIL_MISMATCH" and "at 5 dB SQNR or better" in far["detail"], far["detail"]
    assert decide(item(), r, mismatch({"sqnr_db": 40.0}), "run")["status"] == "FAIL_MISMATCH"  # against fp32 alone
    float_rules = rules.split("\n", 1)[1]
    assert decide(item(), recipe(tmp_path, float_rules), mismatch({"sqnr_db": 4.0}), "run")["status"] == "FAIL_MISMATCH"
    assert decide(item(), recipe(tmp_path, float_rules), mismatch({"sqnr_db": 6.0}), "run")["status"] == "XFAIL"
    assert decide(item(), r, mismatch({"shape": [2]}), "run")["status"] == "FAIL_MISMATCH"  # nothing measured to bound
    assert decide(item(), r, mismatch({"sqnr_db": 9.0, "quantized": {}}), "run")["status"] == "FAIL_MISMATCH"  # exact
    # a record's figures as results.jsonl writes them: the non-finite ones as strings
    assert lowest_sqnr_db([{"sqnr_db": "inf"}, {"sqnr_db": 7.5}]) == 7.5
    assert lowest_sqnr_db([{"quantized": {"sqnr_db": "-inf"}}], quantized=True) == float("-inf")
    assert lowest_sqnr_db([{"quantized": {"sqnr_db": "nan"}}], quantized=True) is None
    # under a quantized recipe only the program's figure counts: an output judged against fp32 alone has none
    assert lowest_sqnr_db([{"sqnr_db": 30.0}], quantized=True) is None
    # a further input set's failure: set 0's figures say nothing of it
    assert lowest_sqnr_db([{"sqnr_db": 40.0}], message="output[0]: x; input set 1: output[0]: SQNR 3 dB") is None
    assert decide(item(), recipe(tmp_path, rules.replace("min_sqnr_db: 5, ", "")), mismatch({"sqnr_db": -20.0}),
                  "run")["status"] == "XFAIL"  # without a floor, any distance
    bad_recipe(inproc, tmp_path, rules.replace("FAIL_MISMATCH", "FAIL_LOWER"), "xfail `min_sqnr_db:` bounds a FAIL_MISMATCH")


def test_the_cases_own_failure_is_not_called_unexpected_by_a_rule_it_never_reached(tmp_path: Path) -> None:
    """A case that fails in eager (its module or reference, before torch.export) never reached the recipe: a rule
    naming a later stage is not contradicted, and the detail says whose failure it is. A recipe rule that names this
    very failure still holds it, and one that names its stage with another message still calls it unexpected."""
    r = recipe(tmp_path, XFAIL)
    own = Outcome(stages=(StageOutcome(Stage.EXPORT, 0.1, error=ErrorInfo("NotImplementedError", "no Half kernel"),
                                       own=True),))
    rec = decide(item(), r, own, "run")
    assert rec["status"] == "FAIL_EXPORT" and "xfail" not in rec
    assert "unexpected" not in rec["detail"] and "the case's own" in rec["detail"]
    # torch.export's own failure is not the case's: the rule's word stays
    exported = decide(item(), r, Outcome(stages=(StageOutcome(Stage.EXPORT, 0.1, error=ErrorInfo("E", "guard")),)), "run")
    assert exported["status"] == "FAIL_EXPORT" and "[unexpected: the xfail rule expects FAIL_LOWER" in exported["detail"]
    held = recipe(tmp_path, """xfail:
  - {match: "op.conv2d.*", status: FAIL_EXPORT, message: "no Half", reason: "eager has no kernel"}
""", name="h")
    assert decide(item(recipe_name="h"), held, own, "run")["status"] == "XFAIL"
    stale = recipe(tmp_path, """xfail:
  - {match: "op.conv2d.*", status: FAIL_EXPORT, message: "some other words", reason: "eager has no kernel"}
""", name="s")
    rec = decide(item(recipe_name="s"), stale, own, "run")
    assert rec["status"] == "FAIL_EXPORT" and "[unexpected: the xfail rule expects FAIL_EXPORT" in rec["detail"]


def test_xfail_status_list_and_suite_scope(tmp_path: Path) -> None:
    r = recipe(tmp_path, """xfail:
  - {match: "op.conv2d.*", suite: ops, status: [FAIL_LOWER, FAIL_MISMATCH], reason: "two ways"}
""")
    mismatch = Outcome(stages=(StageOutcome(Stage.RUN, 0.1),), comparison=Comparison(False, "max_abs 1", (), {}))
    assert decide(item(), r, mismatch, "run")["status"] == "XFAIL"
    assert decide(item(), r, failed(Stage.LOWER, "x"), "run")["status"] == "XFAIL"
    # the same id from another suite (an adapter) is not listed: it passes, and is no XPASS
    assert decide(item(suite="executorch-upstream-ops"), r, PASSED, "run")["status"] == "PASS"


def test_a_rule_limited_to_a_machine_fact_holds_only_where_the_fact_has_that_value(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """``when:`` (harness.facts): OpenVINO's bf16 arithmetic is expected where its CPU default is bf16; on a CPU whose
    default is f32 the same item is judged plainly (its pass is a PASS, not an XPASS)."""
    import harness.facts
    from harness.runner.cache import ResultCache

    r = recipe(tmp_path, """xfail:
  - {match: "op.conv2d.*", status: FAIL_MISMATCH, reason: "bf16 here", when: {openvino-cpu-precision: [bf16, f16]}}
""")
    mismatch = Outcome(stages=(StageOutcome(Stage.RUN, 0.1),), comparison=Comparison(False, "max_abs 0.03", (), {}))
    keys = set()
    for value, on_mismatch, on_pass in (("bf16", "XFAIL", "XPASS"), ("f16", "XFAIL", "XPASS"), ("f32", "FAIL_MISMATCH", "PASS"),
                                        (None, "FAIL_MISMATCH", "PASS")):  # None: openvino absent, the fact unknown
        monkeypatch.setattr(harness.facts, "fact", lambda name, v=value: v)
        assert decide(item(), r, mismatch, "run")["status"] == on_mismatch, value
        assert decide(item(), r, PASSED, "run")["status"] == on_pass, value
        keys.add(ResultCache(tmp_path, {}).key("spec", item().id, r, 0))
    assert len(keys) == 4  # a cached result is reused only on a machine whose facts are the same


def test_a_zoo_rule_s_machine_fact_is_in_the_record_and_the_cache_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The zoo's rules name facts the recipe's do not (TorchBench's MobileNetV3-large on `openvino-int8`, its program
    under the floor where torch's oneDNN runs AMX): the record keeps them as they were, and a cache shared with a
    machine of another kind misses."""
    import harness.facts
    from harness.recipes import load_recipe
    from harness.runner.cache import ResultCache
    from harness.suites import load_suites

    case = next(c for c in load_suites(["zoo"]) if c.id == "zoo.torchbench.mobilenet_v3_large")
    zoo_item, ov = Item(case, "openvino-int8", Axes("float32", "static")), load_recipe("openvino-int8")
    assert "torch-onednn-isa" not in ov.facts()  # the recipe's own rules do not name it: only the zoo's
    mismatch = Outcome(stages=(StageOutcome(Stage.RUN, 0.1),), comparison=Comparison(False, "max_abs 0.03", (), {}))
    cache = ResultCache(tmp_path / "cache", {})
    monkeypatch.setattr(harness.facts, "fact", lambda name: "amx" if name == "torch-onednn-isa" else "f32")
    rec = decide(zoo_item, ov, mismatch, "run")
    assert rec["facts"]["torch-onednn-isa"] == "amx"
    cache.put(ov, rec)
    assert cache.get(zoo_item, ov) == rec  # the same kind of machine: reused
    monkeypatch.setattr(harness.facts, "fact", lambda name: "avx2" if name == "torch-onednn-isa" else "f32")
    assert cache.get(zoo_item, ov) is None  # another kind (the recipe's own facts the same): run again
    assert "facts" not in decide(item(recipe_name="openvino-int8"), ov, mismatch, "run")  # an operator: no source rules


def test_a_machine_fact_is_asked_once_per_machine_and_library_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Asking imports the library (most of a second per `bti run`): the answer is kept on disk, keyed by the library's
    version and the CPU, so the next process reads it, and a new version asks again."""
    import harness.facts
    import harness.versions

    asked: list[str] = []
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(harness.facts, "_ask", lambda name: asked.append(name) or "bf16")
    version = {"openvino": "2025.4.1"}
    monkeypatch.setattr(harness.versions, "installed_version", lambda package: version.get(package))
    for expected_asks in (1, 1):  # a second process (the per-process cache cleared) reads the file
        harness.facts.fact.cache_clear()
        assert harness.facts.fact("openvino-cpu-precision") == "bf16" and len(asked) == expected_asks
    version["openvino"] = "2026.0.0"
    harness.facts.fact.cache_clear()
    assert harness.facts.fact("openvino-cpu-precision") == "bf16" and len(asked) == 2
    version.clear()  # not installed: unknown, nothing asked
    harness.facts.fact.cache_clear()
    assert harness.facts.fact("openvino-cpu-precision") is None and len(asked) == 2
    # ONEDNN_MAX_CPU_ISA caps oneDNN's kernels: the fact is asked again under another value, and the others keep theirs
    version["torch"] = "2.14.1"
    for env, expected_asks in ((None, 3), ("AVX2", 4), ("AVX2", 4), (None, 4)):
        if env:
            monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", env)
        else:
            monkeypatch.delenv("ONEDNN_MAX_CPU_ISA", raising=False)
        harness.facts.fact.cache_clear()
        harness.facts.fact("torch-onednn-isa")
        assert len(asked) == expected_asks, env
    # a fact whose question changes (a fix to its code) is asked again, not served the old question's answer
    monkeypatch.setitem(harness.facts.FACTS, "torch-onednn-isa",
                        dataclasses.replace(harness.facts.FACTS["torch-onednn-isa"], code="print('avx2')"))
    harness.facts.fact.cache_clear()
    harness.facts.fact("torch-onednn-isa")
    assert len(asked) == 5
    harness.facts.fact.cache_clear()


def test_openvino_says_its_cpu_precision_and_the_bf16_rules_name_it() -> None:
    """The fact is asked of OpenVINO itself, and every OpenVINO rule whose reason is bfloat16 arithmetic carries it."""
    pytest.importorskip("openvino")
    import openvino as ov

    from harness.facts import fact
    from harness.recipes import load_recipe
    from harness.suites.zoo import _expected

    assert fact("openvino-cpu-precision") == ov.Core().get_property("CPU", "INFERENCE_PRECISION_HINT").get_type_name()
    zoo_rules = [rule for recipes, _, _, rule in _expected() if "openvino" in recipes and rule.statuses == {Status.FAIL_MISMATCH}]
    assert len(zoo_rules) >= 40 and all(rule.when == (("openvino-cpu-precision", ("bf16",)),) for rule in zoo_rules)
    for name in ("openvino", "openvino-int8"):
        tagged = [rule for rule in load_recipe(name).xfail if dict(rule.when).get("openvino-cpu-precision")]
        assert len(tagged) >= 4 and all("bfloat16" in rule.reason or "bf16" in rule.reason for rule in tagged)
        # the int8 saturation of CPUs without VNNI is the other kind of machine (cpu-vnni)
        vnni = [rule for rule in load_recipe(name).xfail if dict(rule.when).get("cpu-vnni")]
        assert all(dict(rule.when) == {"cpu-vnni": ("absent",)} and "VNNI" in rule.reason for rule in vnni)
        # the int8 recipe's matrix product and convolution, alone and in the models on four suites; none on fp32
        assert sorted({rule.suite for rule in vnni}) == (["hf-models", "models", "ops", "tv-models"] if name == "openvino-int8" else [])
        assert {"op.linear.module[[]float32,static]", "op.conv2d.nn_conv[[]float32,static]"} <= {rule.match for rule in vnni} or not vnni
        # what the run's header records of the machine, beside the recipe (recipe_info)
        assert load_recipe(name).facts() == {"openvino-cpu-precision": fact("openvino-cpu-precision"),
                                             "openvino-cpu-isa": fact("openvino-cpu-isa"),  # eos_pool's, per CPU
                                             **({"cpu-vnni": fact("cpu-vnni")} if vnni else {})}


def test_the_machine_rules_hold_on_the_machines_they_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """The rules a machine of another kind showed to hold on one kind only: each holds exactly where its fact says so
    (here with the facts given, not this machine's), and a recipe's header records the facts its rules name."""
    import harness.facts
    from harness.recipes import load_recipe

    machine: dict[str, str | None] = {}
    monkeypatch.setattr(harness.facts, "fact", lambda name: machine.get(name))

    def listed(recipe: str, key: str, **facts: str | None) -> list[str]:
        machine.clear()
        machine.update({k.replace("_", "-"): v for k, v in facts.items()})
        return [rule.reason for rule in load_recipe(recipe).xfail_rules(key, "core-ops", True)]

    log = "op.log.default.nan_inf[float32,static]"
    for recipe in ("xnnpack", "xnnpack-int8-static-per-tensor", "xnnpack-int8-dynamic-per-channel"):
        assert [("AVX-512" in r, "88.78" in r) for r in listed(recipe, log, cpu_avx512="present")] == [(True, False)]
        assert [("AVX-512" in r, "88.78" in r) for r in listed(recipe, log, cpu_avx512="absent")] == [(True, True)]
        assert listed(recipe, log, cpu_avx512="n/a") == listed(recipe, log, cpu_avx512=None) == []
    gelu = "op.gelu.default.nan_inf[float32,static]"
    for recipe in ("portable", "xnnpack", "xnnpack-int8-static-per-channel", "onnxruntime", "torch-compile", "arm-tosa-fp",
                   "arm-vgf-fp", "vulkan"):
        assert len(listed(recipe, gelu, torch_onednn_isa="avx512")) == 1, recipe
        assert listed(recipe, gelu, torch_onednn_isa="avx2") == listed(recipe, gelu, torch_onednn_isa=None) == [], recipe
    conv = "op.convolution_backward.default.base[float16,static]"
    assert len(listed("portable", conv, torch_fp16_convolution="onednn")) == 1
    assert listed("portable", conv, torch_fp16_convolution="aten") == []
    for key in ("op.gt.Scalar.nan_inf[float32,static]", "op.convolution.default.nan_inf[float32,static]"):
        assert len(listed("openvino", key, openvino_cpu_precision="bf16")) == 1, key
        assert listed("openvino", key, openvino_cpu_precision="f32") == [], key
    assert len(listed("openvino", "op.logical_not.default.nan_inf[float32,static]", openvino_cpu_precision="f32")) == 1
    # what the run's header records of the machine, beside the recipe: XNNPACK's kernels' ISA and eager's (the reference's)
    machine.clear()
    assert set(load_recipe("xnnpack").facts()) == {"cpu-avx512", "torch-onednn-isa", "torch-fp16-convolution"}
    assert set(load_recipe("portable").facts()) == {"torch-onednn-isa", "torch-fp16-convolution"}
    assert load_recipe("torch-cpu").facts() == {}


def _rules_file(tmp_path: Path, name: str, text: str) -> Path:
    (tmp_path / "rules").mkdir(exist_ok=True)
    path = tmp_path / "rules" / f"{name}.yaml"
    path.write_text(text)
    return path


SHARED = """description: one triage, several recipes
xfail:
  - {match: "op.conv2d.*", status: FAIL_RUN, reason: "shared kernel bug"}
  - {match: "op.relu.*", status: FAIL_LOAD, reason: "shared missing kernel"}
skip:
  - {match: "op.big.*", reason: "shared: too big"}
"""


def test_openvinos_dynamic_catch_all_holds_shape_failures_only() -> None:
    """`openvino-delegate.yaml`'s `*,dynamic]` holds any dynamic item on both OpenVINO recipes: only while every output
    that fails, fails on shape (the delegate's upper-bound outputs). A value mismatch beside them is another bug."""
    from harness.recipes import load_recipe

    key = "op.split.Tensor.base[float32,dynamic]"
    for name in ("openvino", "openvino-int8"):
        rule = next(r for r in load_recipe(name).xfail_rules(key, "core-ops", True) if "upper bound" in r.reason)
        shapes = "output[0]: shape [8, 3] != reference [3, 3]; output[1]: shape [8, 3] != reference [3, 3]"
        assert rule.expects(Status.FAIL_MISMATCH, shapes)
        assert rule.expects(Status.FAIL_MISMATCH, "output[0]: shape [8, 4, 4] != reference [3, 4, 4]")
        for other in ("output[0]: shape [8, 3] != reference [3, 3]; output[1]: max_abs 0.5 against fp64 exceeds atol",
                      "output[0]: max_abs 0.5 against fp64 exceeds atol 0.02",
                      "output[0]: NaN where the reference has none (1/9 elements)"):
            assert not rule.expects(Status.FAIL_MISMATCH, other), other


def test_include_splices_a_rules_file_in_place(tmp_path: Path) -> None:
    _rules_file(tmp_path, "shared", SHARED)
    r = recipe(tmp_path, """xfail:
  - {match: "op.conv2d.basic*", status: FAIL_LOWER, reason: "own, first"}
  - include: shared
  - {match: "op.conv2d.*", status: FAIL_MISMATCH, reason: "own, last"}
skip: [{include: shared}]
""")
    assert [x.reason for x in r.xfail] == ["own, first", "shared kernel bug", "shared missing kernel", "own, last"]
    assert [x.reason for x in r.skip] == ["shared: too big"]
    # in file order: the shared rule holds its failure, and an XPASS names the recipe's own first rule
    assert decide(item(), r, failed(Stage.RUN, "0x12"), "run")["xfail"]["reason"] == "shared kernel bug"
    assert "(FAIL_LOWER: own, first)" in decide(item(), r, PASSED, "run")["detail"]
    assert r.skip_reason(item("op.big.x")) == "shared: too big"
    # the hash is the recipe's with its include written out: the cache follows the shared file's content
    inline = recipe(tmp_path, """xfail:
  - {match: "op.conv2d.basic*", status: FAIL_LOWER, reason: "own, first"}
  - {match: "op.conv2d.*", status: FAIL_RUN, reason: "shared kernel bug"}
  - {match: "op.relu.*", status: FAIL_LOAD, reason: "shared missing kernel"}
  - {match: "op.conv2d.*", status: FAIL_MISMATCH, reason: "own, last"}
skip:
  - {match: "op.big.*", reason: "shared: too big"}
""", name="r")
    assert inline.hash == r.hash
    # the recipe excepts its own items from every included rule
    excepted = recipe(tmp_path, 'xfail: [{include: shared, unless: ["op.relu.x*"]}]')
    assert not excepted.xfail_rules("op.relu.x[float32,static]") and excepted.xfail_rules("op.relu.y[float32,static]")
    assert excepted.xfail[1].unless == ("op.relu.x*",)
    before = recipe(tmp_path, "xfail: [{include: shared}]").hash
    _rules_file(tmp_path, "shared", SHARED.replace("shared kernel bug", "the kernel bug, traced"))
    after = recipe(tmp_path, "xfail: [{include: shared}]")
    assert after.xfail[0].reason == "the kernel bug, traced" and after.hash != before


def test_shipped_recipes_include_shared_rules() -> None:
    """bti's own recipes share the portable kernels' triage through one rules file, which a vendor's recipe can name."""
    from harness.recipes import available_rules_files, load_recipe

    assert "executorch-portable" in available_rules_files()
    rules = [load_recipe(n).xfail for n in ("portable", "xnnpack", "xnnpack-int8-dynamic-per-channel")]
    shared = {x.match for x in rules[0]} & {x.match for x in rules[1]} & {x.match for x in rules[2]}
    assert {"op.sym_*", "op.am[ai][xn].default.empty[[]*"} <= shared
    # every shipped rules file is included by a shipped recipe and listed in docs/recipes.md's table
    from harness.cases.yamlload import load_yaml
    from harness.recipes import available_recipe_files

    included = {e["include"] for f in available_recipe_files().values() for k in ("skip", "xfail", "expect")
                for e in (load_yaml(f).get(k) or ()) if isinstance(e, dict) and "include" in e}
    table = (TESTS.parent / "docs" / "recipes.md").read_text()
    for name in available_rules_files():
        assert name in included, f"rules/{name}.yaml is included by no recipe"
        assert f"| `{name}` |" in table, f"docs/recipes.md does not list rules/{name}.yaml"


def test_every_shipped_expected_failure_names_its_owner_and_versions() -> None:
    """Each failure the shipped recipes and the zoo expect names who owns it (`Owner: X`, as `bti report --upstream-bugs`
    reads it): a backend, runtime, quantizer or library for a bug; the case or bti for ours; `none, …` for a limit of a
    scheme that is no one's bug, which the report leaves out as it leaves out ours. Each is limited with `versions:` to
    the releases it was triaged on, so a new release's failures show until someone triages them. And each names its
    `message:`, so another failure of the same status is not held."""
    import yaml

    from harness.recipes import available_recipe_files, available_rules_files
    from harness.report.upstream import _OWNER, wanted

    files = [*available_recipe_files().values(), *available_rules_files().values(),
             TESTS.parent / "harness" / "suites" / "zoo_expected.yaml"]
    unowned, unversioned, silent, reasons = [], [], [], set()
    for path in files:
        stack = [yaml.safe_load(Path(path).read_text())]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                if "reason" in node and "status" in node:
                    reasons.add(str(node["reason"]))
                    if not _OWNER.search(str(node["reason"])):
                        unowned.append(f"{Path(path).name}: {node.get('match')}")
                    if not node.get("versions"):
                        unversioned.append(f"{Path(path).name}: {node.get('match')}")
                    if not node.get("message"):
                        silent.append(f"{Path(path).name}: {node.get('match')}")
                stack.extend(node.values())
            elif isinstance(node, list):
                stack.extend(node)
    assert len(reasons) > 300 and not unowned, unowned
    assert not unversioned, unversioned
    # a rule with no `message:` would hold any failure of its status: each names the message its items gave on both pairs
    assert not silent, silent
    def xfail(reason: str) -> dict:
        return {"status": "XFAIL", "xfail": {"reason": reason}}
    assert not wanted(xfail("ties. Owner: none, int8 rounding makes them; found by bti"))  # no one's bug
    assert not wanted(xfail("Owner: the case (its random weights); found by bti"))
    assert wanted(xfail("XNNPACK's exp gives 0 for NaN. Owner: XNNPACK (its exp kernel); found by bti"))


@pytest.mark.parametrize(("text", "rules", "needle", "at"), [
    ("xfail: [{include: nothere}]", None, "no rules file 'nothere'", "recipe"),
    ("xfail: [{include: ../evil}]", None, "`- include: NAME` names a rules file", "recipe"),
    ('xfail: [{include: shared, match: "op.*"}]', None, "with `unless: [globs]` at most", "recipe"),
    ("xfail: [{include: shared}]", "xfail: {match: x}\n", "`xfail` must be a list of rules", "rules"),
    ("xfail: [{include: shared}]", "colour: red\n", "a rules file is a mapping of description", "rules"),
    ("xfail: [{include: shared}]", "xfail: [{include: other}]\n", "a rules file does not include others", "rules"),
    ("xfail: [{include: shared}]", 'xfail:\n  - {match: "op.*", reason: "r"}\n', "names the failure it expects", "rules"),
    ("xfail: [{include: shared}]", "xfail: [\n", "invalid YAML", "rules"),
])
def test_include_errors_are_one_line_with_file_and_line(tmp_path: Path, text: str, rules: str | None, needle: str,
                                                        at: str) -> None:
    if rules is not None:
        _rules_file(tmp_path, "shared", rules)
    with pytest.raises(RecipeError) as err:
        recipe(tmp_path, text)
    assert needle in str(err.value) and "\n" not in str(err.value)
    where = tmp_path / "rules" / "shared.yaml" if at == "rules" else tmp_path / "r.yaml"
    assert str(err.value).startswith(f"{where}:"), str(err.value)


@pytest.mark.parametrize(("text", "needle"), [
    ('xfail: [{match: "op.*", reason: "r"}]', "names the failure it expects"),
    ('xfail: [{match: "op.*", status: PASS, reason: "r"}]', "not a failure status"),
    ('xfail: [{match: "op.*", status: FLAKY, reason: "r"}]', "not a failure status"),
    ('xfail: [{match: "op.*", status: FAIL_RUN, reason: "r", delegated_only: "no"}]', "delegated_only` takes true or false"),
    ("1: x\nfoo: y\n", "unknown recipe key(s) for backend executorch: 1, foo"),
    ('xfail: [{match: "op.*", status: FAIL_LOWER, message: "(", reason: "r"}]', "not a regular expression"),
    ('xfail: [{match: "op.*", status: FAIL_LOWER, reason: "r", colour: red}]', "each `xfail` entry takes"),
    ("tolerances: {float32: {atol: banana}}", "tolerances.float32.atol must be a number"),
    ("tolerances: {float33: {atol: 1}}", "unknown dtype 'float33'"),
    ("partitioners: [xnnpak]", "unknown partitioner 'xnnpak'"),
    ("partitionrs: [xnnpack]", "unknown recipe key(s) for backend executorch: partitionrs"),
    ("quantize: {quantizer: xnnpack, per_chanel: true}", "per_chanel"),
    ("quantize: {quantizer: xnnpack, reference: per-column}", "quantize.reference takes program or per-row, not 'per-column'"),
    ("quantize: {quantizer: xnnpack, reference: per-row}", "per-row is XNNPACK's dynamic quantization"),
    ("partitioners: [xnnpack]\nquantize: {quantizer: openvino, dynamic: true, reference: per-row}", "per-row is XNNPACK's dynamic"),
    ("quantize: {quantizer: xnnpack, dynamic: true, reference: per-row}", "(quantizer: xnnpack, dynamic: true, the xnnpack partitioner)"),
    ("runtime: {repeats: 0}", "repeats at least 1"),
    ("runtime: {provider: adb}", "unknown runtime provider 'adb'"),
    ("runtime: {provider: 5}", "runtime.provider, push, pull and remote_dir are strings"),
    ('runtime: {provider: "command:ssh b /r {args}", push: "scp {local} b:{remote}"}', "push and pull templates go together"),
    ("runtime: {threads: 0}", "threads at least 1"),
    ("tolerances: {quantized: {cosine: high}}", "tolerances.quantized.cosine"),
    ('expect: [{match: "op.*"}]', "names delegated_ops, min_delegated_pct or both"),
    ("capabilities: {ranks: [four]}", "capabilities.ranks takes whole numbers"),
    ('xfail: [{match: "op.*", status: FAIL_RUN, reason: "r", when: {cpu-colour: red}}]', "unknown fact 'cpu-colour'"),
    ('xfail: [{match: "op.*", status: FAIL_RUN, reason: "r", when: [bf16]}]', "`when` maps a machine fact to its value"),
    ('xfail: [{match: "op.*", status: FAIL_RUN, reason: "r", when: {openvino-cpu-precision: []}}]', "give a value or a list"),
    ('xfail: [{match: "op.*", status: FAIL_RUN, reason: "r", when: {openvino-cpu-precision: null}}]', "give a value or a list"),
    ('xfail: [{match: "op.*", status: FAIL_RUN, reason: "r", when: {openvino-cpu-precision: BF16}}]', "unknown value 'BF16'"),
])
def test_recipe_errors_name_file_and_line(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(RecipeError) as err:
        recipe(tmp_path, text)
    assert needle in str(err.value)
    assert f"{tmp_path / 'r.yaml'}:" in str(err.value)


def test_backend_option_error_names_the_key_line(tmp_path: Path) -> None:
    with pytest.raises(RecipeError) as err:
        recipe(tmp_path, "description: d\npartitioners: []\nfrobnicate: 1\n")
    assert str(err.value).startswith(f"{tmp_path / 'r.yaml'}:5:")  # name, backend, description, partitioners, frobnicate


def test_backend_owns_its_options(tmp_path: Path) -> None:
    r = recipe(tmp_path, "partitioners: [xnnpack]\nquantize: {quantizer: xnnpack, per_channel: false}\n")
    assert r.options.partitioners == ("xnnpack",) and r.options.quantize.per_channel is False
    assert r.quantized and r.quantization == "int8" and r.tolerance("float32") == {"sqnr_db": 10.0}
    with pytest.raises(AttributeError):
        r.options.partitioners = ()  # frozen


# --------------------------------------------------------------------------------------- expected delegation
EXPECT = """partitioners: [xnnpack]
expect:
  - {match: "op.*", delegated_ops: [aten.mul.Tensor], min_delegated_pct: 50}
"""


def partition(delegated: dict[str, int], undelegated: dict[str, int]) -> dict:
    d, u = sum(delegated.values()), sum(undelegated.values())
    return {"partitioned": True, "delegated_nodes": d, "undelegated_nodes": u, "total_nodes": d + u,
            "delegated_pct": round(100.0 * d / (d + u), 2), "delegated_ops": delegated, "undelegated_ops": undelegated}


def test_expected_delegation(tmp_path: Path) -> None:
    r = recipe(tmp_path, EXPECT)
    ok = Outcome(comparison=Comparison(True, "", (), {}), partition=partition({"aten.mul.Tensor": 1}, {"aten.add.Tensor": 1}))
    assert decide(item(), r, ok, "run")["status"] == "PASS"
    fallback = Outcome(comparison=Comparison(True, "", (), {}), partition=partition({"aten.add.Tensor": 1}, {"aten.mul.Tensor": 2}))
    rec = decide(item(), r, fallback, "run")
    assert rec["status"] == "FAIL_DELEGATION" and "aten.mul.Tensor" in rec["detail"] and "33.33% of nodes" in rec["detail"]
    assert rec["triage"] == "backend"
    no_mul = Outcome(comparison=Comparison(True, "", (), {}), partition=partition({"aten.relu.default": 1}, {}))
    assert decide(item(), r, no_mul, "run")["status"] == "PASS"  # nothing expected is in this program


# --------------------------------------------------------------------------------------------- capabilities
def test_capabilities_skip_naming_the_capability(tmp_path: Path) -> None:
    r = recipe(tmp_path, "capabilities: {ranks: [2, 3], dynamic: false, quantization: [int8]}\n"
                         "partitioners: [xnnpack]\nquantize: {quantizer: xnnpack}\n")
    assert "capability" in r.skip_reason(item(shape="dynamic")) and "dynamic" in r.skip_reason(item(shape="dynamic"))
    assert "supports ranks 2, 3, not 4" in r.skip_reason(item())
    rank2 = item(spec={"args": [{"tensor": {"shape": [2, 3]}}]})
    assert r.skip_reason(rank2) is None
    with pytest.raises(RecipeError, match=r"quantizes to int8, outside its own capabilities\.quantization"):
        recipe(tmp_path, "capabilities: {quantization: [int4]}\npartitioners: [xnnpack]\nquantize: {quantizer: xnnpack}\n",
               name="q")


# ---------------------------------------------------------------------------------------------------- triage
def test_triage() -> None:
    assert triage(Status.FAIL_MISMATCH, Status.PASS, False) == "backend"
    assert triage(Status.FAIL_MISMATCH, Status.FAIL_MISMATCH, False) == "upstream"  # the control fails too
    assert triage(Status.FAIL_LOAD, Status.XFAIL, False) == "upstream"
    assert triage(Status.FAIL_EXPORT, None, False) == "upstream"  # before the backend
    assert triage(Status.FAIL_RUN, None, True) == "upstream"  # the control recipe itself
    assert triage(Status.CRASH, Status.PASS, False) == "infra"
    assert triage(Status.CRASH, None, True) == "infra"  # the control's own crash is infra, not upstream
    assert triage(Status.TIMEOUT, Status.CRASH, False) == "infra"
    assert triage(Status.FAIL_RUN, Status.TIMEOUT, False) == "backend"  # a control that hung says nothing
    assert triage(Status.ERROR, None, False) == "infra"
    assert triage(Status.FLAKY, None, False) == "flake"
    assert triage(Status.PASS, Status.FAIL_RUN, False) is None
    assert triage(Status.XFAIL, None, False) is None


def test_attempts_that_disagree_are_flaky() -> None:
    first = {"id": "i", "status": "FAIL_MISMATCH", "detail": "max_abs 1", "attempt": 1}
    second = {"id": "i", "status": "PASS", "detail": "", "attempt": 2}
    final = settle_attempts([first, second])  # type: ignore[list-item]
    assert final["status"] == "FLAKY" and final["triage"] == "flake"
    assert [a["status"] for a in final["attempts"]] == ["FAIL_MISMATCH", "PASS"]
    same = settle_attempts([first, {**first, "attempt": 2}])  # type: ignore[list-item]
    assert same["status"] == "FAIL_MISMATCH" and len(same["attempts"]) == 2


# ------------------------------------------------------------------------------------------------ cache key
def test_cache_key_covers_what_the_verdict_depends_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.env
    from harness.runner.cache import ResultCache, _backend_code

    r = recipe(tmp_path, "partitioners: []\n")
    key = ResultCache(tmp_path, {"bti": "1"}).key("spec", "id", r, 1)
    for pkg in ("torchao", "openvino", "nncf", "transformers"):
        assert pkg in harness.env.VERDICT_PACKAGES
    real = harness.env.verdict_versions
    monkeypatch.setattr(harness.env, "verdict_versions", lambda: {**real(), "transformers": "99.0"})
    assert ResultCache(tmp_path, {"bti": "1"}).key("spec", "id", r, 1) != key
    assert _backend_code("executorch") == "builtin"
    monkeypatch.syspath_prepend(str(TESTS))
    assert _backend_code("fault_backend:FaultBackend").startswith("sha256:")  # not a distribution: its source
    assert harness.env.module_distribution("yaml").startswith("PyYAML==")  # a plugin's distribution and version


def test_reports_survive_hostile_attempts() -> None:
    from harness.report import comment, markdown

    rec = {"kind": "result", "id": "op.x.a[float32,static]@r", "case": "op.x.a", "suite": "s", "recipe": "r",
           "status": "FLAKY", "detail": "d", "attempts": [{"status": 5}, "junk", {"status": "<b>@x"}]}
    md = markdown.render({"recipes": {"r": "h"}}, [rec])  # type: ignore[list-item]
    assert "5 → ? → &lt;b>@\u2060x" in md
    assert "5 → ? → &lt;b>@\u2060x" in comment.render("k", {}, [rec], None)  # type: ignore[list-item]
    rec["attempts"] = "not a list"
    assert "## Flaky items (1)" in markdown.render({}, [rec])  # type: ignore[list-item]


def test_a_bundle_that_was_xfail_in_its_run_stays_expected_where_it_runs() -> None:
    from harness.status import Stage
    from harness.verdict import Comparison, Outcome, StageOutcome, decide_bundle

    base = {"id": "op.x[float32,static]@r", "recipe": "r"}
    bad = Outcome(stages=(StageOutcome(Stage.RUN, 0.1),), comparison=Comparison(False, "output[0]: too far", (), {}))
    good = Outcome(stages=(StageOutcome(Stage.RUN, 0.1),), comparison=Comparison(True, "", (), {}))
    xfail = {"reason": "upstream bug", "expects": "FAIL_MISMATCH"}
    assert decide_bundle(base, bad)["status"] == "FAIL_MISMATCH"
    rec = decide_bundle(base, bad, xfail)
    assert rec["status"] == "XFAIL" and "upstream bug" in rec["detail"] and rec["xfail"] == xfail
    assert decide_bundle(base, good, xfail)["status"] == "XPASS"


def test_an_arrow_in_a_detail_reads_as_an_arrow_and_html_stays_text() -> None:
    """`->` in a failure's detail is `->` in the Markdown summary and the comment (it read `-&gt;`); `<` still cannot
    open a tag or a comment."""
    from harness.report import comment, markdown

    rec = {"kind": "result", "id": "op.x.a[float32,static]@r", "case": "op.x.a", "suite": "s", "recipe": "r",
           "status": "FAIL_RUN", "detail": "x -> y <!-- bti:comment:k --> <img src=x>"}
    for text in (markdown.render({"recipes": {"r": "h"}}, [rec]), comment.render("k", {}, [rec], None)):  # type: ignore[list-item]
        assert "x -> y &lt;!-- bti:comment:k --> &lt;img src=x>" in text and "&gt;" not in text


def test_a_quantizing_recipe_skips_uninitialized_outputs(tmp_path: Path) -> None:
    """torch.empty*'s output is whatever memory holds: calibrating on it failed (NaN) on one run and not on others."""
    from dataclasses import replace

    from harness.cases.case import UNINITIALIZED

    it = item("op.empty_strided.default.large")
    garbage = replace(it, case=replace(it.case, tags=(UNINITIALIZED,)))
    quantizing = recipe(tmp_path, "partitioners: [xnnpack]\nquantize: {quantizer: xnnpack}\n", name="q")
    assert "uninitialized memory" in (quantizing.skip_reason(garbage) or "")
    assert quantizing.skip_reason(it) is None  # the tag decides, not the name
    assert recipe(tmp_path, "partitioners: [xnnpack]\n").skip_reason(garbage) is None  # float: shapes are still checked
    from harness.suites import load_suites

    tagged = {c.id for c in load_suites(["core-ops"]) if UNINITIALIZED in c.tags}
    assert {c.rsplit(".", 1)[0] for c in tagged} == {"op.empty.memory_format", "op.empty_strided.default"}


@pytest.mark.parametrize(("name", "flags"), [("cpu-vnni", {"avx512_vnni", "avx_vnni", "amx_int8"}), ("cpu-avx512", {"avx512f"})])
def test_the_cpu_flag_facts_read_the_cpus_flags(tmp_path: Path, name: str, flags: set[str]) -> None:
    """``cpu-vnni`` (OpenVINO's int8 saturation) and ``cpu-avx512`` (XNNPACK's kernels): present where /proc/cpuinfo lists
    one of the flags, absent on another x86 CPU, unknown (None, no rule holds) where nothing says; run as bti runs them,
    in a child process, here against this machine's own flags and then against written ones."""
    import platform
    import subprocess
    import sys

    from harness.facts import FACTS, X86, _ask

    code = FACTS[name].code
    value = _ask(name)
    if platform.machine().lower() not in X86:
        assert value == "n/a"
        return
    listed_here = set(Path("/proc/cpuinfo").read_text(errors="replace").split()) if Path("/proc/cpuinfo").exists() else None
    want = None if listed_here is None else "present" if listed_here & flags else "absent"
    assert value == want and (value is None or value in FACTS[name].values)
    for flag in sorted(flags):
        for listed, expected in ((f"fpu avx2 {flag}", "present"), (f"fpu avx2 {flag}x sse4_2", "absent")):
            fake = tmp_path / "cpuinfo"
            fake.write_text(f"processor\t: 0\nflags\t\t: {listed}\n")
            out = subprocess.run([sys.executable, "-c", code.replace("/proc/cpuinfo", str(fake))], capture_output=True, text=True,
                                 check=True)
            assert out.stdout.strip() == expected, listed
    missing = subprocess.run([sys.executable, "-c", code.replace("/proc/cpuinfo", str(tmp_path / "none"))], capture_output=True,
                             text=True, check=True)
    assert missing.stdout.strip() == ""  # nothing said: the fact is None


def test_the_torch_facts_are_what_decides_the_references_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """``torch-onednn-isa`` is what torch's oneDNN says it runs on (its verbose "isa:" line), capped by
    ONEDNN_MAX_CPU_ISA as oneDNN is; ``torch-fp16-convolution`` says whether ATen sends float16 convolutions to oneDNN."""
    import torch

    from harness.facts import FACTS, _ask

    here = _ask("torch-onednn-isa")
    assert here in FACTS["torch-onednn-isa"].values
    flags = set(Path("/proc/cpuinfo").read_text(errors="replace").split()) if Path("/proc/cpuinfo").exists() else set()
    if "avx2" in flags:  # an x86 CPU with AVX2: oneDNN runs at least that, AVX-512 or AMX only where the CPU has it
        assert here == ("amx" if {"amx_int8", "amx_bf16"} <= flags else "avx512" if "avx512f" in flags else "avx2")
    monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "SSE41")
    if flags & {"sse4_1"}:
        assert _ask("torch-onednn-isa") == "sse41"  # the child's oneDNN, as a worker's would be
    monkeypatch.delenv("ONEDNN_MAX_CPU_ISA")
    fp16 = _ask("torch-fp16-convolution")
    assert fp16 == ("onednn" if torch.ops.mkldnn._is_mkldnn_fp16_supported() else "aten")
    if flags and not flags & {"avx512_fp16", "avx_ne_convert"}:
        assert fp16 == "aten"  # ideep's float16 needs AVX512_FP16 or AVX-NE-CONVERT on x86



def test_openvino_s_isa_is_what_its_own_onednn_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """``openvino-cpu-isa`` is what OpenVINO's CPU plugin's oneDNN says it runs on: AMX where the CPU has AMX's int8 and
    bf16 tiles, else AVX-512 or AVX2 by the CPU's flags; ONEDNN_MAX_CPU_ISA caps it as it caps OpenVINO's kernels."""
    pytest.importorskip("openvino")
    from harness.facts import FACTS, _ask

    here = _ask("openvino-cpu-isa")
    assert here in FACTS["openvino-cpu-isa"].values
    flags = set(Path("/proc/cpuinfo").read_text(errors="replace").split()) if Path("/proc/cpuinfo").exists() else set()
    if "avx2" in flags:
        assert here == ("amx" if {"amx_int8", "amx_bf16"} <= flags else "avx512" if "avx512f" in flags else "avx2")
        monkeypatch.setenv("ONEDNN_MAX_CPU_ISA", "AVX2")
        assert _ask("openvino-cpu-isa") == "avx2"  # OpenVINO's oneDNN, capped


def test_a_timeout_says_what_the_item_had_of_the_machine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A TIMEOUT beside more processes than cores may be the machine's (RoBERTa's causal LM on ``portable``: a TIMEOUT
    beside three processes on two cores, a PASS alone in 41 % of its time). Its detail gives the cores the item's
    process used and the machine's load against its cores, says to run it alone only when the load passed the cores,
    and the record keeps the figures for a query across a sweep."""
    import os

    from harness.env import load_note

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    monkeypatch.setattr(os, "getloadavg", lambda: (4.2, 3.9, 2.0))
    said, figures = load_note(400.0, 1000.0)
    assert figures == {"cores": 2.0, "worker_cores": 0.4, "load_5min": 3.9}
    assert said == ("its process used 0.40 CPU cores on average; the machine's load average was 3.9 on 2 cores; more "
                    "processes than cores slow every item, so run it alone before blaming the backend")
    # an item alone whose own threads make the load: no advice to run it alone
    monkeypatch.setattr(os, "getloadavg", lambda: (2.6, 2.6, 2.6))
    assert "run it alone" not in load_note(1900.0, 1000.0)[0]
    monkeypatch.setattr(os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    said, figures = load_note(None, 1000.0)  # the process was gone: no share, and a quiet machine gives no advice
    assert said == "the machine's load average was 1.0 on 2 cores" and "worker_cores" not in figures
    rec = decide(item(), recipe(tmp_path, ""), Outcome(fixed=Status.TIMEOUT, fixed_detail=f"no result: {said}", load=figures),
                 "run")
    assert rec["status"] == "TIMEOUT" and rec["load"] == figures and rec["detail"].endswith("on 2 cores")


def test_a_timeout_s_load_note_does_not_split_its_root_cause() -> None:
    """The same row timed out on a busy machine and on a quiet one is one root cause: the load note is the machine's
    state that hour, so the advice clause and the figures stay out of the key; the timeout itself stays in it."""
    from harness.report.summary import root_cause

    def timeout(detail: str, load: dict[str, float] | None) -> dict[str, object]:
        return {"status": "TIMEOUT", "detail": detail, **({"load": load} if load else {})}

    busy = timeout("no result within --timeout 600s: its process used 0.41 CPU cores on average; the machine's load "
                   "average was 4.6 on 2 cores; more processes than cores slow every item, so run it alone before blaming "
                   "the backend", {"cores": 2.0, "worker_cores": 0.41, "load_5min": 4.6})
    quiet = timeout("no result within --timeout 600s: its process used 1.97 CPU cores on average; the machine's load "
                    "average was 2.1 on 2 cores", {"cores": 2.0, "worker_cores": 1.97, "load_5min": 2.1})
    gone = timeout("no result within --timeout 600s: the machine's load average was 1.0 on 2 cores", {"load_5min": 1.0})
    assert root_cause(busy) == root_cause(quiet) == root_cause(gone) == "TIMEOUT: no result within --timeout Ns"
    case_timeout = timeout("no result within 1800s (the case's timeout_s, longer than --timeout): the machine's load "
                           "average was 1.0 on 2 cores", {"load_5min": 1.0})
    assert root_cause(case_timeout) != root_cause(busy)
    # a record without the load figures (a provider's runner) keeps its whole first line
    assert root_cause(timeout("runner timed out: its process used the FVP", None)).endswith("its process used the FVP")
