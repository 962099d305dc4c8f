"""Text from a results file, made safe to publish on GitHub (torch-free).

A results file is untrusted: on a fork PR the PR's own code wrote it, and the base repository's token
publishes it. Every string that came from a record or a header goes through here before it reaches a PR
comment, a check run (summary, text, annotations), the job summary or a commit status:

* ``@user`` and ``@org/team`` never ping: a word joiner (U+2060) follows the ``@``;
* HTML never renders: ``&`` and ``<`` are escaped, so ``<!--`` cannot hide the rest of a comment
  or forge another key's bti marker, and ``<img>``/``<details>`` stay text (``>`` alone starts no markup
  mid-line, so ``a -> b`` stays readable in the raw Markdown);
* no link, image or cross-reference: ``[``/``]`` are escaped (so ``[approve](https://…)`` and ``![](…)``
  stay text) and ``#123`` gets a word joiner after the ``#``, so no backlink lands in another issue;
* nothing breaks out of a code span: backticks become ``'``;
* a table cell stays one cell: ``|`` is escaped and line breaks become spaces;
* control characters (NUL, ESC, …) and lone surrogates are dropped.
"""

from __future__ import annotations

import re

WORD_JOINER = "\u2060"
_MENTION = re.compile(r"@(?=[A-Za-z0-9_-])")
_ISSUE_REF = re.compile(r"#(?=\d)")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f\ud800-\udfff]")


def _clean(text: object, limit: int | None) -> str:
    s = " ".join(_CONTROL.sub("", str(text)).split())
    return s if limit is None or len(s) <= limit else s[: limit - 1] + "…"


def plain(text: object, limit: int | None = None) -> str:
    """One line of plain text (commit-status descriptions, annotation titles and messages)."""
    return _ISSUE_REF.sub("#" + WORD_JOINER, _MENTION.sub("@" + WORD_JOINER, _clean(text, limit)))


def inline(text: object, limit: int | None = None) -> str:
    """One line of Markdown text, e.g. an error message in a table cell."""
    s = _clean(text, limit).replace("&", "&amp;").replace("<", "&lt;")  # never at a line's start: `>` quotes nothing
    s = s.replace("`", "'").replace("|", "\\|").replace("[", "\\[").replace("]", "\\]")
    return _ISSUE_REF.sub("#" + WORD_JOINER, _MENTION.sub("@" + WORD_JOINER, s))


def code(text: object, limit: int | None = None) -> str:
    """A code span (ids, recipe and op names). Inside it Markdown, HTML and mentions are inert; only a
    backtick could end it early, and a ``|`` would split a table row."""
    s = _clean(text, limit).replace("`", "'").replace("|", "\\|")
    return f"`{s}`" if s else "``"


# Characters XML 1.0 forbids anywhere, even escaped (C0 controls but tab/LF/CR, surrogates, U+FFFE/U+FFFF).
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_text(text: object, limit: int = 4000) -> str:
    """Text an XML writer can always serialize: forbidden characters become U+FFFD, at most ``limit``
    characters (``]]>`` and markup are escaped by the writer itself)."""
    s = _XML_FORBIDDEN.sub("\ufffd", str(text))
    return s if len(s) <= limit else s[: limit - 1] + "…"


def http_url(value: object) -> str:
    """A link target from a results file or a recipe: an http(s) URL without spaces (no ``javascript:``), else ""."""
    s = str(value or "").strip()
    return s if s.startswith(("https://", "http://")) and not any(c.isspace() for c in s) else ""


def md_url(value: object) -> str:
    """A link target to write into Markdown as ``[text](url)``: ``http_url``, and none of the characters that could
    end the link or start markup (``( ) < > [ ] " ' ` \\``), else "": a results file cannot break out of the link."""
    s = http_url(value)
    return "" if any(c in s for c in "()<>[]\"'`\\") else s


def csv_cell(text: object) -> str:
    """A CSV cell a spreadsheet will not run: a leading ``= + - @`` (or tab, CR) gets a quote before it."""
    s = str(text)
    return "'" + s if s[:1] in ("=", "+", "-", "@", "\t", "\r") else s
