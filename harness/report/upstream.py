"""``bti report --upstream-bugs``: the bugs a run found outside bti, one section per bug, ready to file upstream.

A bug is a root cause (``error.signature``, the innermost exception with its numbers masked and where it was raised),
or, for a wrong answer (no exception), the operator that gave it. Its items are the run's expected failures whose
rule names a bug outside bti ("found by bti", "Owner:", an issue link) and its unexpected failures, across recipes and
operators. Each section gives the root cause, the owner, the recipes and versions where it fails, the first version
among the given results where those items no longer fail, the items, and the standalone repro (the script ``bti run``
wrote under ``repro/``, else the ``bti repro`` command). Results are untrusted text: every value is escaped.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from harness.errors import first_line
from harness.report import safe
from harness.results import Header, Record, status_of

_UPSTREAM = re.compile(r"found by bti|github\.com/[^ ]+/issues/\d+", re.IGNORECASE)
_OWNER = re.compile(r"Owner:\s*(.+?)(?:;|\.\s|\.$|$)")
_NOT_UPSTREAM = ("the case", "bti", "none")  # ours, or no one's bug ("Owner: none, a limit of the scheme")
CAP_ITEMS = 12


@dataclass
class Bug:
    key: str
    title: str
    owner: str = ""
    reason: str = ""
    items: list[Record] = field(default_factory=list)
    failing: set[str] = field(default_factory=set)  # "executorch X (torch Y)"
    seen_in: dict[str, list[bool]] = field(default_factory=dict)  # other results' versions -> each item seen: passes?

    @property
    def fixed_in(self) -> list[str]:
        """The versions where every item of the bug that ran passes, oldest first (by executorch's version)."""
        return sorted((v for v, seen in self.seen_in.items() if seen and all(seen)), key=_order)

    @property
    def recipes(self) -> list[str]:
        return sorted({str(r.get("recipe")) for r in self.items})


def _versions(header: Header) -> str:
    pk = _mapping(header.get("packages")) or _mapping(header.get("versions"))
    return f"executorch {pk.get('executorch', '?')} (torch {pk.get('torch', '?')})"


def _order(version: str) -> tuple[int, ...]:
    """``executorch 1.5.1 (torch 2.14.1)`` as (1, 5, 1) for sorting; unknown parts sort first."""
    return tuple(int(x) if x.isdigit() else -1 for x in re.split(r"[.+ ]", version.split(" ")[1] if " " in version else "")[:3])


def _mapping(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _key(rec: Record) -> tuple[str, str]:
    """(the grouping key, the section's title) of one failure."""
    err, xfail = _mapping(rec.get("error")), _mapping(rec.get("xfail"))
    sig = str(err.get("signature") or "")
    status = str(xfail.get("status") or rec.get("status"))
    if sig:
        return sig, sig
    if status == "FAIL_MISMATCH":
        op = str(rec.get("op") or rec.get("case") or "?")
        return f"mismatch:{op}", f"wrong results from {op}"
    detail = first_line(str(rec.get("detail") or ""))
    return f"{status}:{detail[:120]}", f"{status}: {detail[:200]}"


def wanted(rec: Record) -> bool:
    """An unexpected failure, or an expected one whose rule names a bug outside bti."""
    from harness.repro import REPRODUCIBLE

    st = status_of(rec)
    if st.is_failure:  # unexpected, whatever rule it carries; not bti's own (ERROR) nor the machine's (TIMEOUT, FLAKY)
        return st.value in REPRODUCIBLE and rec.get("triage") != "infra"
    if st.value != "XFAIL":
        return False
    reason = str(_mapping(rec.get("xfail")).get("reason") or "")
    owner = _OWNER.search(reason)
    if owner is not None:
        return not owner.group(1).strip().lower().startswith(_NOT_UPSTREAM)
    return bool(_UPSTREAM.search(reason))


def collect(main: tuple[Header, list[Record]], others: Iterable[tuple[Header, list[Record]]] = ()) -> list[Bug]:
    """The bugs of ``main``'s records, with where the same items pass in ``others`` (other versions' results)."""
    header, records = main
    bugs: dict[str, Bug] = {}
    for rec in records:
        if not wanted(rec):
            continue
        key, title = _key(rec)
        bug = bugs.setdefault(key, Bug(key, title))
        bug.items.append(rec)
        bug.failing.add(_versions(header))
        reason = str(_mapping(rec.get("xfail")).get("reason") or "")
        if reason and not bug.reason:
            bug.reason = reason
            owner = _OWNER.search(reason)
            bug.owner = owner.group(1).strip() if owner else ""
        if not bug.owner and rec.get("triage"):
            bug.owner = f"triage: {rec.get('triage')}"
    ids = {str(r.get("id")): key for key, b in bugs.items() for r in b.items}
    for other_header, other_records in others:
        where = _versions(other_header)
        for rec in other_records:
            found = ids.get(str(rec.get("id")))
            if found is None or status_of(rec).did_not_run:
                continue
            bugs[found].seen_in.setdefault(where, []).append(status_of(rec).is_pass)
            if wanted(rec):
                bugs[found].failing.add(where)
    return sorted(bugs.values(), key=lambda b: (-len(b.items), b.title))


def _repro(bug: Bug, results: Path) -> str:
    from harness.repro import program_beside, script_name

    for rec in bug.items:
        name = script_name(str(rec.get("id")))
        script = results.parent / "repro" / name
        if script.is_file():
            # the name is bti's own (script_name: [A-Za-z0-9._-] only), safe in a link
            beside = program_beside(script)
            needs = f" and its program, `repro/{beside.name}`, beside it" if beside is not None else ""
            return f"[`repro/{name}`](repro/{name}) (`python` it: torch and executorch alone{needs})"
    first = str(bug.items[0].get("id"))
    return safe.code(f"bti repro {shlex.quote(first)} --results {shlex.quote(results.name)}", 600) + " writes it"


def render_md(bugs: list[Bug], results: Path) -> str:
    out = ["# Bugs found outside bti", "",
           f"{len(bugs)} root cause(s) from {safe.code(results.name)}: the expected failures whose rule names a bug "
           "outside bti, and the unexpected failures, grouped by root cause across recipes and operators.", ""]
    for n, bug in enumerate(bugs, 1):
        fixed = ", ".join(f"{safe.inline(v, 80)} (its {len(bug.seen_in[v])} item(s) there pass)" for v in bug.fixed_in)
        partly = [v for v, seen in bug.seen_in.items() if any(seen) and not all(seen)]
        if partly:
            fixed += ("; " if fixed else "") + "in part on " + ", ".join(safe.inline(v, 80) for v in sorted(partly, key=_order))
        items = ", ".join(safe.code(r.get("id"), 300) for r in bug.items[:CAP_ITEMS])
        more = f" and {len(bug.items) - CAP_ITEMS} more" if len(bug.items) > CAP_ITEMS else ""
        out += [f"## {n}. {safe.code(bug.title, 400)}", "",
                f"- **owner:** {safe.inline(bug.owner or 'not named by a rule', 200)}",
                *([f"- **rule:** {safe.inline(bug.reason, 800)}"] if bug.reason else []),
                f"- **recipes:** {', '.join(safe.code(r, 100) for r in bug.recipes)}",
                f"- **fails on:** {', '.join(safe.inline(v, 80) for v in sorted(bug.failing))}",
                f"- **no longer fails on:** {fixed or 'none of the given results'}"
                + (f" (first: {safe.inline(bug.fixed_in[0], 80)})" if bug.fixed_in else ""),
                f"- **items ({len(bug.items)}):** {items}{more}",
                f"- **repro:** {_repro(bug, results)}", ""]
    return "\n".join(out)


def write(results: Path, others: list[Path], out_dir: Path) -> Path:
    from harness.results import atomic_write_text, read_latest

    bugs = collect(read_latest(results), [read_latest(p) for p in others])
    path = out_dir / "upstream-bugs.md"
    atomic_write_text(path, render_md(bugs, results))
    return path
