"""The `vecmem` command. ``main(argv, stdout=, stderr=)`` returns the exit code, so tests call it directly.

Exit codes: 0 success; 2 a user mistake (bad arguments, invalid input, unknown id, model mismatch);
1 an operational failure (the store or the model failed). Errors are one line on stderr, never a traceback.
The heavy parts (Chroma, the embedding model) are imported only by the commands that need them, so
``vecmem --help`` starts at once.

This module is the entry point: the parser, built from the declared commands, and the error handling.
The commands themselves, each declared with its arguments on its handler, are in cli/memories.py
(reading and writing memories), cli/learning.py (learning from chat messages) and cli/admin.py (the store as
a whole, and serving it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn, TextIO

from vecmem import __version__
from vecmem.errors import VecmemError, is_user_error
from vecmem.interfaces.cli import admin as cli_admin
from vecmem.interfaces.cli import learning as cli_learning
from vecmem.interfaces.cli import memories as cli_memories
from vecmem.interfaces.cli.command import EXIT_FAILURE, EXIT_OK, EXIT_USAGE, BankFactory, Command, Context, UsageError
from vecmem.interfaces.cli.memories import default_seed_file

__all__ = ["main", "default_seed_file", "UsageError", "COMMANDS", "EXIT_OK", "EXIT_FAILURE", "EXIT_USAGE"]

# Every sub-command, in the order `vecmem --help` lists them.
COMMANDS: tuple[Command, ...] = (*cli_memories.commands, *cli_learning.commands, *cli_admin.commands)
_BY_NAME = {command.name: command for command in COMMANDS}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # argparse's default prints the usage too and calls sys.exit
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _build_parser() -> _Parser:
    parser = _Parser(prog="vecmem", description="Long-term memory for LLM agents: store, search, budget.")
    parser.add_argument("--version", action="store_true", help="print vecmem's version and exit")
    subparsers: Any = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for command in COMMANDS:
        command.add_to(subparsers)
    return parser


def _refuse_undecodable(arguments: Sequence[str]) -> None:
    """Refuse an argument that is not valid UTF-8 text before anything reads it: Python decodes argv with
    surrogateescape, so bytes that do not decode arrive as lone surrogates, which no part of vecmem can store,
    search or print."""
    for position, argument in enumerate(arguments, start=1):
        try:
            argument.encode("utf-8")
        except UnicodeEncodeError:
            try:  # the bytes as given (\xff), when they came from argv; otherwise the surrogate itself (\ud800)
                shown = argument.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            except UnicodeEncodeError:
                shown = argument.encode("utf-8", "backslashreplace").decode("utf-8")
            raise UsageError(f"argument {position} ({shown}) is not valid UTF-8 text") from None


def main(
    argv: Sequence[str] | None = None,
    *,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    bank_factory: BankFactory | None = None,
    stdin: TextIO | None = None,
) -> int:
    out = stdout or sys.stdout
    err = stderr or sys.stderr
    try:
        arguments = list(sys.argv[1:] if argv is None else argv)
        _refuse_undecodable(arguments)
        parser = _build_parser()
        args = parser.parse_args(arguments)
        if args.version:  # written to ``out`` (argparse's version action would print to sys.stdout and exit)
            print(f"vecmem {__version__}", file=out)
            return EXIT_OK
        if args.command is None:
            parser.print_help(out)
            return EXIT_USAGE
        context = Context(args, out, err, stdin or sys.stdin, bank_factory)
        try:
            return _BY_NAME[args.command].handler(context)
        finally:
            context.close()
    except UsageError as exc:
        print(f"vecmem: error: {exc}", file=err)
        return EXIT_USAGE
    except VecmemError as exc:
        print(f"vecmem: error: {exc}", file=err)
        return EXIT_USAGE if is_user_error(exc) else EXIT_FAILURE
    except KeyboardInterrupt:
        print("vecmem: interrupted", file=err)
        return 130
    except BrokenPipeError:  # `vecmem export | head`
        return EXIT_OK
