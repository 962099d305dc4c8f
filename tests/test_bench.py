"""`bti run --bundle` writes .pte/.bpte artifacts; `bti bench` measures and verifies them on the real runtime."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .test_cli_errors import check_usage_error

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bundled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from .conftest import run_bti

    out = tmp_path_factory.mktemp("bundled")
    res = run_bti("run", "-s", "smoke", "-r", "xnnpack", "-r", "portable", "-k", "op.linear.*", "-k", "op.add.*",
                  "--bundle", "-j", "2", "-o", str(out), env={"GITHUB_STEP_SUMMARY": str(out / "step-summary.md")})
    assert res.code == 0, res.err
    return out


def test_run_writes_every_report_but_leaves_the_job_summary_to_bti_report(bundled: Path) -> None:
    for name in ("junit.xml", "summary.md", "results.csv", "badge.svg", "dashboard.html"):
        assert (bundled / name).stat().st_size > 0, name
    assert not (bundled / "step-summary.md").exists()  # the action's `bti report --step-summary` writes it, once


def records(out: Path) -> dict[str, dict]:
    return {r["id"]: r for r in (json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()[1:])}


def test_run_bundle_writes_programs_that_bench_verifies(bti, bundled: Path) -> None:
    recs = records(bundled)
    assert recs and all(r["artifacts"]["pte"].startswith("programs/") for r in recs.values())
    for item_id, rec in recs.items():
        pte = bundled / rec["artifacts"]["pte"]
        assert pte.read_bytes()[4:6] == b"ET"  # the very program the record's hash describes
        import hashlib

        assert hashlib.sha256(pte.read_bytes()).hexdigest() == rec["pte_sha256"], item_id
    rec = recs["op.linear.fc[float32,static]@xnnpack"]
    res = bti("bench", str(bundled / rec["artifacts"]["bpte"]), "--repeats", "5", "--json", str(bundled / "b.json"))
    assert res.code == 0, res.err
    assert "runtime check passed" in res.out
    data = json.loads((bundled / "b.json").read_text())
    assert data["kind"] == "bpte" and data["ok"] is True
    assert data["latency_ms"]["repeats"] == 5 and 0 < data["latency_ms"]["min"] <= data["latency_ms"]["median"]
    assert data["load_ms"] > 0 and data["memory_mb"]["peak_rss"] > 0
    case = data["accuracy"]["cases"][0]
    assert case["runtime_verified"] is True and float(case["outputs"][0]["max_abs"]) < 1e-4


def test_a_delegate_that_changes_directory_moves_no_bundle(bti, tmp_path: Path) -> None:
    """With a relative -o (the default `out`), a delegate that calls os.chdir while lowering must not send that
    worker's later programs, other recipes' too, into its own directory (a #26 silent bug: the records listed
    programs/... and the run exited 0)."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    res = bti("run", "-s", "smoke", "-k", "op.mul.*", "-k", "op.add.*", "-r", "fault-chdir", "-r", "portable", "--bundle",
              "-j", "1", "--no-reuse", "--no-report", "-o", "out", cwd=tmp_path, env={"BTI_FAULT_STATE": str(elsewhere)})
    assert res.code == 0, res.err
    recs = records(tmp_path / "out")
    assert {r["recipe"] for r in recs.values()} == {"fault-chdir", "portable"} and len(recs) >= 4
    for item_id, rec in recs.items():
        assert (tmp_path / "out" / rec["artifacts"]["pte"]).is_file(), item_id
    assert not any(elsewhere.rglob("*.pte")), sorted(map(str, elsewhere.rglob("*")))


def test_bench_flags_a_bundle_whose_expected_outputs_are_wrong(bti, bundled: Path, tmp_path: Path) -> None:
    import torch
    from executorch.devtools import BundledProgram
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from executorch.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer

    pte = bundled / records(bundled)["op.linear.fc[float32,static]@portable"]["artifacts"]["pte"]
    x, w, b = torch.randn(2, 16), torch.randn(8, 16), torch.randn(8)
    wrong = torch.nn.functional.linear(x, w, b) + 0.5
    case = MethodTestCase(inputs=[x, w, b], expected_outputs=[wrong])
    bad = tmp_path / "wrong.bpte"
    bad.write_bytes(serialize_from_bundled_program_to_flatbuffer(BundledProgram(None, [MethodTestSuite("forward", [case])],
                                                                                  pte_file_path=str(pte))))
    res = bti("bench", str(bad), "--json", str(tmp_path / "b.json"))
    assert res.code == 1, res.err
    assert "MISMATCH" in res.out and "runtime check FAILED" in res.out
    data = json.loads((tmp_path / "b.json").read_text())
    assert data["ok"] is False and abs(float(data["accuracy"]["cases"][0]["outputs"][0]["max_abs"]) - 0.5) < 1e-4


def test_bench_a_pte_against_an_exported_reference(bti, bundled: Path, tmp_path: Path) -> None:
    import torch

    class Linear(torch.nn.Module):
        def __init__(self, scale: float) -> None:
            super().__init__()
            self.scale = scale

        def forward(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.linear(x, w, b) * self.scale

    example = (torch.randn(2, 16), torch.randn(8, 16), torch.randn(8))
    for scale, name in ((1.0, "right.pt2"), (2.0, "wrong.pt2")):
        torch.export.save(torch.export.export(Linear(scale), example), str(tmp_path / name))
    pte = bundled / records(bundled)["op.linear.fc[float32,static]@xnnpack"]["artifacts"]["pte"]
    plain = bti("bench", str(pte), "--repeats", "3")
    assert plain.code == 0 and "accuracy  not checked" in plain.out, plain.err
    right = bti("bench", str(pte), "--reference", str(tmp_path / "right.pt2"), "--json", str(tmp_path / "r.json"))
    assert right.code == 0, right.err
    assert json.loads((tmp_path / "r.json").read_text())["inputs"] == [[2, 16], [8, 16], [8]]
    wrong = bti("bench", str(pte), "--reference", str(tmp_path / "wrong.pt2"))
    assert wrong.code == 1 and "MISMATCH" in wrong.out


def test_bench_refuses_bad_files_in_one_line(bti, inproc, bundled: Path, tmp_path: Path) -> None:
    rec = records(bundled)["op.linear.fc[float32,static]@xnnpack"]
    pte, bpte = (bundled / rec["artifacts"][k] for k in ("pte", "bpte"))
    (tmp_path / "garbage.pte").write_bytes(b"not a program at all")
    (tmp_path / "half.pte").write_bytes(pte.read_bytes()[: len(pte.read_bytes()) // 2])
    (tmp_path / "half.bpte").write_bytes(bpte.read_bytes()[: len(bpte.read_bytes()) // 2])
    check_usage_error(inproc("bench", str(tmp_path / "garbage.pte")), "neither an ExecuTorch program")
    check_usage_error(bti("bench", str(tmp_path / "half.pte")), "the runtime cannot load this program", "File size is too small")
    check_usage_error(inproc("bench", str(tmp_path / "half.bpte")), "not a readable bundled program")
    check_usage_error(inproc("bench", str(tmp_path / "missing.pte")), "cannot read")
    check_usage_error(inproc("bench", str(pte), "--method", "nope"), "has no method 'nope'")
