"""Built-in suites, resolved by name; anything else is a path to a suite YAML file."""

from __future__ import annotations

from pathlib import Path

from harness.errors import UserError
from harness.spec.case import Case

HERE = Path(__file__).parent
YAML_SUITES = {"ops": HERE / "ops.yaml", "smoke": HERE / "smoke.yaml"}
PY_SUITES = ("models", "hf-models", "tv-models", "executorch-upstream-ops", "core-ops", "core-ops-ci")
DEFAULT_SUITES = ("ops", "models")
# Suites whose discovery needs torch and executorch imported: `bti run` warms its parent first, so
# discovery forks from it instead of paying the imports again in a fresh interpreter.
WARM_DISCOVERY = ("executorch-upstream-ops",)


def suite_names() -> list[str]:
    return sorted([*YAML_SUITES, *PY_SUITES])


def load_suites(names: list[str] | tuple[str, ...], check: bool = True) -> list[Case]:
    """The named suites' cases. ``check=False`` leaves resolving ops against torch to the caller
    (``harness.spec.suite.check_ops``), as ``bti run`` does for the items it actually executes."""
    from harness.spec.suite import check_ops, load_suite

    cases: list[Case] = []
    for name in names:
        if name == "models":
            from harness.suites.models import model_cases

            cases.extend(model_cases())
        elif name == "hf-models":
            from harness.suites.hf_models import hf_cases

            cases.extend(hf_cases())
        elif name == "tv-models":
            from harness.suites.tv_models import tv_cases

            cases.extend(tv_cases())
        elif name in ("core-ops", "core-ops-ci"):
            from harness.suites.core_ops import ci_sample, core_cases

            generated = core_cases()
            cases.extend(generated if name == "core-ops" else ci_sample(generated))
        elif name == "executorch-upstream-ops":
            from harness.suites.upstream import upstream_cases

            cases.extend(upstream_cases())
        elif name in YAML_SUITES:
            cases.extend(load_suite(YAML_SUITES[name], name=name, check=False))
        elif Path(name).suffix in (".yaml", ".yml"):
            cases.extend(load_suite(Path(name), check=False))
        else:
            raise UserError(f"unknown suite {name!r}", hint=f"built-in suites: {', '.join(suite_names())}, or a .yaml path")
    unique: dict[str, Case] = {}
    for c in cases:
        if c.id in unique and unique[c.id].source != c.source:
            raise UserError(f"case id {c.id} is defined twice ({unique[c.id].source} and {c.source})")
        unique.setdefault(c.id, c)
    if check:
        check_ops(list(unique.values()))
    return list(unique.values())
