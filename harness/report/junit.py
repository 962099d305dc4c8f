"""JUnit XML via junitparser: one testsuite per recipe, metrics as properties.

Every string from the results passes ``safe.xml_text``: a backend's error message can hold NUL, ESC,
lone surrogates or megabytes, and XML 1.0 cannot carry the first three at all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from junitparser import Error, Failure, JUnitXml, Properties, Property, Skipped, TestCase, TestSuite

from harness.report.safe import xml_text
from harness.report.summary import by_recipe
from harness.results import Record, clean, status_of
from harness.status import Status

_PROPS = ("pte_bytes", "load_ms", "peak_rss_mb", "seed", "duration_s")


def build(header: dict[str, Any], records: list[Record]) -> JUnitXml:
    xml = JUnitXml(name="bti")
    suites: dict[str, TestSuite] = {}
    for name, summary in by_recipe(header, records).items():
        suite = TestSuite(xml_text(name, 200))
        if summary.unavailable:
            suite.add_property("unavailable", xml_text(summary.unavailable, 1000))
        suites[name] = suite
    for rec in records:
        suites[rec["recipe"]].add_testcase(_case(rec))
    for suite in suites.values():
        suite.update_statistics()
        xml.add_testsuite(suite)
    xml.update_statistics()
    return xml


def _case(rec: Record) -> TestCase:
    case = TestCase(xml_text(rec["id"], 1000), classname=xml_text(f"{rec['suite']}.{rec['case']}", 1000),
                    time=float(rec.get("duration_s") or 0.0))
    _properties(case, rec)  # first child, as pytest's record_property writes them
    status = status_of(rec)
    first = (rec.get("detail") or "").splitlines()[0] if rec.get("detail") else ""
    message = xml_text(f"{status.value}: {first}" if first else status.value, 1000)
    if not status.is_failure and not status.is_pass:  # did not run, or an expected failure
        case.result = [Skipped(message)]
    elif status is Status.ERROR:
        err = Error(message, xml_text((rec.get("error") or {}).get("type", "ERROR"), 200))
        err.text = xml_text((rec.get("error") or {}).get("trace", ""))
        case.result = [err]
    elif status.is_failure:
        fail = Failure(message, status.value)
        fail.text = xml_text((rec.get("error") or {}).get("message", ""))
        case.result = [fail]
    return case


def _properties(case: TestCase, rec: Record) -> None:
    props: list[tuple[str, Any]] = [("status", rec["status"])]
    if rec.get("triage"):
        props.append(("triage", rec["triage"]))
    props += [(k, rec[k]) for k in _PROPS if rec.get(k) is not None]  # type: ignore[literal-required]
    for stage, secs in (rec.get("stages") or {}).items():
        props.append((f"time.{stage}_s", secs))
    part = rec.get("partition") or {}
    for k in ("delegated_nodes", "undelegated_nodes", "delegated_pct", "delegated_subgraphs"):
        if k in part:
            props.append((f"partition.{k}", part[k]))
    if part.get("undelegated_ops"):
        props.append(("partition.undelegated_ops", ",".join(f"{k}x{v}" for k, v in part["undelegated_ops"].items())))
    for out in rec.get("outputs") or []:
        for k in ("max_abs", "max_rel", "mae", "mse", "sqnr_db", "cosine"):
            if k in out:
                props.append((f"{out['name']}.{k}", clean(out.get(k))))
    for k, v in (rec.get("latency_ms") or {}).items():
        props.append((f"latency_ms.{k}", v))
    holder = Properties()
    for k, v in props:
        holder.add_property(Property(xml_text(k, 200), xml_text(v, 1000)))
    case.append(holder)


def write(header: dict[str, Any], records: list[Record], path: Path) -> None:
    xml = build(header, records)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    xml.write(str(tmp), pretty=True)
    tmp.replace(path)
