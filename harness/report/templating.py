"""Jinja2 for every HTML page bti writes (dashboard, portal): autoescape on. A field a record lacks renders empty (results files
are partial or hostile; a page never fails over one).

A page's script is a file beside the templates, inlined verbatim; the page's Content-Security-Policy
allows that script by its SHA-256 and nothing else (no other script, no network, no frames), so even
markup that slipped through escaping could not run or fetch anything.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from importlib import resources
from typing import Any


@functools.cache
def env() -> Any:
    import jinja2

    from harness.report.summary import fmt_num

    e = jinja2.Environment(loader=jinja2.PackageLoader("harness.report", "templates"), autoescape=True, trim_blocks=True, lstrip_blocks=True)
    e.policies["json.dumps_kwargs"] = {"separators": (",", ":")}  # |tojson: compact (50,000 items), still HTML-safe
    e.filters["num"] = lambda v, digits=4: _num(fmt_num, v, digits)
    return e


def _num(fmt: Any, value: Any, digits: int) -> str:
    try:
        return str(fmt(value, digits))
    except (TypeError, ValueError):
        return str(value)


@functools.cache
def script(name: str) -> tuple[str, str]:
    """``(source, "sha256-…")`` of ``templates/<name>``."""
    text = resources.files("harness.report").joinpath("templates", name).read_text(encoding="utf-8")
    return text, "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


def render(template: str, js: str | None = None, **context: Any) -> str:
    from markupsafe import Markup

    if js is not None:
        source, digest = script(js)
        context["script"], context["script_hash"] = Markup(source), digest
    return str(env().get_template(template).render(**context))
