"""The ``surprise-memory`` command: process, query, export, report, eval, migrate, goto, serve, mcp.

One module per subcommand family: :mod:`~surprise_memory.cli.process` (process, report;
:mod:`~surprise_memory.cli.batch` for many recordings), :mod:`~surprise_memory.cli.store`
(query, migrate), :mod:`~surprise_memory.cli.export` (export: episodes as MCAP),
:mod:`~surprise_memory.cli.gebd` (eval-gebd), :mod:`~surprise_memory.cli.qa` (eval-qa: the
paper's question-answering experiment),
:mod:`~surprise_memory.cli.goto` (goto: an episode as a Nav2 goal),
:mod:`~surprise_memory.cli.serve` (serve: the memory browser),
:mod:`~surprise_memory.cli.mcp` (mcp: the memory as an MCP server for agents);
:mod:`~surprise_memory.cli.cluster` holds the ``--ray`` options and the job progress bar,
:mod:`~surprise_memory.cli.options` what all share, among it the options generated from the
one config schema (:mod:`surprise_memory.config`), so the command line, the node parameters
and ``config/surprise_memory.yaml`` agree.

Errors raised on purpose (:class:`~surprise_memory.errors.SurpriseMemoryError`) print one
line, ``surprise-memory: error: ...``, and exit with status 1; usage errors exit with 2; a
job of many recordings or videos in which some failed exits with 3 (they are listed).
Ctrl-C and SIGTERM stop any command the same way (status 130 or 143), and a reader that
closes the pipe ends it quietly (141): :mod:`~surprise_memory.cli.stopping`.

Heavy modules (torch, the models, matplotlib) are imported only by the subcommand that
needs them, so ``--help`` and a query by time or place answer at once.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from surprise_memory.cli.export import add_export_command
from surprise_memory.cli.gebd import add_gebd_command
from surprise_memory.cli.goto import add_goto_command
from surprise_memory.cli.mcp import add_mcp_command
from surprise_memory.cli.options import PROG, HelpFormatter
from surprise_memory.cli.process import add_process_commands
from surprise_memory.cli.qa import add_qa_command
from surprise_memory.cli.serve import add_serve_command
from surprise_memory.cli.stopping import exit_status, install_sigterm, quiet_broken_pipe
from surprise_memory.cli.store import add_store_commands
from surprise_memory.errors import ConfigError, InputError, StoreError, SurpriseMemoryError

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``surprise-memory`` with its ten subcommands."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Surprise-gated episodic memory, offline: process a bag or video into an "
        "episode store, query it, export episodes as MCAP, report on it, browse it in a web "
        "page, evaluate on GEBD and on question answering (OC-NaVQA); send the robot "
        "to where an episode happened (goto); serve the memory to agents over MCP.",
        epilog="Setting options: every setting of the config schema is an option named "
        "--setting-name (the spelling --setting_name is accepted too), with the same name, "
        "default and range as the ROS node parameter.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    fmt = HelpFormatter
    add_process_commands(sub, fmt)
    add_store_commands(sub, fmt)
    add_export_command(sub, fmt)
    add_gebd_command(sub)
    add_qa_command(sub, fmt)
    add_goto_command(sub, fmt)
    add_serve_command(sub, fmt)
    add_mcp_command(sub, fmt)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 error, 2 usage, 130 ^C).

    A job of many recordings or videos in which some failed returns 3; SIGTERM 143; a
    reader that closed the pipe 141.
    """
    import logging

    logging.basicConfig(level=logging.WARNING, format=f"{PROG}: %(name)s: %(message)s")
    parser = build_parser()
    args = parser.parse_args(argv)
    install_sigterm()
    try:
        status: int = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
    except (ConfigError, InputError, StoreError, SurpriseMemoryError) as exc:
        print(f"{PROG}: error: {_one_line(str(exc))}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as interrupt:  # Ctrl-C, or SIGTERM (Terminated)
        print(f"{PROG}: interrupted", file=sys.stderr)
        return exit_status(interrupt)
    except BrokenPipeError:  # `surprise-memory query ... | head`: the reader has what it wanted
        return quiet_broken_pipe()
    except OSError as exc:
        print(f"{PROG}: error: {_one_line(str(exc))}", file=sys.stderr)
        return 1
    return status


def _one_line(text: str) -> str:
    return " ".join(text.split())


if __name__ == "__main__":
    raise SystemExit(main())
