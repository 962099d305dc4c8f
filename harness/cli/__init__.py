"""The ``bti`` command line: a module per command group. ``main(argv)`` is the one exit point: user errors exit 2
with one line.

| module | commands |
|---|---|
| ``run`` | ``bti run`` |
| ``suites`` | ``bti list``, ``bti validate`` |
| ``reports`` | ``bti report``, ``bti compare``, ``bti portal``, ``bti merge`` |
| ``device`` | ``bti bench``, ``bti verify``, ``bti runner build`` |
| ``repro`` | ``bti repro`` |
| ``github`` | ``bti publish …``, ``bti dispatch``, ``bti event …``, ``bti fetch-base``, ``bti fetch-history``, ``bti relay …`` |

Options shared by several commands live in ``options``; the settings (flags > environment > defaults) are resolved
here and in ``bti run`` (``harness.settings``).
"""

from __future__ import annotations

import click

from harness.cli import device, github, reports, repro, run, suites  # noqa: F401  (each adds its commands to the group)
from harness.cli.group import cli
from harness.errors import UserError

__all__ = ["cli", "main"]


def main(argv: list[str] | None = None) -> int:
    from harness.quiet import quiet
    from harness.settings import resolve, use

    quiet()
    try:
        with use(resolve()):  # the environment's settings; a command's flags go on top (``bti run``)
            cli.main(args=argv, prog_name="bti", standalone_mode=False)
    except UserError as exc:
        click.echo(f"bti: error: {exc.one_line()}", err=True)
        return 2
    except click.exceptions.Abort:
        click.echo("bti: aborted", err=True)
        return 130
    except click.ClickException as exc:
        exc.show()
        return 2
    except SystemExit as exc:
        return int(exc.code or 0) if not isinstance(exc.code, str) else 2
    except KeyboardInterrupt:
        return 130
    return 0
