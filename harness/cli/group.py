"""The ``bti`` command group; each command module adds its commands to it."""

from __future__ import annotations

import click

from harness import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.version_option(__version__, prog_name="bti")
def cli() -> None:
    """bti — export, quantize, lower, run and compare PyTorch models and operators on ExecuTorch backends."""
