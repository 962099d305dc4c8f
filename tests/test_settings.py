"""One settings object (harness/settings.py), and status groups decided once (harness/status.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import settings
from harness.errors import UserError
from harness.status import Group, Status


def test_flags_win_over_the_environment_which_wins_over_the_defaults(tmp_path: Path) -> None:
    defaults = settings.resolve({})
    assert defaults.cache_dir == Path(".bti-cache").absolute() and defaults.reuse and defaults.speedups
    assert defaults.github_max_wait_s == 60.0 and defaults.github_throttle and defaults.runner == ()
    env = {"BTI_CACHE_DIR": str(tmp_path / "env"), "CI": "true", "BTI_NO_SPEEDUPS": "1", "BTI_RUNNER": "adb shell 'my runner'",
           "BTI_GITHUB_MAX_WAIT": "5", "BTI_GITHUB_THROTTLE": "0", "BTI_RECIPE_PATH": f"{tmp_path}/a:{tmp_path}/b"}
    from_env = settings.resolve(env)
    assert from_env.cache_dir == tmp_path / "env" and not from_env.reuse and not from_env.speedups
    assert from_env.runner == ("adb", "shell", "my runner") and from_env.github_max_wait_s == 5.0
    assert not from_env.github_throttle and from_env.recipe_path == (tmp_path / "a", tmp_path / "b")
    flagged = settings.resolve(env, cache_dir=Path("rel"), reuse=True, speedups=None, item_timeout_s=10.0)
    assert flagged.cache_dir == Path("rel").absolute() and flagged.reuse  # a flag wins; None leaves the environment's
    assert not flagged.speedups and flagged.item_timeout_s == 10.0 and flagged.provider_timeout_s == 9.0


@pytest.mark.parametrize(("name", "value"), [("BTI_GITHUB_MAX_WAIT", "soon"), ("BTI_GITHUB_BACKOFF", "-1"),
                                             ("BTI_RUNNER", "'unclosed")])
def test_a_bad_value_is_one_user_error(name: str, value: str) -> None:
    with pytest.raises(UserError) as err:
        settings.resolve({name: value})
    assert name in err.value.one_line() and "\n" not in err.value.one_line()


def test_a_bad_setting_stops_any_command_with_one_line(inproc) -> None:
    res = inproc("list", "-s", "smoke", env={"BTI_GITHUB_MAX_WAIT": "soon"})
    assert res.code == 2 and res.err.strip() == "bti: error: BTI_GITHUB_MAX_WAIT='soon': expected seconds"


def test_current_is_the_commands_settings_then_the_environments_again(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("BTI_CACHE_DIR", str(tmp_path / "outside"))
    inside = settings.resolve(cache_dir=tmp_path / "inside")
    with settings.use(inside):
        from harness.providers import default_runner_path
        from harness.runner.cache import default_dir

        assert default_dir() == tmp_path / "inside"  # the layers read the command's settings
        assert default_runner_path() == tmp_path / "inside" / "runner" / "bti_runner"
    assert settings.current().cache_dir == tmp_path / "outside"


def test_no_speedups_in_the_environment_reaches_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.speedups import plan

    monkeypatch.setenv("BTI_NO_SPEEDUPS", "1")
    assert plan().active == ()
    monkeypatch.delenv("BTI_NO_SPEEDUPS")
    assert plan(versions={"torch": "0.0", "executorch": "0.0", "torchao": "0.0"}).active  # speedup 3 runs anywhere


def test_every_status_has_one_display_group() -> None:
    assert {s for s in Status if s.did_not_run} == {Status.SKIP, Status.LOWERED, Status.UNAVAILABLE, Status.BLOCKED}
    assert {s for s in Status if not s.attempted} == {Status.SKIP, Status.UNAVAILABLE, Status.BLOCKED}  # LOWERED was tried
    groups = {s: s.group for s in Status}
    assert groups[Status.PASS] is Group.PASS and groups[Status.PASS_UNDELEGATED] is Group.UNDELEGATED
    assert groups[Status.XFAIL] is Group.XFAIL and groups[Status.BLOCKED] is Group.SKIPPED
    assert all(g is Group.FAILING for s, g in groups.items() if s.is_failure)
    assert all(s.group is Group.SKIPPED for s in Status if s.did_not_run and s is not Status.LOWERED)
    # LOWERED (lowered and serialized, the runtime missing here): neither a pass nor a failure, shown apart
    assert Status.LOWERED.group is Group.LOWERED and not Status.LOWERED.is_pass and not Status.LOWERED.is_failure
    assert Status.LOWERED.group.symbol == "📦" and Status.LOWERED.group.css == "lowered"
    assert Status.LOWERED.group.outcome == "other" and not Status.LOWERED.is_verdict  # never cached: runs where it can
    assert Status.XPASS.group.symbol == "❌" and Status.BLOCKED.group.symbol == "—" and Status.PASS_UNDELEGATED.group.symbol == "🟡"
    assert Status.FLAKY.group.css == "fail" and Status.UNAVAILABLE.group.css == "skip" and Status.XFAIL.group.outcome == "other"


def test_blocked_counts_as_not_run_in_every_report() -> None:
    """BLOCKED is neither ran nor failed: the summary, the relay payload and JUnit all say so (markdown forgot it once)."""
    from harness.report.junit import build
    from harness.report.relay import payload
    from harness.report.summary import RecipeSummary

    rec = {"kind": "result", "id": "op.add.a[float32,static]@x", "status": "BLOCKED", "recipe": "x", "suite": "s",
           "case": "op.add.a", "detail": "the baseline failed"}
    summary = RecipeSummary("x")
    summary.counts[Status.BLOCKED] += 1
    assert summary.ran == 0 and summary.failed == 0
    assert payload({"kind": "header"}, [rec], job_name="j", artifact_url=None)["test_counts"]["skipped"] == 1
    from harness.report.markdown import recipe_table

    row = next(line for line in recipe_table({"recipes": {"x": "h"}}, [rec]) if line.startswith("| `x`"))
    assert row.split("|")[2:12] == [" 0 ", " — ", " — ", " 0 ", " 0 ", " 0 ", " 0 ", " 0 ", " 1 ", " **nothing verified** "], row  # blocked
    (case,) = [c for suite in build({"kind": "header", "recipes": {"x": "h"}}, [rec]) for c in suite]
    assert case.is_skipped and not case.is_passed


def test_a_case_declares_a_longer_timeout_never_a_shorter_or_a_meaningless_one(tmp_path: Path) -> None:
    """``timeout_s`` in a case's spec (the zoo's large rows): the longer of it and ``--timeout``, and the provider's
    share of it; a bool, NaN, infinity, a string or a shorter time declares nothing."""
    base = settings.Settings(cache_dir=tmp_path, item_timeout_s=600.0)
    longer = base.for_case({"timeout_s": 2848.0})
    assert longer.item_timeout_s == 2848.0 and longer.provider_timeout_s == 0.9 * 2848.0 and longer.cache_dir == tmp_path
    for spec in ({}, {"timeout_s": 60}, {"timeout_s": True}, {"timeout_s": float("nan")}, {"timeout_s": float("inf")},
                 {"timeout_s": "3600"}, {"timeout_s": -1.0}, {"timeouts": {"x": 60.0}}, {"timeouts": {"x": "3600"}},
                 {"timeouts": ["x", 3600.0]}, {"timeouts": {"x": float("nan")}}):
        assert base.for_case(spec) is base and base.for_case(spec, "x") is base, spec
        assert settings.case_timeout(600.0, spec) == 600.0 == settings.case_timeout(600.0, spec, "x"), spec
    # per recipe (the zoo's ``timeouts``): only the item's recipe's, never below the case's own
    spec = {"timeout_s": 900.0, "timeouts": {"arm-tosa-int": 1500.0, "x": 700.0}}
    assert settings.case_timeout(600.0, spec, "arm-tosa-int") == 1500.0
    assert settings.case_timeout(600.0, spec, "xnnpack") == settings.case_timeout(600.0, spec, "x") == 900.0
    assert settings.case_timeout(600.0, spec) == 900.0 and settings.case_timeout(2000.0, spec, "arm-tosa-int") == 2000.0
    assert base.for_case(spec, "arm-tosa-int").provider_timeout_s == 0.9 * 1500.0
