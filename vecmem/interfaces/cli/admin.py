"""`vecmem` commands that look after the store as a whole and serve it: reindex, prune, the review queue
(review, approve, reject, unarchive), serve, proxy, their API keys (keys), mcp, doctor and claim. Each is declared
on its handler (see cli/command.py)."""

from __future__ import annotations

import argparse
import contextlib
import socket
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO

from vecmem.interfaces.cli.command import EXIT_FAILURE, EXIT_OK, CommandGroup, Context, UsageError, arg, positive_int

if TYPE_CHECKING:
    from vecmem.bank.api import MemoryApi
    from vecmem.interfaces.http.keys import KeyStore
    from vecmem.models import MemoryRecord

__all__ = ["commands"]

commands = CommandGroup()
_JSON = arg("--json", action="store_true")
_IDS = arg("memory_ids", metavar="ID", nargs="+")
_WILDCARDS = ("0.0.0.0", "::", "")  # every address: not a name a client sends


@commands.command("reindex", "re-embed every memory with the configured embedding model", per_user=False)
def reindex(ctx: Context) -> int:
    from vecmem.bank.facade import MemoryBank

    bank = ctx.bank(verify_model=False)  # the point is to replace the vectors of another model
    # counted per user where the store is open here (no scan); an owner process is asked for its stats
    total = (sum(bank.count(user_id=user) for user in bank.users()) if isinstance(bank, MemoryBank)
             else bank.stats().count)
    with _progress(ctx.err, total) as progress:
        done = bank.reindex(progress=progress)
    print(f"re-embedded {sum(done.values())} memories of {len(done)} user(s) with {bank.embed_model}",
          file=ctx.out)
    return EXIT_OK


@contextlib.contextmanager
def _progress(stream: TextIO, total: int) -> Iterator[Callable[[int], None]]:
    """A progress report of a reindex (memories done of ``total``, rate, time left) on ``stream``: rich's bar on a
    terminal, a plain line every few seconds elsewhere (a log keeps lines, not redrawn bars). Memories a killed
    run had re-embedded count as done at once, so the rate starts high and settles."""
    if stream.isatty():
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeRemainingColumn,
        )

        columns = (TextColumn("reindexing"), BarColumn(), MofNCompleteColumn(), TaskProgressColumn(),
                   TextColumn("{task.fields[rate]} memories/s"), TimeRemainingColumn())
        with Progress(*columns, console=Console(file=stream), transient=True) as bar:
            task = bar.add_task("reindex", total=total, rate="-")

            def advance(count: int) -> None:
                bar.advance(task, count)
                speed = bar.tasks[0].speed
                bar.update(task, rate="-" if speed is None else f"{speed:,.0f}")

            yield advance
        return
    report = _PlainProgress(stream, total)
    yield report.advance
    report.line()


class _PlainProgress:
    """One line per ``_EVERY_S`` seconds: done / total, the rate since the start, the time left at that rate."""

    _EVERY_S = 5.0

    def __init__(self, stream: TextIO, total: int) -> None:
        self.stream, self.total, self.done = stream, total, 0
        self.started = self.last = time.monotonic()

    def advance(self, count: int) -> None:
        self.done += count
        if time.monotonic() - self.last >= self._EVERY_S:
            self.line()

    def line(self) -> None:
        self.last = time.monotonic()
        rate = self.done / max(self.last - self.started, 1e-9)
        left = f", about {_duration((self.total - self.done) / rate)} left" if rate and self.done < self.total else ""
        print(f"reindexing: {self.done:,}/{self.total:,} memories, {rate:,.0f}/s{left}", file=self.stream,
              flush=True)


def _duration(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"


@commands.command(
    "prune", "archive what the forgetting policy selects (VECMEM_PRUNE_THRESHOLD, VECMEM_CAP_*)",
    arg("--dry-run", action="store_true", help="only list what would be archived, and why"),
    _JSON,
)
def prune(ctx: Context) -> int:
    bank = ctx.bank()
    candidates = bank.prune(user_id=ctx.user, dry_run=ctx.args.dry_run)
    policy = bank.settings
    if not candidates and not ctx.args.json and not (policy.prune_threshold or policy.cap_per_user
                                                     or policy.cap_per_session):
        print("the forgetting policy is off: set VECMEM_PRUNE_THRESHOLD, VECMEM_CAP_PER_USER or "
              "VECMEM_CAP_PER_SESSION", file=ctx.out)
        return EXIT_OK
    if ctx.args.json:
        ctx.emit_json([candidate.to_dict() for candidate in candidates])
        return EXIT_OK
    verb = "would archive" if ctx.args.dry_run else "archived"
    for candidate in candidates:
        print(f"{verb} {candidate.record.id} [{candidate.record.type}, {candidate.record.scope}] "
              f"{candidate.record.content!r}: {candidate.reason}", file=ctx.out)
    print(f"{len(candidates)} memories {verb}" + (" (nothing changed)" if ctx.args.dry_run else ""), file=ctx.out)
    return EXIT_OK


@commands.command("review", "go through the review queue: approve, edit, reject or skip each pending memory")
def review(ctx: Context) -> int:
    bank = ctx.bank()
    queue = bank.review_queue(user_id=ctx.user)
    if not queue:
        print("the review queue is empty", file=ctx.out)
    for record in queue:
        print(f"{record.id} [{record.type}, {record.scope}, confidence {record.confidence:.2f}] "
              f"{record.content}", file=ctx.out)
        print("[a]pprove, [e]dit, [r]eject, [s]kip? ", end="", file=ctx.out, flush=True)
        choice = ctx.stdin.readline().strip().lower()[:1]
        if choice == "a":
            bank.approve(record.id, user_id=ctx.user)
        elif choice == "e":
            print("corrected text: ", end="", file=ctx.out, flush=True)
            bank.approve(record.id, user_id=ctx.user, content=ctx.stdin.readline().strip())
        elif choice == "r":
            bank.reject(record.id, user_id=ctx.user)
        elif choice in ("s", ""):
            continue
        else:
            raise UsageError(f"answer a, e, r or s, got {choice!r}")
    return EXIT_OK


def _each(ctx: Context, action: Callable[..., MemoryRecord], done: str) -> int:
    """Apply ``action`` to every ID given, reporting each as it is done."""
    for memory_id in ctx.args.memory_ids:
        record = action(memory_id, user_id=ctx.user)
        print(f"{done}: {record.id} {record.content!r}", file=ctx.out)
    return EXIT_OK


@commands.command("approve", "let a pending memory into retrieval", _IDS)
def approve(ctx: Context) -> int:
    return _each(ctx, ctx.bank().approve, "approved")


@commands.command("reject", "delete a pending memory for good", _IDS)
def reject(ctx: Context) -> int:
    return _each(ctx, ctx.bank().reject, "rejected")


@commands.command("unarchive", "bring an archived memory back into retrieval", _IDS)
def unarchive(ctx: Context) -> int:
    return _each(ctx, ctx.bank().unarchive, "back in retrieval")


def tcp_port(text: str) -> int:
    """An argparse type: a TCP port, 1-65535."""
    port = positive_int(text)
    if port > 65535:
        raise argparse.ArgumentTypeError(f"a TCP port is 1-65535, got {port}")
    return port


_HOST = arg("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
_TOKEN = arg("--token", help="admin key required of every request (default: VECMEM_API_TOKEN); a token or keys from "
                             "`vecmem keys create` are needed to bind anything but loopback")
_ALLOW_HOST = arg("--allow-host", action="append", default=[], metavar="NAME",
                  help="a Host name clients may use besides 127.0.0.1, localhost and [::1] (repeatable); the --host "
                       "address is allowed by itself unless it is a wildcard such as 0.0.0.0")
AppFactory = Callable[["MemoryApi", "str | None", "KeyStore", list[str]], Any]  # (bank, token, keys, allowed hosts)


@commands.command(
    "serve", "the HTTP API (JSON; OpenAPI at /openapi.json) and the memory panel at /",
    _HOST, arg("--port", type=tcp_port, default=8765), _TOKEN, _ALLOW_HOST,
    per_user=False,
)
def serve(ctx: Context) -> int:
    from vecmem.interfaces.http.app import create_app  # fastapi only for this command

    return _serve(ctx, "vecmem serve", "serving {location}", lambda bank, token, keys, allowed: create_app(
        bank, token=token, keys=keys, allowed_hosts=allowed))


@commands.command(
    "proxy", "an OpenAI-compatible chat-completions endpoint (/v1) that forwards to the configured model, puts the "
             "user's memories into each request and learns from each exchange",
    _HOST, arg("--port", type=tcp_port, default=8766), _TOKEN, _ALLOW_HOST,
    per_user=False,
)
def proxy(ctx: Context) -> int:
    from vecmem.agent.llm import chat_completions_from_settings
    from vecmem.interfaces.proxy.server import create_proxy_app

    upstream = chat_completions_from_settings(ctx.settings())
    if upstream is None:
        raise UsageError("the proxy forwards to a model server: set OPENAI_BASE_URL (any OpenAI-compatible "
                         "server) and/or OPENAI_API_KEY (OpenAI's)")
    return _serve(ctx, "vecmem proxy", f"proxying {upstream.where} with the memories of {{location}}",
                  lambda bank, token, keys, allowed: create_proxy_app(bank, upstream, token=token, keys=keys,
                                                                      allowed_hosts=allowed), base="/v1")


def _serve(ctx: Context, program: str, doing: str, app_for: AppFactory, *, base: str = "") -> int:
    """Serve ``app_for(bank, token, keys, allowed hosts)`` on --host/--port with uvicorn until stopped; ``doing``
    says what, with ``{location}`` the store, and ``base`` is the path clients start from."""
    import uvicorn

    from vecmem.interfaces.http.keys import KeyStore  # uvicorn, and the app's SDK, only for these commands
    from vecmem.interfaces.http.security import check_binding
    from vecmem.interfaces.owner.handover import long_running_bank
    from vecmem.interfaces.stopping import serve_until_stopped, stops_cleanly

    settings = ctx.settings()
    host, port = ctx.args.host, ctx.args.port
    token = ctx.args.token or settings.api_token
    keys = KeyStore.open(settings)
    check_binding(host, token, keys=keys.any_valid())
    allowed = [*settings.allowed_hosts, *ctx.args.allow_host, *([] if host in _WILDCARDS else [host])]
    try:  # bound before saying "serving", so a port in use is one clear line
        listening = socket.create_server((host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET)
    except OSError as exc:
        print(f"vecmem: error: cannot listen on {host}:{port}: {exc.strerror or exc}", file=ctx.err)
        return EXIT_FAILURE
    def say(line: str) -> None:  # when the owner it went through goes: who holds the store now
        print(line, file=ctx.err, flush=True)

    with stops_cleanly(), listening, contextlib.closing(keys), long_running_bank(
            settings, program=program, factory=ctx.bank_factory, say=say) as bank:
        keyed = " (an API key required)" if token or keys.any_valid() else ""
        whose = f"{bank.location}, {bank.whose()},"  # its own store, or the one the chat (pid N) holds
        print(f"vecmem: {doing.format(location=whose)} on http://{host}:{port}{base}{keyed}", file=ctx.err,
              flush=True)
        # SIGTERM and Ctrl-C: uvicorn finishes the requests under way and runs the app's shutdown (the proxy
        # learns what it queued), then the bank is closed and the exit status is 0 (stopping.py)
        server = uvicorn.Server(uvicorn.Config(app_for(bank, token, keys, allowed), log_level="warning"))
        serve_until_stopped(lambda: server.run(sockets=[listening]))
    return EXIT_OK


@commands.command(
    "keys", "API keys of `vecmem serve`: create --user U | create --admin | list | revoke ID",
    arg("action", choices=("create", "list", "revoke")),
    arg("key_id", metavar="ID", nargs="?", help="the key to revoke (see `vecmem keys list`)"),
    arg("--admin", action="store_true", help="create an admin key (every user, store-wide routes)"),
    _JSON,
)
def keys(ctx: Context) -> int:
    from vecmem.interfaces.http.keys import KeyStore

    store = KeyStore.open(ctx.settings())
    try:
        return _keys_action(ctx, store)
    finally:
        store.close()


def _keys_action(ctx: Context, store: KeyStore) -> int:
    action, user = ctx.args.action, ctx.user
    if action != "revoke" and ctx.args.key_id is not None:
        raise UsageError(f"`vecmem keys {action}` takes no ID")
    if action == "create":
        if ctx.args.admin == (user is not None):
            raise UsageError("say whose key it is: `vecmem keys create --user USER` or `vecmem keys create --admin`")
        key, secret = store.create(user)
        if ctx.args.json:
            ctx.emit_json({**key.to_dict(), "key": secret})
        else:
            print(secret, file=ctx.out)
            print(f"created key {key.id} for " + ("the admin" if key.user_id is None else f"user {key.user_id!r}")
                  + ": the line above is the key, shown this once (send it as Authorization: Bearer <key>)",
                  file=ctx.err)
        return EXIT_OK
    if ctx.args.admin or user is not None:
        raise UsageError(f"`vecmem keys {action}` takes no --user or --admin")
    if action == "list":
        listed = store.list()
        if ctx.args.json:
            ctx.emit_json([key.to_dict() for key in listed])
        for key in [] if ctx.args.json else listed:
            whose = "admin" if key.user_id is None else f"user {key.user_id!r}"
            state = f"revoked {key.revoked_at}" if key.revoked_at else "valid"
            print(f"{key.id} {whose}, created {key.created_at}, {state}", file=ctx.out)
        if not listed and not ctx.args.json:
            print("no API keys (create one with `vecmem keys create --user USER` or `--admin`)", file=ctx.out)
        return EXIT_OK
    if ctx.args.key_id is None:
        raise UsageError("say which key: `vecmem keys revoke ID` (see `vecmem keys list`)")
    revoked = store.revoke(ctx.args.key_id)
    print(f"revoked key {revoked.id} at {revoked.revoked_at}", file=ctx.out)
    return EXIT_OK


@commands.command("mcp", "a Model Context Protocol server on stdio: remember, recall, forget, list_memories",
                  per_user=False)
def mcp(ctx: Context) -> int:
    from vecmem.interfaces.mcp_server import create_server, warm_start  # the MCP SDK only for this command
    from vecmem.interfaces.owner.handover import long_running_bank
    from vecmem.interfaces.stopping import run_loop, serve_until_stopped, stops_cleanly

    # the end of stdin (the client closed it), SIGTERM and Ctrl-C all stop it the same way: the warm-up joined
    # (it may be inside the model's native code: see stopping.py), then the bank closed, then exit status 0; the
    # SDK's stdio transport in a loop whose closing no stop can interrupt (``run_loop``), not the SDK's run()
    with stops_cleanly(), long_running_bank(ctx.settings(), program="vecmem mcp", factory=ctx.bank_factory) as bank:
        server = create_server(bank)
        warming = warm_start(bank)
        try:
            serve_until_stopped(lambda: run_loop(server.run_stdio_async))
        finally:
            warming.join()
    return EXIT_OK


@commands.command(
    "doctor", "examine the store; exit 1 while problems remain (--repair mends what it safely can)",
    arg("--repair", action="store_true", help="mend what can be mended without guessing"),
    _JSON,
    per_user=False,
)
def doctor(ctx: Context) -> int:
    report = ctx.bank(verify_model=False).doctor(repair=ctx.args.repair)  # a model mismatch is a finding
    if ctx.args.json:
        ctx.emit_json(report.to_dict())
        return EXIT_OK if report.healthy else EXIT_FAILURE
    for user, by_type in sorted(report.counts.items()):
        counted = ", ".join(f"{name} {n}" for name, n in by_type.items())
        print(f"user {user!r}: {sum(by_type.values())} memories ({counted})", file=ctx.out)
    for finding in report.findings:
        state = ("repaired" if finding.repaired
                 else "repairable: --repair" if finding.repairable else "not repairable")
        where = f"user {finding.user_id!r}: " if finding.user_id else ""
        shown = ", ".join(finding.memory_ids[:5]) + (" ..." if len(finding.memory_ids) > 5 else "")
        print(f"{finding.kind}: {where}{finding.detail} [{state}]" + (f" ({shown})" if shown else ""),
              file=ctx.out)
    if not report.findings:
        print("no problems found", file=ctx.out)
    return EXIT_OK if report.healthy else EXIT_FAILURE


@commands.command(
    "claim", "make this process's state (VECMEM_HOME's files, or VECMEM_DATABASE_URL) the one the store is shared "
             "through, replacing the state another home or database claimed it for",
    arg("--yes", action="store_true", help="needed to take the store over without a question at a terminal"),
    per_user=False,
)
def claim(ctx: Context) -> int:
    from vecmem.bank.opening import claim_store  # Chroma only for this command

    if not ctx.args.yes:
        if not ctx.stdin.isatty():
            raise UsageError("claim: give --yes to take the store over (every process still using the old state "
                             "must be stopped first)")
        print("Every process still writing through the old state must be stopped first; access statistics, "
              "sessions and keys of the old state stay behind. Take the store over? [y/N] ", end="", file=ctx.out,
              flush=True)
        if ctx.stdin.readline().strip().lower() not in ("y", "yes"):
            print("nothing changed", file=ctx.out)
            return EXIT_OK
    settings = ctx.settings()
    from vecmem.retrieval.embedding.embedders import canonical_model_name, default_model  # numpy: not for every command

    where = claim_store(settings, canonical_model_name(settings.embed_model or default_model()))
    print(f"the store is now shared through the state in {where}", file=ctx.out)
    return EXIT_OK
