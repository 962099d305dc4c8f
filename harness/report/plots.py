"""The portal's plots: matplotlib figures rendered to inline SVG when the site is built (no script, no
network). Labels come from results files, so they are cut short and stripped of control characters;
matplotlib draws text as paths and escapes the text it keeps in XML comments.

Each function takes plain data and returns ``None`` when there is nothing to plot.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

_PREAMBLE = re.compile(r"^.*?(?=<svg)", re.S)
_COLORS = {"pass": "#2da44e", "undelegated": "#d4a72c", "xfail": "#8c959f", "skipped": "#d0d7de", "failing": "#cf222e"}
# error buckets: the worst max |out - ref| per item, by decade
BUCKETS = ((0.0, "exact"), (1e-6, "≤1e-6"), (1e-4, "≤1e-4"), (1e-2, "≤1e-2"), (1.0, "≤1"), (math.inf, ">1"))


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    # text.parse_math off: a recipe or case name with "$…$" is text, never mathtext (which can fail to parse)
    plt.rcParams.update({"text.parse_math": False, "svg.hashsalt": "bti", "svg.fonttype": "path", "font.size": 9, "axes.spines.top": False,
                         "axes.spines.right": False})
    return plt


def label(text: object, limit: int = 40) -> str:
    s = "".join(ch for ch in str(text) if ch.isprintable())
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _svg(fig: Any) -> str:
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None, "Creator": None})
    _plt().close(fig)
    svg = _PREAMBLE.sub("", buf.getvalue(), count=1)
    if "<script" in svg or "<foreignObject" in svg:  # matplotlib never writes these; a label must not either
        raise ValueError("unexpected element in a rendered plot")
    return svg


def outcomes(rows: Mapping[str, Mapping[str, int]]) -> str | None:
    """Stacked bars: per column, how many items passed, passed undelegated, were expected failures,
    skipped or failed."""
    if not rows:
        return None
    plt = _plt()
    names = list(rows)
    fig, ax = plt.subplots(figsize=(7, 0.35 * len(names) + 1.0))
    left = [0] * len(names)
    for kind, color in _COLORS.items():
        vals = [rows[n].get(kind, 0) for n in names]
        ax.barh(range(len(names)), vals, left=left, color=color, label=kind)
        left = [a + b for a, b in zip(left, vals, strict=True)]
    ax.set_yticks(range(len(names)), [label(n) for n in names])
    ax.invert_yaxis()
    ax.set_xlabel("items")
    ax.legend(ncols=5, loc="lower left", bbox_to_anchor=(0, 1.0), frameon=False, fontsize=8)
    return _svg(fig)


def pass_rate(series: Mapping[str, Sequence[tuple[datetime, float]]]) -> str | None:
    if not any(len(s) for s in series.values()):
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3))
    for name, pts in series.items():
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, label=label(name))
    ax.set_ylabel("pass rate, % of items run")
    ax.set_ylim(0, 100.5)
    ax.legend(fontsize=7, frameon=False)
    fig.autofmt_xdate()
    return _svg(fig)


def latency_cdf(ratios: Mapping[str, Sequence[float]]) -> str | None:
    """Per column, the CDF of each item's latency divided by the baseline recipe's."""
    data = {k: sorted(v) for k, v in ratios.items() if v}
    if not data:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 3))
    for name, vals in data.items():
        n = len(vals)
        ax.step(vals, [(i + 1) / n for i in range(n)], where="post", label=f"{label(name)} (n={n})")
    ax.set_xscale("log")
    ax.axvline(1.0, color="#57606a", linewidth=0.8, linestyle="--")
    ax.set_xlabel("latency ÷ baseline latency (log)")
    ax.set_ylabel("fraction of items")
    ax.legend(fontsize=7, frameon=False)
    return _svg(fig)


def bucket_of(max_abs: float) -> str:
    for bound, name in BUCKETS:
        if max_abs <= bound:
            return name
    return BUCKETS[-1][1]


def errors(buckets: Mapping[str, int], sqnr: Sequence[float]) -> str | None:
    """Left: items by their worst output's max abs error; right: the SQNR of every compared output."""
    if not sum(buckets.values()) and not sqnr:
        return None
    plt = _plt()
    fig, (a, b) = plt.subplots(1, 2, figsize=(8, 2.8))
    names = [n for _, n in BUCKETS]
    a.bar(names, [buckets.get(n, 0) for n in names], color="#0969da")
    a.set_title("worst max |out − ref| per item", fontsize=9)
    finite = [v for v in sqnr if math.isfinite(v)]
    if finite:
        b.hist(finite, bins=30, color="#8250df")
    b.set_title(f"SQNR per output, dB ({len(sqnr) - len(finite)} exact, not shown)", fontsize=9)
    return _svg(fig)


def delegated(pcts: Mapping[str, float]) -> str | None:
    """Per model (one bar each, the newest run of the column), the percentage of nodes delegated: the 40
    least delegated when there are more."""
    if not pcts:
        return None
    plt = _plt()
    names = sorted(pcts, key=lambda n: (pcts[n], n))[:40]
    fig, ax = plt.subplots(figsize=(7, 0.22 * len(names) + 0.9))
    ax.barh(range(len(names)), [pcts[n] for n in names], color="#1a7f37")
    ax.set_yticks(range(len(names)), [label(n, 60) for n in names], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlim(0, 100)
    ax.set_xlabel("% of graph nodes delegated")
    return _svg(fig)
