"""One error family, one exit point (see ``harness.cli.main``).

``UserError`` is anything the user can fix (bad YAML, unknown recipe, corrupt file): exit 2 with
one line. Anything else escaping the CLI is a harness bug and keeps its traceback.
"""

from __future__ import annotations


def first_line(text: str) -> str:
    """The first non-blank line of ``text``, stripped, at most 500 characters."""
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:500]
    return ""


class UserError(Exception):
    """A problem in the user's input. Rendered as one line, exit code 2."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint

    def one_line(self) -> str:
        msg = " ".join(str(self).split())
        return f"{msg} (hint: {self.hint})" if self.hint else msg


class SpecError(UserError):
    """A suite file is malformed. Messages start with ``file:line:``."""


class RecipeError(UserError):
    """A recipe file is malformed or a recipe name is unknown."""


class ResultsError(UserError):
    """A results JSONL file cannot be read."""
