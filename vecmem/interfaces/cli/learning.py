"""`vecmem learn [FILE]`: learn from chat messages as the chat's memory agent does (``MemoryBank.add_messages``).

**Input** (FILE, or standard input when FILE is absent or ``-``), UTF-8, one message per line; blank lines are
ignored:

* a line of plain text is a **user** message ("我住在杭州", "I prefer concise code");
* a line that begins with ``{`` is a JSON object ``{"role": "user" | "assistant" | "system", "content": text}``
  with an optional ``"id"`` (JSON Lines, such as a chat log exported by an application), so assistant replies
  can be given as the context of the user message before them. A line that begins with ``{`` and is not such an
  object is a mistake, reported with its line number (nothing is learnt then).

Each user message goes through the write gate, extraction and supersession (offline rules, or the configured
chat model), assistant and system messages are context only (bank/learning.py). A message without its
own id records its line number as its provenance. More lines than one call takes (``MAX_MESSAGES``) are sent
in parts of that many.

**Output**: a line per memory learnt and per replacement, the memories already remembered and the lines the
gate skipped, and a count; ``--json`` the same as one object (``AddMessagesResult.to_dict``, each skipped message
with its ``line``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from vecmem.bank.learning import MAX_MESSAGES, AddMessagesResult, SkippedMessage
from vecmem.errors import InvalidInputError
from vecmem.interfaces.cli.command import EXIT_OK, CommandGroup, Context, UsageError, arg

__all__ = ["commands", "parse_messages"]

commands = CommandGroup()


def parse_messages(text: str, where: str) -> list[tuple[int, dict[str, Any]]]:
    """(line number, message) for each non-blank line of ``text`` (``where``: the file's name, for mistakes)."""
    found = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("{"):
            found.append((number, {"role": "user", "content": stripped, "id": number}))
            continue
        try:
            message = json.loads(stripped)
        except json.JSONDecodeError as exc:
            raise UsageError(f"{where}:{number}: not a JSON message ({exc.msg}); a line that "
                             "begins with '{' must be {\"role\": ..., \"content\": ...}") from None
        if not isinstance(message, dict):
            raise UsageError(f"{where}:{number}: a JSON message must be an object")
        message.setdefault("id", number)
        found.append((number, message))
    return found


def _read(ctx: Context, path: Path | None) -> tuple[str, str]:
    """The input's text and its name."""
    if path is None or str(path) == "-":
        try:
            return ctx.stdin.read(), "<stdin>"
        except UnicodeDecodeError:
            raise UsageError("standard input is not UTF-8 text") from None
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except UnicodeDecodeError:
        raise UsageError(f"{path} is not UTF-8 text") from None
    except OSError as exc:
        raise InvalidInputError("file", f"cannot read {path}: {exc.strerror or exc}") from None


def _learnt(ctx: Context, lines: list[tuple[int, dict[str, Any]]], where: str) -> tuple[AddMessagesResult, list[int]]:
    """Everything the parts taught, as one result, and the line of each skipped message."""
    bank = ctx.bank()
    written: dict[str, Any] = {}
    replaced: list[tuple[str, str]] = []
    unchanged: dict[str, None] = {}
    skipped: list[SkippedMessage] = []
    skipped_lines: list[int] = []
    for start in range(0, len(lines), MAX_MESSAGES):
        part = lines[start:start + MAX_MESSAGES]
        try:
            result = bank.add_messages([message for _, message in part], user_id=ctx.user,
                                       session_id=ctx.args.session)
        except InvalidInputError as exc:  # messages[3].role -> FILE:line
            raise UsageError(f"{where}:{_line_of(exc.field, part)}: {exc.reason}") from None
        for record in result.written:
            written[record.id] = record
        replaced.extend(result.replaced)
        unchanged.update(dict.fromkeys(result.unchanged))
        skipped.extend(result.skipped)
        skipped_lines.extend(part[message.index][0] for message in result.skipped)
    if written:  # as stored at the end: one replaced by a later part says so
        written = {memory_id: bank.get(memory_id, user_id=ctx.user) for memory_id in written}
    return AddMessagesResult(tuple(written.values()), tuple(replaced), tuple(skipped), tuple(unchanged)), skipped_lines


def _line_of(field: str | None, part: list[tuple[int, dict[str, Any]]]) -> str:
    """The line a field such as ``messages[3].role`` names, with the rest of the field ("12 (role)")."""
    if field and field.startswith("messages[") and "]" in field:
        index, rest = field[len("messages["):].split("]", 1)
        if index.isdigit() and int(index) < len(part):
            return f"{part[int(index)][0]}" + (f" ({rest.lstrip('.')})" if rest.strip(".") else "")
    return field or "?"


@commands.command(
    "learn", "learn from chat messages, one a line (FILE or stdin), as the chat does: gate, extraction, supersession",
    arg("file", nargs="?", type=Path, metavar="FILE",
        help="one message a line: plain text is a user message; a line beginning with '{' is a JSON message "
             '{"role": "user"|"assistant"|"system", "content": ...}; default or "-": standard input'),
    arg("--session", help="the conversation's session: session-scoped statements stay in it"),
    arg("--json", action="store_true"),
)
def learn(ctx: Context) -> int:
    text, where = _read(ctx, ctx.args.file)
    lines = parse_messages(text, where)
    if not lines:
        raise UsageError(f"{where} holds no messages (one a line)")
    result, skipped_lines = _learnt(ctx, lines, where)
    if ctx.args.json:
        data = result.to_dict()
        for item, line in zip(data["skipped"], skipped_lines, strict=True):
            item["line"] = line
        ctx.emit_json(data)
        return EXIT_OK
    for record in result.written:
        state = f" ({record.status})" if record.status != "live" else ""
        if record.superseded:  # by a later message of the same input
            state = f" (replaced since by {record.superseded_by})"
        print(f"learnt {record.id} [{record.type}, {record.scope}] \"{record.content}\"{state}", file=ctx.out)
    for old, new in result.replaced:
        print(f"replaced {old} by {new} (`vecmem restore {old}` undoes it)", file=ctx.out)
    for memory_id in result.unchanged:
        print(f"already remembered as {memory_id}", file=ctx.out)
    for message, line in zip(result.skipped, skipped_lines, strict=True):
        print(f"skipped line {line}: {message.reason} ({message.stage})", file=ctx.out)
    print(f"{len(result.written)} learnt, {len(result.replaced)} replaced, {len(result.unchanged)} already "
          f"remembered, {len(result.skipped)} skipped, from {len(lines)} message{'s' if len(lines) != 1 else ''}",
          file=ctx.out)
    return EXIT_OK
