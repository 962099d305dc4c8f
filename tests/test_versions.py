"""The supported matrix: the start-up check, per-version rules and the speedups' verified stacks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from harness import speedups as sp
from harness.errors import RecipeError, UserError
from harness.recipes import parse_recipe
from harness.versions import MATRIX, check_metadata, in_spec, installed_version

from .conftest import EXAMPLE_PATHS

ROOT = Path(__file__).resolve().parents[1]
ET_DECLARES = {"executorch": [Requirement("torchao>=0.18.0,<0.19")]}


def _stack(torch: str | None, executorch: str | None, torchao: str | None = "0.18.0") -> dict[str, str | None]:
    return {"torch": torch, "executorch": executorch, "torchao": torchao}


@pytest.mark.parametrize(("torch", "executorch"), [("2.14.1", "1.5.1"), ("2.14.1+cu130", "1.5.0"), ("2.13.0+cpu", "1.4.1"),
                                                    ("2.13.1", "1.4.2")])
def test_every_pair_of_the_matrix_passes_without_a_warning(torch: str, executorch: str) -> None:
    report = check_metadata(_stack(torch, executorch), ET_DECLARES)
    assert report.warnings == ()


@pytest.mark.parametrize(("torch", "executorch"), [("2.13.0", "1.5.1"), ("2.14.1", "1.4.1"), ("2.15.0", "1.6.0.dev20261120")])
def test_a_pair_outside_the_matrix_runs_with_one_warning_naming_it(torch: str, executorch: str) -> None:
    (warning,) = check_metadata(_stack(torch, executorch), ET_DECLARES).warnings
    assert f"executorch {executorch} with torch {torch} is outside the tested matrix" in warning
    assert "executorch 1.5.* + torch 2.14.* (default)" in warning and "\n" not in warning


def test_what_is_known_to_break_is_refused_naming_the_package() -> None:
    with pytest.raises(UserError, match=r"executorch 1.5.1 requires torchao<0.19,>=0.18.0, but torchao 0.19.0 is installed"):
        check_metadata(_stack("2.14.1", "1.5.1", "0.19.0"), ET_DECLARES)
    with pytest.raises(UserError, match=r"requires torchao.*which is not installed: pip install"):
        check_metadata(_stack("2.14.1", "1.5.1", None), ET_DECLARES)
    with pytest.raises(UserError, match=r"^torch is not installed: install a supported pair"):
        check_metadata(_stack(None, "1.5.1"), ET_DECLARES)
    with pytest.raises(UserError, match=r"^executorch is not installed \(torch 2.14.1 is\)"):
        check_metadata(_stack("2.14.1", None), ET_DECLARES)


def test_the_installed_stack_is_a_pair_of_the_matrix() -> None:
    """What `make` installed (either pair) passes the check as it stands, reading executorch's own metadata."""
    report = check_metadata()
    assert report.warnings == ()
    assert any(p.holds(report.versions["executorch"] or "", report.versions["torch"] or "") for p in MATRIX)


def test_local_labels_and_dev_builds_compare_as_pip_does() -> None:
    assert in_spec("2.13.0+cpu", "==2.13.*") and in_spec("2.14.1+cu130", ">=2.14,<2.15")
    assert in_spec("1.5.0rc2", "==1.5.*") and not in_spec("1.6.0.dev20261120", "<1.6")
    assert not in_spec("not a version", "<1.5") and not in_spec("1.4.1", "not a spec")


# -- a broken install gives one line and exit 2, never a traceback --------------------------------------------------

def _broken_env(tmp_path: Path, files: dict[str, str]) -> dict[str, str]:
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    tests = ROOT / "tests"
    return {"PYTHONPATH": os.pathsep.join([str(tmp_path), str(tests), *EXAMPLE_PATHS, str(ROOT)])}


def test_a_device_extension_that_fails_to_auto_load_is_named(bti, tmp_path: Path) -> None:
    """A real entry point in torch.backends whose hook raises: torch's own autoload fails at `import torch`."""
    env = _broken_env(tmp_path, {
        "acme_npu_ext/__init__.py": "def autoload():\n    raise ImportError('libacme_npu.so: cannot open shared object file')\n",
        "acme_npu_ext-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: acme-npu-ext\nVersion: 0.1\n",
        "acme_npu_ext-0.1.dist-info/entry_points.txt": "[torch.backends]\nacme_npu = acme_npu_ext:autoload\n",
    })
    res = bti("run", "-s", "smoke", "-r", "portable", "-o", str(tmp_path / "out"), "--no-reuse", env=env)
    assert res.code == 2, res.err
    assert "Traceback" not in res.err and len(res.err.strip().splitlines()) == 1, res.err
    assert f"torch {installed_version('torch')} failed to import" in res.err
    assert "acme_npu (acme_npu_ext:autoload)" in res.err and "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in res.err
    assert not (tmp_path / "out" / "results.jsonl").exists()  # nothing written, nothing lost


def test_a_missing_runtime_extension_is_named(bti, tmp_path: Path) -> None:
    """executorch's compiled extension (``_portable_lib`` on 1.4, ``_C`` on 1.5) cannot be imported."""
    (tmp_path / "out").mkdir()
    kept = tmp_path / "out" / "results.jsonl"
    kept.write_text('{"kind": "header"}\n')  # an earlier run's results survive the refusal
    env = _broken_env(tmp_path, {"sitecustomize.py": (
        "import sys\nfor n in ('_portable_lib', '_C'):\n    sys.modules['executorch.extension.pybindings.' + n] = None\n")})
    res = bti("run", "-s", "smoke", "-r", "xnnpack", "-o", str(tmp_path / "out"), "--no-reuse", env=env)
    assert res.code == 2, res.err
    assert "Traceback" not in res.err and len(res.err.strip().splitlines()) == 1, res.err
    assert f"executorch {installed_version('executorch')}'s runtime extension failed to load" in res.err
    assert "pip install --force-reinstall" in res.err
    assert kept.read_text() == '{"kind": "header"}\n'


# -- expectations per version ---------------------------------------------------------------------------------------

def _recipe(tmp_path: Path, rules: str) -> Path:
    path = tmp_path / "r.yaml"
    path.write_text(f"name: r\nbackend: executorch\npartitioners: [xnnpack]\n{rules}")
    return path


def test_a_rule_limited_to_versions_holds_only_there(tmp_path: Path) -> None:
    et = installed_version("executorch") or ""
    recipe = parse_recipe(_recipe(tmp_path, f"""xfail:
  - {{match: "op.a*", status: FAIL_LOWER, reason: here, versions: {{executorch: "=={et}"}}}}
  - {{match: "op.b*", status: FAIL_LOWER, reason: elsewhere, versions: {{executorch: "!={et}"}}}}
  - {{match: "op.c*", status: FAIL_LOWER, reason: both, versions: {{executorch: ">=1.4", torch: ">=2.13"}}}}
  - {{match: "op.d*", status: FAIL_LOWER, reason: absent, versions: {{no-such-package: ">=0"}}}}
skip:
  - {{match: "op.e*", reason: bare version means ==, versions: {{executorch: "{et}"}}}}
expect:
  - {{match: "op.f*", delegated_ops: [aten.add.Tensor], versions: {{executorch: "<1.0"}}}}
"""))
    assert [r.reason for r in recipe.xfail_rules("op.a[float32,static]")] == ["here"]
    assert recipe.xfail_rules("op.b[float32,static]") == []
    assert [r.reason for r in recipe.xfail_rules("op.c[float32,static]")] == ["both"]
    assert recipe.xfail_rules("op.d[float32,static]") == []  # a package that is not installed: the rule does not hold
    assert recipe.expectation("op.f[float32,static]") is None
    assert any(r.reason == "bare version means ==" and r.on_installed_versions() for r in recipe.skip)


@pytest.mark.parametrize(("versions", "message"), [
    ('"<1.5"', "`versions` maps a package to a version specifier"),
    ("{executorch: \"<<1.5\"}", "executorch: '<<1.5' is not a version specifier"),
    ("{}", "`versions` maps a package to a version specifier"),
])
def test_a_bad_versions_entry_is_one_line_with_its_location(tmp_path: Path, versions: str, message: str) -> None:
    path = _recipe(tmp_path, f'xfail:\n  - {{match: "op.a*", status: FAIL_LOWER, reason: x, versions: {versions}}}\n')
    with pytest.raises(RecipeError, match=message) as info:
        parse_recipe(path)
    assert str(info.value).startswith(f"{path}:5: ")  # the rule's own line


def test_the_fixed_upstream_bugs_are_xfail_only_before_1_5() -> None:
    """The built-in XNNPACK recipe's rules for bugs fixed in executorch 1.5 are limited to < 1.5."""
    from harness.recipes import load_recipe

    xnn = load_recipe("xnnpack")
    old = in_spec(installed_version("executorch") or "", "<1.5")
    for key in ("op.max_pool2d.no_stride_regression[float32,static]", "model.conv_bn_sequential.base[float32,dynamic]"):
        rules = xnn.xfail_rules(key)
        assert bool(rules) == old, (key, rules)
        assert all(r.versions == (("executorch", "<1.5"),) for r in xnn.xfail if r.match.startswith(key.split("[")[0][:14]))
    # and what 1.5 fixed stays fixed: avg_pool2d must be delegated there (an `expect` limited to >= 1.5)
    rule = xnn.expectation("op.avg_pool2d.k2s2[float16,static]", "ops")
    assert (rule is not None and rule.delegated_ops == ("aten.avg_pool2d.default",)) == (not old)
    if old:  # on 1.4 the float32 item falls through to the general fp32 list, which has no avg_pool2d
        fp32 = xnn.expectation("op.avg_pool2d.k2s2[float32,static]", "ops")
        assert fp32 is not None and "aten.avg_pool2d.default" not in fp32.delegated_ops


# -- speedups that know their versions ------------------------------------------------------------------------------

def test_speedups_are_on_where_verified_and_off_elsewhere_unless_forced() -> None:
    for stack in (sp.STACK_1_4, sp.STACK_1_5, {**sp.STACK_1_5, "torch": "2.14.1+cu130"}):
        p = sp.plan(versions=stack)
        assert len(p.active) == len(sp.SPEEDUPS) and p.off == {} and p.notice() is None
    newer = _stack("2.15.0", "1.6.0", "0.19.0")
    p = sp.plan(versions=newer)
    assert p.active == ("gc-policy",)  # not a memoization of anyone's code: valid on any stack
    assert set(p.off) == {s.name for s in sp.SPEEDUPS} - {"gc-policy"}
    assert "not verified on torch 2.15.0 + executorch 1.6.0 + torchao 0.19.0" in p.off["cia-cache"]
    notice = p.notice() or ""
    assert notice.startswith("speedups cia-cache, typing-cache,") and "--force-speedups" in notice
    forced = sp.plan(force=True, versions=newer)
    assert len(forced.active) == len(sp.SPEEDUPS) and forced.forced and forced.header()["forced"] is True
    off = sp.plan(enabled=False, versions=sp.STACK_1_5)
    assert off.active == () and set(off.off.values()) == {"--no-speedups"} and off.notice() is None


def test_the_cache_key_names_the_speedups_that_ran(tmp_path: Path) -> None:
    from harness.recipes import load_recipe
    from harness.runner.cache import ResultCache

    recipe = load_recipe("portable")
    keys = {ResultCache(tmp_path, {"bti": "x"}, active).key("s", "i", recipe, 0)
            for active in ((), ("gc-policy",), tuple(s.name for s in sp.SPEEDUPS))}
    assert len(keys) == 3


@pytest.mark.slow
def test_speedups_change_no_program_on_the_installed_pair(bti, tmp_path: Path) -> None:
    """fp32 and int8 items lowered with and without the speedups: the same .pte bytes, statuses and outputs."""
    args = ["-s", "smoke", "-k", "op.add.*", "-k", "op.mul.*", "-k", "op.linear.*", "-r", "xnnpack",
            "-r", "xnnpack-int8-static-per-channel", "-r", "xnnpack-int8-dynamic-per-channel", "--no-reuse", "--no-report"]
    runs = {}
    for name, extra in (("on", []), ("off", ["--no-speedups"])):
        res = bti("run", *args, *extra, "-o", str(tmp_path / name))
        assert res.code == 0, res.err
        lines = [json.loads(x) for x in (tmp_path / name / "results.jsonl").read_text().splitlines()]
        runs[name] = (lines[0], {r["id"]: r for r in lines[1:]})
    (h_on, on), (h_off, off) = runs["on"], runs["off"]
    assert len(h_on["speedups"]["active"]) == len(sp.SPEEDUPS) and h_off["speedups"]["active"] == []
    assert set(on) == set(off) and len(on) >= 6
    assert {r["recipe"] for r in on.values()} == {"xnnpack", "xnnpack-int8-static-per-channel", "xnnpack-int8-dynamic-per-channel"}
    lowered = [i for i, rec in on.items() if rec.get("pte_sha256")]
    assert len(lowered) >= 6 and {on[i]["recipe"] for i in lowered} == {r["recipe"] for r in on.values()}
    for item_id, rec in on.items():
        other = off[item_id]
        assert rec["status"] == other["status"] and rec.get("pte_sha256") == other.get("pte_sha256"), item_id
        assert rec.get("outputs") == other.get("outputs"), item_id


def test_an_unverified_stack_patches_nothing() -> None:
    """On a stack outside a speedup's verified list its enabler declines and leaves torch as it is."""
    import torch._ops

    before = sp.current_plan()
    callable_before = torch._ops.Callable
    sp.configure(sp.plan(versions=_stack("2.15.0", "1.6.0", "0.19.0")))
    try:
        if not sp.named("typing-cache").installed:
            assert not sp.named("typing-cache").enable() and torch._ops.Callable is callable_before
        for s in sp.SPEEDUPS:
            if s.by_enable_all:
                assert s.enable() is False, s.name
            else:  # the GC schedule runs on any stack (enabling it would freeze this process's heap)
                assert s.allowed and s.verified_on is None, s.name
        assert sp.enable_all() == []
    finally:
        sp.configure(before)


def test_the_cache_key_holds_btis_own_code(tmp_path: Path) -> None:
    """bti's version is a fixed 0.1.0 while its code changes: editing any file of harness/ must change the key
    (a #26 finding: results computed by older code were reused)."""
    import shutil

    from harness.recipes import load_recipe
    from harness.runner import cache

    copy = tmp_path / "harness"
    shutil.copytree(ROOT / "harness", copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert cache.harness_code(copy) == cache.harness_code()  # the same code, wherever it lies
    before = cache.harness_code(copy)
    verdict = copy / "verdict.py"
    verdict.write_text(verdict.read_text() + "\n# an edit\n")
    assert cache.harness_code(copy) != before
    recipe = load_recipe("portable")
    key = cache.ResultCache(tmp_path, {"bti": "0.1.0"}).key("s", "i", recipe, 0)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cache, "harness_code", lambda root=None: "edited")
        assert cache.ResultCache(tmp_path, {"bti": "0.1.0"}).key("s", "i", recipe, 0) != key
