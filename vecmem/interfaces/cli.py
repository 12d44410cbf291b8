"""The `vecmem` command. ``main(argv, stdout=, stderr=)`` returns the exit code, so tests call it directly.

Exit codes: 0 success; 2 a user mistake (bad arguments, invalid input, unknown id, model mismatch);
1 an operational failure (the store or the model failed). Errors are one line on stderr, never a traceback.
The heavy parts (Chroma, the embedding model) are imported only by the commands that need them, so
``vecmem --help`` starts at once.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence, TextIO

from vecmem.config import Settings
from vecmem.errors import InvalidInputError, VecmemError, is_user_error
from vecmem.models import MEMORY_TYPES, SOURCES

if TYPE_CHECKING:
    from vecmem.bank import MemoryBank
    from vecmem.models import Hit, MemoryRecord

__all__ = ["main", "default_seed_file"]

BankFactory = Callable[..., "MemoryBank"]
EXIT_OK, EXIT_FAILURE, EXIT_USAGE = 0, 1, 2


class UsageError(Exception):
    """A command-line mistake that argparse would otherwise report in several lines and exit on."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse's default prints the usage too and calls sys.exit
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def default_seed_file() -> Path:
    """The seed memories: packaged with a wheel install, or data/ of the source checkout."""
    package_dir = Path(__file__).resolve().parent.parent  # vecmem/, above interfaces/
    for candidate in (package_dir / "_data" / "seed_memories.jsonl", package_dir.parent / "data" / "seed_memories.jsonl"):
        if candidate.is_file():
            return candidate
    raise InvalidInputError("--file", "no seed file found next to the package; pass --file PATH")


def _importance(text: str) -> float:
    """'7' is read on the ten-point scale, '0.7' as it is (see MemoryRecord)."""
    try:
        return int(text) if text.strip().lstrip("+-").isdigit() else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"importance must be a number, got {text!r}") from None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _types(values: list[str] | None) -> list[str] | None:
    """--type may be repeated or comma-separated."""
    if not values:
        return None
    names = [name.strip() for value in values for name in value.split(",") if name.strip()]
    for name in names:
        if name not in MEMORY_TYPES:
            raise UsageError(f"unknown type {name!r}; choose from {', '.join(MEMORY_TYPES)}")
    return names


def _build_parser() -> _Parser:
    parser = _Parser(prog="vecmem", description="Long-term memory for LLM agents: store, search, budget.")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    def command(name: str, help_text: str) -> _Parser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        if name not in ("reindex", "doctor", "serve", "mcp"):
            sub.add_argument("--user", help="user id (default: VECMEM_USER or 'default')")
        return sub

    seed = command("seed", "load the seed memories (idempotent: existing ids are left alone)")
    seed.add_argument("--file", type=Path, help="JSON Lines file (default: the bundled data/seed_memories.jsonl)")

    add = command("add", "store one memory")
    add.add_argument("content")
    add.add_argument("--type", default="fact", choices=MEMORY_TYPES)
    add.add_argument("--importance", type=_importance, default=0.5, help="0-1, or an integer 0-10 (7 = 0.7)")
    add.add_argument("--tag", action="append", default=[], dest="tags", help="repeatable")
    add.add_argument("--session", help="scope the memory to this session (default: global)")
    add.add_argument("--source", default="manual", choices=SOURCES)
    add.add_argument("--confidence", type=float, default=1.0)
    add.add_argument("--id", dest="memory_id", help="explicit id (default: derived from the content)")
    add.add_argument("--json", action="store_true")

    search = command("search", "find the memories most relevant to a query")
    search.add_argument("query")
    search.add_argument("--k", "-k", type=_positive_int, default=5)
    search.add_argument("--session", help="also see this session's memories (default: global only)")
    search.add_argument("--type", action="append", dest="types", help="repeatable or comma-separated")
    search.add_argument("--json", action="store_true")

    listing = command("list", "list memories, newest first")
    listing.add_argument("--session", help="what this session sees: global memories plus its own")
    listing.add_argument("--type", action="append", dest="types", help="repeatable or comma-separated")
    listing.add_argument("--include-superseded", action="store_true")
    listing.add_argument("--archived", action="store_true", help="the memories the forgetting policy archived")
    listing.add_argument("--pending", action="store_true", help="the review queue")
    listing.add_argument("--limit", type=_positive_int)
    listing.add_argument("--json", action="store_true")

    get = command("get", "show one memory")
    get.add_argument("memory_id", metavar="ID")

    forget = command("forget", "delete memories for good")
    forget.add_argument("memory_ids", metavar="ID", nargs="+")

    supersede = command("supersede", "mark OLD as replaced by NEW (kept for history, no longer retrieved)")
    supersede.add_argument("old_id", metavar="OLD")
    supersede.add_argument("new_id", metavar="NEW")

    history = command("history", "the supersession chain of a memory, oldest first")
    history.add_argument("memory_id", metavar="ID")
    history.add_argument("--json", action="store_true")

    restore = command("restore", "undo a supersession: ID is live again, the memory that replaced it is not")
    restore.add_argument("memory_id", metavar="ID")

    decisions = command("decisions", "the write gate's logged decisions (what was kept or dropped, and why)")
    decisions.add_argument("--session", help="only this session")
    decisions.add_argument("--limit", type=_positive_int, default=50)
    decisions.add_argument("--json", action="store_true")

    stats = command("stats", "counts by type and scope (the whole store unless --user)")
    stats.add_argument("--json", action="store_true")

    export = command("export", "write memories as JSON Lines (every user unless --user)")
    export.add_argument("--output", "-o", type=Path, help="file to write (default: standard output)")

    imports = command("import", "read memories from a JSON Lines file (the export format)")
    imports.add_argument("file", type=Path)
    imports.add_argument("--overwrite", action="store_true", help="replace memories whose id already exists")

    command("reindex", "re-embed every memory with the configured embedding model")

    prune = command("prune", "archive what the forgetting policy selects (VECMEM_PRUNE_THRESHOLD, VECMEM_CAP_*)")
    prune.add_argument("--dry-run", action="store_true", help="only list what would be archived, and why")
    prune.add_argument("--json", action="store_true")

    command("review", "go through the review queue: approve, edit, reject or skip each pending memory")
    approve = command("approve", "let a pending memory into retrieval")
    approve.add_argument("memory_ids", metavar="ID", nargs="+")
    reject = command("reject", "delete a pending memory for good")
    reject.add_argument("memory_ids", metavar="ID", nargs="+")
    unarchive = command("unarchive", "bring an archived memory back into retrieval")
    unarchive.add_argument("memory_ids", metavar="ID", nargs="+")

    serve = command("serve", "the HTTP API (JSON; OpenAPI at /openapi.json)")
    serve.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    serve.add_argument("--port", type=_positive_int, default=8765)
    serve.add_argument("--token", help="bearer token required of every request (default: VECMEM_API_TOKEN); "
                                       "needed to bind anything but loopback")

    command("mcp", "a Model Context Protocol server on stdio: remember, recall, forget, list_memories")

    doctor = command("doctor", "examine the store; exit 1 while problems remain (--repair mends what it safely can)")
    doctor.add_argument("--repair", action="store_true", help="mend what can be mended without guessing")
    doctor.add_argument("--json", action="store_true")
    return parser


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
        args = _build_parser().parse_args(list(sys.argv[1:] if argv is None else argv))
        if args.command is None:
            _build_parser().print_help(out)
            return EXIT_USAGE
        return _Commands(args, out, err, bank_factory, stdin or sys.stdin).run()
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


class _Commands:
    """One method per sub-command; each returns an exit code."""

    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO, bank_factory: BankFactory | None,
                 stdin: TextIO) -> None:
        self.args = args
        self.out = out
        self.err = err
        self.stdin = stdin
        self._bank_factory = bank_factory

    def run(self) -> int:
        handler = getattr(self, "cmd_" + self.args.command)
        return handler()

    def bank(self, *, verify_model: bool = True) -> "MemoryBank":
        settings = Settings.from_env()
        if self._bank_factory is not None:
            return self._bank_factory(settings, verify_model=verify_model)
        from vecmem.bank import MemoryBank

        return MemoryBank(settings, verify_model=verify_model)

    @property
    def user(self) -> str | None:
        return getattr(self.args, "user", None)

    def emit_json(self, data: Any) -> None:
        json.dump(data, self.out, ensure_ascii=False, indent=2)
        self.out.write("\n")

    # ------------------------------------------------------------------------------------------------

    def cmd_seed(self) -> int:
        path = self.args.file or default_seed_file()
        bank = self.bank()
        report = bank.import_jsonl(_read_lines(path), user_id=self.user)
        for number, message in report.errors:
            print(f"vecmem: {path}:{number}: {message}", file=self.err)
        total = bank.stats(user_id=self.user).count
        print(f"seeded {report.added} new memories from {path} ({report.skipped} already there); "
              f"{total} memories for this user", file=self.out)
        return EXIT_USAGE if report.errors else EXIT_OK

    def cmd_add(self) -> int:
        a = self.args
        record = self.bank().add(
            a.content,
            user_id=self.user,
            memory_type=a.type,
            importance=a.importance,
            tags=a.tags,
            session_id=a.session,
            source=a.source,
            confidence=a.confidence,
            memory_id=a.memory_id,
        )
        if a.json:
            self.emit_json(record.to_dict())
        else:
            print(record.id, file=self.out)
        return EXIT_OK

    def cmd_search(self) -> int:
        a = self.args
        bank = self.bank()
        hits = bank.search(a.query, a.k, user_id=self.user, session_id=a.session, types=_types(a.types))
        if a.json:
            self.emit_json([hit.to_dict() for hit in hits])
        else:
            _print_hits(self.out, hits, bank.settings)
        return EXIT_OK

    def cmd_list(self) -> int:
        a = self.args
        records = self.bank().list_memories(
            user_id=self.user,
            session_id=a.session,
            types=_types(a.types),
            include_superseded=a.include_superseded,
            limit=a.limit,
            statuses=[s for s, wanted in (("archived", a.archived), ("pending", a.pending)) if wanted] or ["live"],
        )
        if a.json:
            self.emit_json([record.to_dict() for record in records])
        else:
            _print_records(self.out, records)
        return EXIT_OK

    def cmd_get(self) -> int:
        self.emit_json(self.bank().get(self.args.memory_id, user_id=self.user).to_dict())
        return EXIT_OK

    def cmd_forget(self) -> int:
        bank = self.bank()
        for memory_id in self.args.memory_ids:
            record = bank.forget(memory_id, user_id=self.user)
            print(f"forgot {record.id}: {record.content}", file=self.out)
        return EXIT_OK

    def cmd_supersede(self) -> int:
        record = self.bank().supersede(self.args.old_id, self.args.new_id, user_id=self.user)
        print(f"{record.id} is now superseded by {record.superseded_by}", file=self.out)
        return EXIT_OK

    def cmd_history(self) -> int:
        chain = self.bank().history(self.args.memory_id, user_id=self.user)
        if self.args.json:
            self.emit_json([record.to_dict() for record in chain])
            return EXIT_OK
        for record in chain:
            state = f"superseded by {record.superseded_by}" if record.superseded else "live"
            print(f"{record.created_at:%Y-%m-%d %H:%M}  {record.id}  [{record.type}]  ({state})  {record.content}",
                  file=self.out)
        return EXIT_OK

    def cmd_restore(self) -> int:
        record = self.bank().restore(self.args.memory_id, user_id=self.user)
        print(f"restored {record.id}: {record.content}", file=self.out)
        return EXIT_OK

    def cmd_decisions(self) -> int:
        from vecmem.storage.sessions import SessionStore

        settings = Settings.from_env()
        user = self.user or settings.default_user
        logged = SessionStore(settings.home / "sessions.sqlite3").decisions(
            user, self.args.session, limit=self.args.limit
        )
        if self.args.json:
            self.emit_json([
                {"session_id": d.session_id, "text": d.text, "kept": d.kept, "stage": d.stage,
                 "memory_type": d.memory_type, "reason": d.reason, "at": d.created_at.isoformat()}
                for d in logged
            ])
            return EXIT_OK
        for d in logged:
            verdict = f"kept as {d.memory_type}" if d.kept else "dropped"
            print(f"{d.created_at:%Y-%m-%d %H:%M:%S}  {d.session_id}  {verdict:<22} {d.stage:<8} {d.reason}  | {d.text}",
                  file=self.out)
        return EXIT_OK

    def cmd_stats(self) -> int:
        stats = self.bank().stats(user_id=self.user)
        if self.args.json:
            self.emit_json(stats.to_dict())
            return EXIT_OK
        who = f"user {stats.user_id!r}" if stats.user_id else f"{len(stats.users)} user(s)"
        print(f"{stats.count} memories for {who} ({stats.live} live, {stats.superseded} superseded)", file=self.out)
        print("by type:  " + ", ".join(f"{name} {n}" for name, n in stats.by_type.items()), file=self.out)
        print("by scope: " + ", ".join(f"{name} {n}" for name, n in sorted(stats.by_scope.items())), file=self.out)
        dims = f", {stats.embed_dim} dims" if stats.embed_dim else ""
        print(f"model:    {stats.embed_model}{dims}", file=self.out)
        print(f"store:    {stats.location}", file=self.out)
        return EXIT_OK

    def cmd_export(self) -> int:
        bank = self.bank()
        target = self.args.output
        handle = self.out if target is None else _open_for_writing(target)
        count = 0
        try:
            for record in bank.export(user_id=self.user):
                handle.write(json.dumps(record.to_dict(), ensure_ascii=False) + "\n")
                count += 1
        finally:
            if target is not None:
                handle.close()
        if target is not None:
            print(f"exported {count} memories to {target}", file=self.err)
        return EXIT_OK

    def cmd_import(self) -> int:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        path = self.args.file
        lines = _read_lines(path)
        bank = self.bank()
        columns = (TextColumn("importing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
        with Progress(*columns, console=Console(file=self.err), transient=True) as bar:
            task = bar.add_task("import", total=sum(1 for line in lines if line.strip()))
            report = bank.import_jsonl(lines, user_id=self.user, overwrite=self.args.overwrite,
                                       progress=lambda done: bar.update(task, completed=done))
        for number, message in report.errors:
            print(f"vecmem: {path}:{number}: {message}", file=self.err)
        print(f"imported {report.added} memories ({report.skipped} skipped, {len(report.errors)} bad lines)",
              file=self.out)
        return EXIT_USAGE if report.errors else EXIT_OK

    def cmd_reindex(self) -> int:
        bank = self.bank(verify_model=False)
        done = bank.reindex()
        total = sum(done.values())
        print(f"re-embedded {total} memories of {len(done)} user(s) with {bank.embedder.name}", file=self.out)
        return EXIT_OK


    def cmd_prune(self) -> int:
        bank = self.bank()
        candidates = bank.prune(user_id=self.user, dry_run=self.args.dry_run)
        if not candidates and not self.args.json and not (bank.settings.prune_threshold or bank.settings.cap_per_user
                                                          or bank.settings.cap_per_session):
            print("the forgetting policy is off: set VECMEM_PRUNE_THRESHOLD, VECMEM_CAP_PER_USER or "
                  "VECMEM_CAP_PER_SESSION", file=self.out)
            return EXIT_OK
        if self.args.json:
            self.emit_json([candidate.to_dict() for candidate in candidates])
            return EXIT_OK
        verb = "would archive" if self.args.dry_run else "archived"
        for candidate in candidates:
            print(f"{verb} {candidate.record.id} [{candidate.record.type}, {candidate.record.scope}] "
                  f"{candidate.record.content!r}: {candidate.reason}", file=self.out)
        print(f"{len(candidates)} memories {verb}" + (" (nothing changed)" if self.args.dry_run else ""),
              file=self.out)
        return EXIT_OK

    def cmd_review(self) -> int:
        bank = self.bank()
        queue = bank.review_queue(user_id=self.user)
        if not queue:
            print("the review queue is empty", file=self.out)
        for record in queue:
            print(f"{record.id} [{record.type}, {record.scope}, confidence {record.confidence:.2f}] "
                  f"{record.content}", file=self.out)
            print("[a]pprove, [e]dit, [r]eject, [s]kip? ", end="", file=self.out, flush=True)
            choice = self.stdin.readline().strip().lower()[:1]
            if choice == "a":
                bank.approve(record.id, user_id=self.user)
            elif choice == "e":
                print("corrected text: ", end="", file=self.out, flush=True)
                bank.approve(record.id, user_id=self.user, content=self.stdin.readline().strip())
            elif choice == "r":
                bank.reject(record.id, user_id=self.user)
            elif choice in ("s", ""):
                continue
            else:
                raise UsageError(f"answer a, e, r or s, got {choice!r}")
        return EXIT_OK

    def cmd_approve(self) -> int:
        return self._each(self.bank().approve, "approved")

    def cmd_reject(self) -> int:
        return self._each(self.bank().reject, "rejected")

    def cmd_unarchive(self) -> int:
        return self._each(self.bank().unarchive, "back in retrieval")

    def _each(self, action: Any, done: str) -> int:
        for memory_id in self.args.memory_ids:
            record = action(memory_id, user_id=self.user)
            print(f"{done}: {record.id} {record.content!r}", file=self.out)
        return EXIT_OK

    def cmd_serve(self) -> int:
        from vecmem.interfaces.server import check_binding, create_app  # fastapi and uvicorn only for this command

        import uvicorn

        token = self.args.token or Settings.from_env().api_token
        check_binding(self.args.host, token)
        bank = self.bank()
        print(f"vecmem: serving {bank.location} on http://{self.args.host}:{self.args.port}"
              + (" (bearer token required)" if token else ""), file=self.err, flush=True)
        uvicorn.run(create_app(bank, token=token), host=self.args.host, port=self.args.port, log_level="warning")
        return EXIT_OK

    def cmd_mcp(self) -> int:
        from vecmem.interfaces.mcp_server import create_server  # the MCP SDK only for this command

        create_server(self.bank()).run("stdio")
        return EXIT_OK

    def cmd_doctor(self) -> int:
        report = self.bank(verify_model=False).doctor(repair=self.args.repair)
        if self.args.json:
            self.emit_json(report.to_dict())
            return EXIT_OK if report.healthy else EXIT_FAILURE
        for user, by_type in sorted(report.counts.items()):
            counted = ", ".join(f"{name} {n}" for name, n in by_type.items())
            print(f"user {user!r}: {sum(by_type.values())} memories ({counted})", file=self.out)
        for finding in report.findings:
            state = ("repaired" if finding.repaired
                     else "repairable: --repair" if finding.repairable else "not repairable")
            where = f"user {finding.user_id!r}: " if finding.user_id else ""
            shown = ", ".join(finding.memory_ids[:5]) + (" ..." if len(finding.memory_ids) > 5 else "")
            print(f"{finding.kind}: {where}{finding.detail} [{state}]" + (f" ({shown})" if shown else ""),
                  file=self.out)
        if not report.findings:
            print("no problems found", file=self.out)
        return EXIT_OK if report.healthy else EXIT_FAILURE


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


def _console(out: TextIO) -> Any:
    from rich.console import Console

    # Wide enough for the content column when the output is a file or a pipe rather than a terminal.
    return Console(file=out, width=None if out.isatty() else 160, highlight=False)


def _print_hits(out: TextIO, hits: Sequence["Hit"], settings: Settings) -> None:
    from rich.table import Table

    w = settings.weights
    caption = f"score = {w.similarity:g}·similarity + {w.recency:g}·recency + {w.importance:g}·importance"
    if settings.search_mode == "hybrid":
        dense = settings.dense_weight
        caption += f"; similarity = {dense:g}·dense + {1 - dense:g}·keyword"
    table = Table(caption=caption, show_lines=False)
    for column in ("#", "score", "similarity", "dense", "keyword", "recency", "importance", "type", "scope",
                   "content", "id"):
        table.add_column(column, overflow="fold", justify="right" if column in ("#", "score") else "left")
    for rank, hit in enumerate(hits, start=1):
        table.add_row(
            str(rank),
            f"{hit.score:.4f}",
            f"{hit.similarity:.4f}",
            "-" if hit.dense is None else f"{hit.dense:.4f}",
            "-" if hit.keyword is None else f"{hit.keyword:.4f}",
            f"{hit.recency:.4f}",
            f"{hit.importance:.4f}",
            hit.type,
            hit.record.scope,
            hit.content,
            hit.id,
        )
    if not hits:
        print("no memories found", file=out)
        return
    _console(out).print(table)


def _print_records(out: TextIO, records: Sequence["MemoryRecord"]) -> None:
    from rich.table import Table

    if not records:
        print("no memories", file=out)
        return
    table = Table()
    for column in ("id", "type", "importance", "scope", "content", "tags", "superseded by"):
        table.add_column(column, overflow="fold")
    for record in records:
        table.add_row(
            record.id,
            record.type,
            f"{record.importance:.2f}",
            record.scope,
            record.content,
            ", ".join(record.tags),
            record.superseded_by or "",
        )
    _console(out).print(table)
