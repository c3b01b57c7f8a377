"""The thin command line: parse, call `Engine`, render. Data to stdout, everything else to stderr."""

from __future__ import annotations

import sys

import typer

# typer >= 0.29 parses with its own bundled copy of click and raises that copy's exceptions, not click's
# (pyproject pins the typer range this is tested with).
from typer._click.exceptions import ClickException, NoArgsIsHelpError, NoSuchOption, UsageError

from ..errors import READ_ONLY_ERRNOS, ExpengineError, StoreError

# Each module registers its commands on `app`; they import nothing heavy at module level.
from . import (  # noqa: E402,F401
    agent_cmds,
    coding_cmds,
    compact_cmds,
    fleet_cmds,
    model_cmds,
    query_cmds,
    refine_cmds,
    service_cmds,
    store_cmds,
)
from .common import app, stderr, styled
from .operation_cmds import register

register()  # after the modules above: their renderers are registered by now


def main() -> None:
    """Entry point: domain errors and usage mistakes become one line on stderr and a meaningful exit code."""
    try:
        rc = app(standalone_mode=False)
    except ExpengineError as exc:
        stderr.print(styled(("error:", "bold red"), " ", exc.message))
        if exc.hint:
            stderr.print(styled("  ", ("hint:", "dim"), " ", exc.hint))
        sys.exit(exc.exit_code)
    except NoArgsIsHelpError as exc:  # `expengine` or a command group alone: its help, as click prints it
        exc.show()
        sys.exit(exc.exit_code)
    except UsageError as exc:
        stderr.print(styled(("error:", "bold red"), " ", usage_line(exc)))
        sys.exit(exc.exit_code)
    except ClickException as exc:
        stderr.print(styled(("error:", "bold red"), " ", exc.format_message()))
        sys.exit(exc.exit_code)
    except OSError as exc:
        if exc.errno not in READ_ONLY_ERRNOS:
            raise
        where = f": {exc.filename}" if exc.filename else " (a file in the store folder)"
        stderr.print(styled(("error:", "bold red"), " ", f"{exc.strerror or 'permission denied'}{where}"))
        stderr.print(
            styled("  ", ("hint:", "dim"), " ", "run it as the store's owner; stats and query --no-touch only read")
        )
        sys.exit(StoreError.exit_code)
    except typer.Abort:
        stderr.print("aborted")
        sys.exit(130)
    except KeyboardInterrupt:
        stderr.print("interrupted")
        sys.exit(130)
    sys.exit(rc if isinstance(rc, int) else 0)


GLOBAL_OPTIONS = ("--store", "--wait", "--set", "-s", "--direct")


def usage_line(exc: UsageError) -> str:
    """A usage mistake in one line: what is wrong, and where the command's help is."""
    command = exc.ctx.command_path if exc.ctx is not None else "expengine"
    if isinstance(exc, NoSuchOption) and exc.option_name in GLOBAL_OPTIONS:
        return f"{exc.option_name} is a global option: put it before the command (see `expengine --help`)"
    message = " ".join(exc.format_message().split())
    return f"{message} (see `{command} --help`)"


__all__ = ["app", "main", "typer"]
