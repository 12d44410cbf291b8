"""What a `vecmem` sub-command is: its name, help, arguments and handler declared together, in one place.

A module of commands makes a ``CommandGroup`` and declares each command on its handler::

    commands = CommandGroup()

    @commands.command("get", "show one memory", arg("memory_id", metavar="ID"))
    def get(ctx: Context) -> int: ...

main.py builds the argparse parser from the groups, in the order the commands are declared, and calls the
handler with a ``Context``: the parsed arguments, the output streams and the way to open the bank.
Nothing here imports Chroma or the embedding model; handlers import what only they need.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from vecmem.config import Settings

if TYPE_CHECKING:
    from vecmem.bank.api import MemoryApi

__all__ = [
    "EXIT_FAILURE",
    "EXIT_OK",
    "EXIT_USAGE",
    "Argument",
    "BankFactory",
    "Command",
    "CommandGroup",
    "Context",
    "UsageError",
    "arg",
    "positive_int",
]

_Read = TypeVar("_Read")
BankFactory = Callable[..., "MemoryApi"]  # (settings, verify_model=...): the store opened here
EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A command-line mistake that argparse would otherwise report in several lines and exit on."""


@dataclass(frozen=True)
class Argument:
    """One ``add_argument`` call: its flags or name and its keyword options."""

    flags: tuple[str, ...]
    options: dict[str, Any] = field(default_factory=dict)

    def add_to(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(*self.flags, **self.options)


def arg(*flags: str, **options: Any) -> Argument:
    """An argument, declared with exactly what ``ArgumentParser.add_argument`` takes."""
    return Argument(flags, options)


@dataclass
class Context:
    """What a handler works with: the parsed arguments, the streams, and the bank (opened on request)."""

    args: argparse.Namespace
    out: TextIO
    err: TextIO
    stdin: TextIO
    bank_factory: BankFactory | None = None
    _opened: list[MemoryApi] = field(default_factory=list)

    def settings(self) -> Settings:
        return Settings.from_env()

    def _one_off_settings(self) -> Settings:
        """A one-off command's: it saves every user's replica it changes or builds (``VECMEM_REPLICA_FILES=every``),
        so the next command's search can read it without opening Chroma. Long-running ones (serve, mcp) keep the
        environment's: many users' files, saved after every change, would cost them more than they save."""
        return self.settings().with_changes(replica_files="every")

    def bank(self, *, verify_model: bool = True) -> MemoryApi:
        """The store's owner when a process holds it and serves it, else the store opened here (through
        ``bank_factory`` when given; interfaces/owner/opening.py). With ``VECMEM_OWNER_LINGER`` set, an embedded
        store with no owner gets one that outlives this command, for the next ones (interfaces/owner/lingering.py);
        not for a command that opens the store with another model (``verify_model=False``: reindex)."""
        from vecmem.interfaces.owner.opening import (
            open_bank,  # Chroma and the model only once a command needs the store
        )

        settings = self._one_off_settings()
        if settings.owner_linger > 0 and not settings.chroma_url and verify_model and self.bank_factory is None:
            from vecmem.interfaces.owner.lingering import through_lingering_owner

            remote = through_lingering_owner(settings, lambda line: print(line, file=self.err, flush=True))
            if remote is not None:
                self._opened.append(remote)
                return remote
        bank = open_bank(settings, verify_model=verify_model, factory=self.bank_factory)
        if self.bank_factory is None:  # a factory's banks are its caller's
            self._opened.append(bank)
        return bank

    def close(self) -> None:
        """Close the banks this command opened, newest first: a bank closed saves what the next command reads
        (its users' replicas, retrieval/index/persisted.py) and lets go of the store."""
        while self._opened:
            self._opened.pop().close()

    def reading(self, read: Callable[[MemoryApi], _Read]) -> _Read:
        """``read(bank)`` for a command that only reads the user's memories (search, list, get). With an
        embedded store and no owner, first on the user's saved replica, which answers without importing Chroma
        (vecmem/assembly.py, ``reading_saved``) unless what it is asked needs the store; then on ``bank()``."""
        settings = self._one_off_settings()
        if self.bank_factory is None and not settings.chroma_url:
            from vecmem.interfaces.owner.opening import find_owner, saved_bank

            remote = find_owner(settings)
            if remote is not None:
                self._opened.append(remote)
                return read(remote)
            from vecmem.retrieval.index.persisted import NotInSavedReplica  # numpy: not for a client of an owner

            saved = saved_bank(settings, self.user)
            if saved is not None:
                try:
                    return read(saved)
                except NotInSavedReplica:
                    pass  # the store has what the file has not
                finally:
                    saved.close()
        return read(self.bank())

    @property
    def user(self) -> str | None:
        """--user, for the commands that take it; None means the configured default user."""
        user: str | None = getattr(self.args, "user", None)
        return user

    def emit_json(self, data: Any) -> None:
        json.dump(data, self.out, ensure_ascii=False, indent=2)
        self.out.write("\n")


Handler = Callable[[Context], int]  # returns the exit code


@dataclass(frozen=True)
class Command:
    """A sub-command: ``vecmem NAME [arguments]`` runs ``handler``. ``per_user`` commands also take --user."""

    name: str
    help: str
    handler: Handler
    arguments: tuple[Argument, ...] = ()
    per_user: bool = True

    def add_to(self, subparsers: Any) -> None:
        parser = subparsers.add_parser(self.name, help=self.help, description=self.help)
        if self.per_user:
            parser.add_argument("--user", help="user id (default: VECMEM_USER or 'default')")
        for argument in self.arguments:
            argument.add_to(parser)


class CommandGroup:
    """The commands of one module, in the order they are declared (the order `vecmem --help` lists them)."""

    def __init__(self) -> None:
        self._commands: list[Command] = []

    def command(self, name: str, help_text: str, *arguments: Argument,
                per_user: bool = True) -> Callable[[Handler], Handler]:
        """Declare the decorated function as the handler of command ``name`` with these arguments."""

        def register(handler: Handler) -> Handler:
            self._commands.append(Command(name, help_text, handler, arguments, per_user))
            return handler

        return register

    def __iter__(self) -> Iterator[Command]:
        return iter(self._commands)


def positive_int(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value
