"""The ``otel-ctx`` command line: ``demo``, ``fit``, ``dashboards`` and ``advise``.

Exit codes: 0 ok; 1 a request overflowed and ``--fail-on-overflow`` asked to fail on it;
2 a usage or input error, reported as one line on stderr (never a traceback).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from otel_ctx import __version__
from otel_ctx.cli import _advise as advise
from otel_ctx.cli import _dashboards as dashboards
from otel_ctx.cli import _demo_command as demo_command
from otel_ctx.cli import _fit_command as fit_command
from otel_ctx.cli._errors import EXIT_USAGE, CliError
from otel_ctx.cli._notes import EncodingFallbackFilter
from otel_ctx.engine._errors import OtelCtxError

__all__ = ["PROG", "app", "expand_optional_values", "main"]

PROG = "otel-ctx"

app = typer.Typer(
    name=PROG,
    no_args_is_help=True,
    help="Make an LLM agent's context budget observable.\n\nStart with [bold]otel-ctx demo[/bold].",
    rich_markup_mode="rich",
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(dashboards.app, name="dashboards")
app.command("demo", help=demo_command.HELP, no_args_is_help=False)(demo_command.demo)
app.command("fit", help=fit_command.HELP)(fit_command.fit)
app.command("advise", help=advise.HELP)(advise.advise)

#: Options whose value is optional: given bare, they take this value.
OPTIONAL_VALUES: dict[str, str] = {
    "--inspect": demo_command.INSPECT_AUTO,
    # Empty: no endpoint is passed on, so the exporters use OTEL_EXPORTER_OTLP_ENDPOINT or
    # the default port of the protocol (gRPC 4317, http/protobuf 4318).
    "--otlp": "",
}


def _version(value: bool) -> None:
    if value:
        typer.echo(f"{PROG} {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Make an LLM agent's context budget observable."""


def expand_optional_values(args: Sequence[str]) -> list[str]:
    """Give ``--inspect`` / ``--otlp`` their default when used without a value.

    The parser needs every option to take a value or none; these two take one optionally
    (``--inspect`` or ``--inspect T00042``), so a bare one gets its default inserted.
    """
    out: list[str] = []
    args = list(args)
    for i, arg in enumerate(args):
        out.append(arg)
        if arg == "--":
            out.extend(args[i + 1 :])
            break
        if arg in OPTIONAL_VALUES:
            following = args[i + 1] if i + 1 < len(args) else None
            if following is None or following.startswith("-"):
                out.append(OPTIONAL_VALUES[arg])
    return out


def _fail(message: str, code: int = EXIT_USAGE) -> None:
    # One line, whatever the message held.
    sys.stderr.write(f"{PROG}: error: {' '.join(message.split())}\n")
    sys.stderr.flush()
    sys.exit(code)


def _setup_output() -> None:
    if os.environ.get("NO_COLOR"):
        # Typer's own help and error panels have their own console.
        from typer import rich_utils

        rich_utils.COLOR_SYSTEM = None


def _is_parser_error(exc: BaseException) -> bool:
    """A command-line parsing error (click's ClickException and its subclasses).

    Typer raises its parser's exceptions: the ``click`` package's in the releases that
    depend on it, a copy of click inside typer in the newer ones. The two have no public
    module in common, so the exception is recognised by the public interface every
    release gives it (``format_message()`` and ``exit_code``), not by its module path.
    """
    return callable(getattr(exc, "format_message", None)) and isinstance(getattr(exc, "exit_code", None), int)


def _parser_error(exc: Any) -> None:
    ctx = getattr(exc, "ctx", None)
    if type(exc).__name__ == "NoArgsIsHelpError" and ctx is not None:
        sys.stdout.write(ctx.get_help() + "\n")
        sys.exit(EXIT_USAGE)
    message = exc.format_message()
    if hasattr(exc, "cmd"):  # a usage error: say where the help is
        where = ctx.command_path if ctx is not None else PROG
        message = f"{message} (see '{where} --help')"
    _fail(message, exc.exit_code)


def main(argv: Sequence[str] | None = None) -> None:
    """Console-script entry point: parse, run, and turn user errors into one line and an exit code."""
    # The CLI states an encoding fallback in its own output; the library's warning would repeat
    # it. Only while the command runs: a program that calls main() keeps the library's warnings.
    quiet = EncodingFallbackFilter()
    library = logging.getLogger("otel_ctx")
    library.addFilter(quiet)
    try:
        _main(argv)
    finally:
        library.removeFilter(quiet)


def _main(argv: Sequence[str] | None) -> None:
    _setup_output()
    args = expand_optional_values(sys.argv[1:] if argv is None else argv)
    command = typer.main.get_command(app)
    if not args:
        # Help, and the usage exit code: typer releases differ on what no arguments return.
        sys.stdout.write(command.get_help(typer.Context(command, info_name=PROG)) + "\n")
        sys.exit(EXIT_USAGE)
    try:
        rc = command.main(args=args, prog_name=PROG, standalone_mode=False)
    except CliError as exc:
        _fail(str(exc), exc.exit_code)
    except (OtelCtxError, ValueError) as exc:
        _fail(str(exc))
    except typer.Abort:
        _fail("aborted", 130)
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:
        # `otel-ctx demo | head`: the reader left; not an error of ours.
        sys.stderr.close()
        sys.exit(0)
    except RecursionError:
        _fail("the input is nested too deeply to process")
    except MemoryError:
        _fail("out of memory reading or processing the input")
    except Exception as exc:
        if _is_parser_error(exc):
            _parser_error(exc)
        # Hostile input can still reach a path nobody foresaw; the user gets one line and
        # exit 2, never a traceback (OTEL_CTX_DEBUG=1 shows it, for a bug report).
        if os.environ.get("OTEL_CTX_DEBUG"):
            raise
        _fail(f"unexpected {type(exc).__name__}: {exc} (set OTEL_CTX_DEBUG=1 for the traceback)")
    sys.exit(rc if isinstance(rc, int) else 0)
