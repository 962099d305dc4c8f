"""JUnit XML via junitparser: one testsuite per recipe, metrics as properties.

Every string from the results passes ``safe.xml_text``: a backend's error message can hold NUL, ESC,
lone surrogates or megabytes, and XML 1.0 cannot carry the first three at all."""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from junitparser import Error, Failure, JUnitXml, Skipped, TestCase, TestSuite
from lxml import etree as ET  # junitparser builds on lxml when it is installed (pyproject), and serializes it in C

from harness.report.safe import xml_text
from harness.report.summary import by_recipe
from harness.results import Record, clean, status_of
from harness.status import Status

_PROPS = ("pte_bytes", "load_ms", "peak_rss_mb", "seed", "duration_s")


def build(header: dict[str, Any], records: Sequence[Record]) -> JUnitXml:
    xml = JUnitXml(name="bti")
    suites: dict[str, TestSuite] = {}
    for name, summary in by_recipe(header, records).items():
        suite = TestSuite(xml_text(name, 200))
        if summary.unavailable:
            suite.add_property("unavailable", xml_text(summary.unavailable, 1000))
        suites[name] = suite
    for rec in records:  # append, then count once: junitparser's add_testcase recounts the suite each time (quadratic)
        suites[rec["recipe"]].append(_case(rec))
    for suite in suites.values():
        xml.append(suite)
    xml.update_statistics()  # every suite's, then the root's
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
        err.text = xml_text((rec.get("error") or {}).get("trace", "")) or None  # type: ignore[assignment]  # empty: <error .../>
        case.result = [err]
    elif status.is_failure:
        fail = Failure(message, status.value)
        fail.text = xml_text((rec.get("error") or {}).get("message", "")) or None  # type: ignore[assignment]
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
    holder = ET.SubElement(case._elem, "properties")  # junitparser's Properties, written with lxml directly: its
    for k, v in props:  # descriptors cost ~150 µs a case, most of a 134,000-record report
        ET.SubElement(holder, "property", name=_name(k), value=_value(v))


@functools.lru_cache(maxsize=4096)
def _name(key: str) -> str:
    """A property name: a few dozen distinct ones in a run (``time.export_s``, ``output[0].sqnr_db``), made safe once."""
    return xml_text(key, 200)


def _value(value: Any) -> str:
    return str(value) if type(value) in (int, float) else xml_text(value, 1000)  # a number is always safe text


def write(header: dict[str, Any], records: Sequence[Record], path: Path) -> None:
    """Stream the XML: each test case is serialized as it is built, into its suite's part file, and the parts are
    joined under their counts. Memory holds one case, not the tree (junitparser's ``pretty`` re-parses the whole
    document with minidom: 15 s and ~1 GB at 15,000 records)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    summaries = by_recipe(header, records)
    with tempfile.TemporaryDirectory(dir=path.parent, prefix=".junit-") as tmpdir:
        parts = {name: (Path(tmpdir) / f"{i}.xml").open("wb") for i, name in enumerate(summaries)}
        counts = {name: [0, 0, 0, 0, 0.0] for name in summaries}  # tests, errors, failures, skipped, time
        try:
            for rec in records:
                case = _case(rec)
                c = counts[rec["recipe"]]
                c[0] += 1
                c[4] += case.time or 0.0
                if case.result:  # one entry at most: an error, a failure or a skip
                    c[1 + (Error, Failure, Skipped).index(type(case.result[0]))] += 1
                ET.indent(case._elem, "\t", level=2)
                parts[rec["recipe"]].write(b"\t\t" + ET.tostring(case._elem, encoding="utf-8", xml_declaration=False)
                                           .rstrip() + b"\n")
        finally:
            for fh in parts.values():
                fh.close()
        tmp = path.with_name(f".{path.name}.tmp")
        with tmp.open("wb") as out:
            out.write(b'<?xml version="1.0" encoding="utf-8"?>\n')
            totals = [sum(c[i] for c in counts.values()) for i in range(4)]
            out.write(_open_tag("testsuites", [("name", "bti"), ("tests", totals[0]), ("failures", totals[2]),
                                               ("errors", totals[1]), ("skipped", totals[3]),
                                               ("time", round(sum(round(c[4], 3) for c in counts.values()), 3))]))
            for i, (name, summary) in enumerate(summaries.items()):
                tests, errors, failures, skipped, secs = counts[name]
                suite = TestSuite(xml_text(name, 200))
                if summary.unavailable:
                    suite.add_property("unavailable", xml_text(summary.unavailable, 1000))
                for key, value in (("tests", tests), ("errors", errors), ("failures", failures), ("skipped", skipped),
                                   ("time", round(secs, 3))):
                    suite._elem.set(key, str(value))
                head, tail = _split(suite._elem)
                out.write(head)
                with (Path(tmpdir) / f"{i}.xml").open("rb") as part:
                    shutil.copyfileobj(part, out)
                out.write(tail)
            out.write(b"</testsuites>\n")
        tmp.replace(path)


def remove_partial(path: Path) -> None:
    """What ``write`` leaves beside ``path`` when its process is killed: the part files and the unfinished document."""
    for left in path.parent.glob(".junit-*"):
        shutil.rmtree(left, ignore_errors=True)
    path.with_name(f".{path.name}.tmp").unlink(missing_ok=True)


def _open_tag(tag: str, attrs: list[tuple[str, Any]]) -> bytes:
    elem = ET.Element(tag, {k: str(v) for k, v in attrs})
    return ET.tostring(elem, encoding="utf-8", xml_declaration=False).rsplit(b"/>", 1)[0] + b">\n"


def _split(elem: ET._Element) -> tuple[bytes, bytes]:
    """A suite element's text before and after its test cases, indented one level: a marker child stands in."""
    marker = ET.SubElement(elem, "bti-cases")
    ET.indent(elem, "\t", level=1)
    text = b"\t" + ET.tostring(elem, encoding="utf-8", xml_declaration=False).rstrip() + b"\n"
    elem.remove(marker)
    head, tail = text.split(b"<bti-cases/>", 1)
    return head.rstrip(b"\t"), tail.lstrip(b"\n")
