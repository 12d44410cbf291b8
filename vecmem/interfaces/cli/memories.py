"""`vecmem` commands that read and write memories: seed, add, search, list, get, forget, supersede, history,
restore, decisions, stats, export and import. Each is declared on its handler (see cli/command.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from vecmem.errors import InvalidInputError
from vecmem.interfaces.cli.command import EXIT_OK, EXIT_USAGE, CommandGroup, Context, UsageError, arg, positive_int
from vecmem.interfaces.cli.output import print_hits, print_records
from vecmem.models import MEMORY_TYPES, SOURCES, STATUSES

if TYPE_CHECKING:  # resolving.py brings the store's modules and numpy: not for `vecmem --help` or a command an owner answers
    from vecmem.bank.resolving import AddResult

__all__ = ["commands", "default_seed_file"]

commands = CommandGroup()


def default_seed_file() -> Path:
    """The seed memories: packaged with a wheel install, or data/ of the source checkout."""
    package_dir = Path(__file__).resolve().parents[2]  # vecmem/, above interfaces/cli/
    for candidate in (package_dir / "_data" / "seed_memories.jsonl", package_dir.parent / "data" / "seed_memories.jsonl"):
        if candidate.is_file():
            return candidate
    raise InvalidInputError("--file", "no seed file found next to the package; pass --file PATH")


def _importance(text: str) -> float:
    """A number; the bank applies the one importance rule (validation.normalize_importance: '1' and '1.0' are
    1.0, '7' is 0.7) and refuses what is out of range, with the message every interface gives."""
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"importance must be a number, got {text!r}") from None


def _types(values: list[str] | None) -> list[str] | None:
    """--type may be repeated or comma-separated."""
    if not values:
        return None
    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    for name in names:
        if name not in MEMORY_TYPES:
            raise UsageError(f"unknown type {name!r}; choose from {', '.join(MEMORY_TYPES)}")
    return names


def _read_lines(path: Path) -> list[str]:
    try:
        # surrogateescape keeps undecodable bytes; the record validation then reports that line by number
        return path.read_text(encoding="utf-8", errors="surrogateescape").splitlines()
    except OSError as exc:
        raise InvalidInputError("file", f"cannot read {path}: {exc.strerror or exc}") from None


def _open_for_writing(path: Path) -> TextIO:
    try:
        return path.open("w", encoding="utf-8")
    except OSError as exc:
        raise InvalidInputError("--output", f"cannot write {path}: {exc.strerror or exc}") from None


_JSON = arg("--json", action="store_true")
_TYPES = arg("--type", action="append", dest="types", help="repeatable or comma-separated")


@commands.command(
    "seed", "load the seed memories (idempotent: existing ids are left alone)",
    arg("--file", type=Path, help="JSON Lines file (default: the bundled data/seed_memories.jsonl)"),
)
def seed(ctx: Context) -> int:
    path = ctx.args.file or default_seed_file()
    bank = ctx.bank()
    report = bank.import_jsonl(_read_lines(path), user_id=ctx.user)
    for number, message in report.errors:
        print(f"vecmem: {path}:{number}: {message}", file=ctx.err)
    total = bank.stats(user_id=ctx.user).count
    print(f"seeded {report.added} new memories from {path} ({report.skipped} already there); "
          f"{total} memories for this user", file=ctx.out)
    return EXIT_USAGE if report.errors else EXIT_OK


@commands.command(
    "add", "store one memory; a newer statement replaces what it revises (--raw: store it as given)",
    arg("content"),
    arg("--type", default=None, choices=MEMORY_TYPES,
        help="default: inferred by the memory agent's rules (preference, instruction, conclusion, else fact)"),
    arg("--importance", type=_importance, default=0.5,
        help="0-1 as it is, or above 1 up to 10 on the ten-point scale (1 = 1.0, 7 = 0.7)"),
    arg("--tag", action="append", default=[], dest="tags", help="repeatable"),
    arg("--session", help="scope the memory to this session (default: global)"),
    arg("--source", default="manual", choices=SOURCES),
    arg("--confidence", type=float, default=1.0,
        help="0-1; an extracted memory below the review confidence waits in the review queue"),
    arg("--id", dest="memory_id", help="explicit id (default: derived from the content)"),
    arg("--raw", action="store_true",
        help="store it as given: replace nothing, even what it revises (the same statement is still stored once)"),
    _JSON,
)
def add(ctx: Context) -> int:
    """Prints the memory's id on stdout (the new one, or the one that already said it), as it always has, so
    `id=$(vecmem add ...)` keeps working; what the add did besides (replaced what, already remembered, the type it
    inferred, pending review) is said on stderr, one ``vecmem:`` line each. --json prints the memory with what the
    add did (``AddResult.to_dict``: ``action``, ``replaced``, ``reason``, ``type_inferred``)."""
    a = ctx.args
    result = ctx.bank().remember(
        a.content,
        user_id=ctx.user,
        memory_type=a.type,
        importance=a.importance,
        tags=a.tags,
        session_id=a.session,
        source=a.source,
        confidence=a.confidence,
        memory_id=a.memory_id,
        resolve=not a.raw,
    )
    record = result.record
    if a.json:
        ctx.emit_json(result.to_dict())
    else:
        print(record.id, file=ctx.out)
    for note in _add_notes(result):
        print(f"vecmem: {note}", file=ctx.err)
    return EXIT_OK


def _add_notes(result: AddResult) -> list[str]:
    """What `vecmem add` says besides the id: nothing for a plain new fact."""
    record, notes = result.record, list[str]()
    if result.action == "replaced":
        notes.extend(f"replaced {old.id} \"{old.content}\" ({_reason_for(result.reason, old.id)}; "
                     f"`vecmem restore {old.id}` undoes it)"
                     for old in result.replaced)
    elif result.action == "unchanged":
        notes.append(result.reason if result.reason.startswith("already") else
                     f"already remembered as {record.id} ({result.reason})")
    if result.type_inferred is not None and result.type_inferred != "fact" and result.action != "unchanged":
        notes.append(f"stored as {_article(result.type_inferred)} {result.type_inferred} ({result.type_reason}; "
                     "--type to choose)")
    if record.status == "pending":  # the id alone would suggest it is retrieved already
        notes.append(f"{record.id} waits in the review queue (`vecmem review`, `vecmem approve {record.id}`): "
                     "an extracted memory below the review confidence, or one that reads like an instruction to the "
                     "assistant, is not retrieved until a person approves it")
    return notes


def _reason_for(reason: str, memory_id: str) -> str:
    """The part of a decision's reason about one replaced memory ("revises m-1: ...; revises m-2: ..."): each line
    says its own, not every other's; the whole reason when no part names it alone."""
    prefix = f"revises {memory_id}: "
    own = [part.removeprefix(prefix) for part in reason.split("; ") if part.startswith(prefix)]
    return "; ".join(own) if own else reason


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"


@commands.command(
    "search", "find the memories most relevant to a query",
    arg("query"),
    arg("--k", "-k", type=positive_int, default=5),
    arg("--session", help="also see this session's memories (default: global only)"),
    _TYPES,
    _JSON,
)
def search(ctx: Context) -> int:
    a = ctx.args
    hits, settings = ctx.reading(lambda bank: (
        bank.search(a.query, a.k, user_id=ctx.user, session_id=a.session, types=_types(a.types)), bank.settings))
    if a.json:
        ctx.emit_json([hit.to_dict() for hit in hits])
    else:
        print_hits(ctx.out, hits, settings)
    return EXIT_OK


@commands.command(
    "list", "list memories, newest first",
    arg("--session", help="what this session sees: global memories plus its own"),
    _TYPES,
    arg("--include-superseded", action="store_true"),
    arg("--archived", action="store_true", help="the memories the forgetting policy archived"),
    arg("--pending", action="store_true", help="the review queue"),
    arg("--limit", type=positive_int),
    _JSON,
)
def list_memories(ctx: Context) -> int:
    a = ctx.args
    records = ctx.reading(lambda bank: bank.list_memories(
        user_id=ctx.user,
        session_id=a.session,
        types=_types(a.types),
        include_superseded=a.include_superseded,
        limit=a.limit,
        statuses=[s for s, wanted in (("archived", a.archived), ("pending", a.pending)) if wanted] or ["live"],
    ))
    if a.json:
        ctx.emit_json([record.to_dict() for record in records])
    else:
        print_records(ctx.out, records)
    return EXIT_OK


@commands.command("get", "show one memory", arg("memory_id", metavar="ID"))
def get(ctx: Context) -> int:
    ctx.emit_json(ctx.reading(lambda bank: bank.get(ctx.args.memory_id, user_id=ctx.user)).to_dict())
    return EXIT_OK


@commands.command(
    "forget", "delete memories for good: the IDs given, or with --all every memory of the user",
    arg("memory_ids", metavar="ID", nargs="*"),
    arg("--all", action="store_true", dest="everything",
        help="every memory of the user (--user, else VECMEM_USER), in any state, with its history"),
    arg("--session", help="with --all: only the memories of this session"),
    arg("--yes", "-y", action="store_true", help="with --all: do not ask for confirmation (for scripts)"),
)
def forget(ctx: Context) -> int:
    a = ctx.args
    if a.everything:
        return _forget_all(ctx)
    if a.session is not None or a.yes:
        raise UsageError("--session and --yes go with --all")
    if not a.memory_ids:
        raise UsageError("name the memories to forget (ID ...), or give --all")
    bank = ctx.bank()
    for memory_id in a.memory_ids:
        record = bank.forget(memory_id, user_id=ctx.user)
        print(f"forgot {record.id}: {record.content}", file=ctx.out)
    return EXIT_OK


def _forget_all(ctx: Context) -> int:
    """Every memory of the user, or of one session: confirmed by typing the user id at a terminal, or --yes.
    Without either (a script, a pipe) it refuses before opening the store, so nothing is deleted by accident."""
    a = ctx.args
    if a.memory_ids:
        raise UsageError("give memory IDs or --all, not both")
    user = ctx.user or ctx.settings().default_user
    where = f"user {user!r}" + ("" if a.session is None else f" in session {a.session!r}")
    if not a.yes and not ctx.stdin.isatty():
        raise UsageError(f"forget --all deletes every memory of {where} and asks for confirmation at a terminal; "
                         "pass --yes to run it without one")
    bank = ctx.bank()
    if not a.yes:
        if a.session is None:
            count = bank.count(user_id=user)
        else:  # what the session's scope holds, in any state (superseded versions and revisions included)
            count = sum(1 for r in bank.list_memories(user_id=user, session_id=a.session, include_superseded=True,
                                                      statuses=STATUSES)
                        if r.scope == a.session)
        print(f"This deletes {count} memories of {where} for good, with their history; there is no undo.",
              file=ctx.out)
        print(f"Type the user id ({user}) to confirm: ", end="", file=ctx.out, flush=True)
        if ctx.stdin.readline().strip() != user:
            raise UsageError("not confirmed (the answer was not the user id): nothing was deleted")
    deleted = bank.forget_all(user, session_id=a.session)
    print(f"forgot {deleted} memories of {where}", file=ctx.out)
    return EXIT_OK


@commands.command(
    "supersede", "mark OLD as replaced by NEW (kept for history, no longer retrieved)",
    arg("old_id", metavar="OLD"),
    arg("new_id", metavar="NEW"),
)
def supersede(ctx: Context) -> int:
    record = ctx.bank().supersede(ctx.args.old_id, ctx.args.new_id, user_id=ctx.user)
    print(f"{record.id} is now superseded by {record.superseded_by}", file=ctx.out)
    return EXIT_OK


@commands.command(
    "history", "the supersession chain of a memory, oldest first, with the earlier versions its edits kept",
    arg("memory_id", metavar="ID"),
    _JSON,
)
def history(ctx: Context) -> int:
    chain = ctx.bank().history(ctx.args.memory_id, user_id=ctx.user)
    if ctx.args.json:
        ctx.emit_json([record.to_dict() for record in chain])
        return EXIT_OK
    from vecmem.bank.chains import revision_number, version_dates

    began = version_dates(chain)  # each version dated when it began to say what it says, so the dates read in order
    for record in chain:
        # an edit keeps the id and its earlier text as a revision, whose created_at is when the edit replaced it
        state = (f"earlier version of {record.superseded_by}, edited {record.created_at:%Y-%m-%d %H:%M}"
                 if revision_number(record) is not None
                 else f"superseded by {record.superseded_by}" if record.superseded else "live")
        print(f"{began[record.id]:%Y-%m-%d %H:%M}  {record.id}  [{record.type}]  ({state})  {record.content}",
              file=ctx.out)
    return EXIT_OK


@commands.command(
    "restore", "undo a supersession: ID is live again, the memory that replaced it is not",
    arg("memory_id", metavar="ID"),
)
def restore(ctx: Context) -> int:
    record = ctx.bank().restore(ctx.args.memory_id, user_id=ctx.user)
    print(f"restored {record.id}: {record.content}", file=ctx.out)
    return EXIT_OK


@commands.command(
    "decisions", "the write gate's logged decisions (what was kept or dropped, and why)",
    arg("--session", help="only this session"),
    arg("--limit", type=positive_int, default=50),
    _JSON,
)
def decisions(ctx: Context) -> int:
    from vecmem.storage.state.sessions import SessionStore  # the log lives beside the store, not in it

    settings = ctx.settings()
    user = ctx.user or settings.default_user
    logged = SessionStore.open(settings).decisions(user, ctx.args.session, limit=ctx.args.limit)
    if ctx.args.json:
        ctx.emit_json([
            {"session_id": d.session_id, "text": d.text, "kept": d.kept, "stage": d.stage,
             "memory_type": d.memory_type, "reason": d.reason, "at": d.created_at.isoformat()}
            for d in logged
        ])
        return EXIT_OK
    for d in logged:
        verdict = f"kept as {d.memory_type}" if d.kept else "dropped"
        print(f"{d.created_at:%Y-%m-%d %H:%M:%S}  {d.session_id}  {verdict:<22} {d.stage:<8} {d.reason}  | {d.text}",
              file=ctx.out)
    return EXIT_OK


@commands.command("stats", "counts by type and scope (the whole store unless --user)", _JSON)
def stats(ctx: Context) -> int:
    counted = ctx.bank().stats(user_id=ctx.user)
    if ctx.args.json:
        ctx.emit_json(counted.to_dict())
        return EXIT_OK
    who = f"user {counted.user_id!r}" if counted.user_id else f"{len(counted.users)} user(s)"
    print(f"{counted.count} memories for {who} ({counted.live} live, {counted.superseded} superseded)", file=ctx.out)
    print("by type:  " + ", ".join(f"{name} {n}" for name, n in counted.by_type.items()), file=ctx.out)
    print("by scope: " + ", ".join(f"{name} {n}" for name, n in sorted(counted.by_scope.items())), file=ctx.out)
    dims = f", {counted.embed_dim} dims" if counted.embed_dim else ""
    print(f"model:    {counted.embed_model}{dims}", file=ctx.out)
    print(f"store:    {counted.location}", file=ctx.out)
    return EXIT_OK


@commands.command(
    "export", "write memories as JSON Lines (every user unless --user)",
    arg("--output", "-o", type=Path, help="file to write (default: standard output)"),
)
def export(ctx: Context) -> int:
    bank = ctx.bank()
    target = ctx.args.output
    handle = ctx.out if target is None else _open_for_writing(target)
    count = 0
    try:
        for record in bank.export(user_id=ctx.user):
            handle.write(json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
            count += 1
    finally:
        if target is not None:
            handle.close()
    if target is not None:
        print(f"exported {count} memories to {target}", file=ctx.err)
    return EXIT_OK


@commands.command(
    "import", "read memories from a JSON Lines file (the export format)",
    arg("file", type=Path),
    arg("--overwrite", action="store_true", help="replace memories whose id already exists"),
)
def import_file(ctx: Context) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    path = ctx.args.file
    lines = _read_lines(path)
    bank = ctx.bank()
    columns = (TextColumn("importing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(file=ctx.err), transient=True) as bar:
        task = bar.add_task("import", total=sum(1 for line in lines if line.strip()))
        report = bank.import_jsonl(lines, user_id=ctx.user, overwrite=ctx.args.overwrite,
                                   progress=lambda done: bar.update(task, completed=done))
    for number, message in report.errors:
        print(f"vecmem: {path}:{number}: {message}", file=ctx.err)
    print(f"imported {report.added} memories ({report.skipped} skipped, {len(report.errors)} bad lines)",
          file=ctx.out)
    return EXIT_USAGE if report.errors else EXIT_OK
