"""The thin command line: parse, call `Engine`, render. Data to stdout, everything else to stderr."""

from __future__ import annotations

import sys

import click
import typer

from ..errors import ExpengineError

# Each module registers its commands on `app`; they import nothing heavy at module level.
from . import compact_cmds, query_cmds, refine_cmds, service_cmds, store_cmds  # noqa: E402,F401
from .common import app, stderr, styled


def main() -> None:
    """Entry point: domain errors become one line on stderr and a meaningful exit code."""
    try:
        rc = app(standalone_mode=False)
    except ExpengineError as exc:
        stderr.print(styled(("error:", "bold red"), " ", exc.message))
        if exc.hint:
            stderr.print(styled("  ", ("hint:", "dim"), " ", exc.hint))
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        stderr.print("aborted")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        stderr.print("interrupted")
        sys.exit(130)
    sys.exit(rc if isinstance(rc, int) else 0)


__all__ = ["app", "main", "typer"]
