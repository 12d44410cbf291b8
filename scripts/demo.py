"""`make demo`: a non-interactive walk-through of vecmem on the seed memories, offline, with no API key.

It seeds a fresh store, shows what is stored, asks questions in English and Chinese and shows what each one
retrieves (with the parts of every score) and what the assembled context costs in tokens, then checks
promises out loud: a superseded preference is never retrieved, a session's memory never leaks into another
session, and a question that shares no word with its memory finds it by meaning, in Chinese, in English and
across the two. It exits non-zero if a promise is broken. Uses only the public vecmem API.

    python scripts/demo.py [--home DIR]   # default: a temporary folder, removed afterwards
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from vecmem import MemoryBank, Settings, VecmemError

SEED_FILE = Path(__file__).resolve().parent.parent / "data" / "seed_memories.jsonl"
QUESTIONS = [
    ("write me a sleep function", None),
    ("what is async/await?", None),
    ("how do I see running processes?", None),
    ("帮我写一个 sleep 函数", None),
    ("解释一下 Python 的异步编程", None),
    ("why does the websocket drop after the laptop wakes from sleep?", "demo-debug"),
]
console = Console(highlight=False, width=None if sys.stdout.isatty() else 120)


def show_memories(bank: MemoryBank) -> None:
    table = Table(title="The seeded memories (user 'default')", show_lines=False)
    for column in ("id", "type", "imp.", "scope", "content", "superseded by"):
        table.add_column(column, overflow="fold", no_wrap=column != "content", ratio=1 if column == "content" else None)
    for record in sorted(bank.list_memories(include_superseded=True), key=lambda r: r.id):
        table.add_row(
            record.id, record.type, f"{record.importance:.1f}", record.scope, record.content, record.superseded_by or ""
        )
    console.print(table)


def ask(
    bank: MemoryBank, question: str, session: str | None, *, window: int | None = None, k: int = 5, table: bool = True
) -> None:
    started = time.perf_counter()
    pack = bank.build_context(question, session_id=session, context_tokens=window, k=k)
    elapsed_ms = (time.perf_counter() - started) * 1000
    where = f"session {session}" if session else "no session (global memories only)"
    hits = Table(title=f"“{question}” — {where}", title_justify="left")
    for column in ("#", "score", "similarity", "dense", "keyword", "recency", "importance", "type", "content"):
        hits.add_column(
            column,
            overflow="fold",
            justify="left" if column in ("type", "content") else "right",
            no_wrap=column != "content",
            ratio=1 if column == "content" else None,
        )
    for rank, hit in enumerate(pack.memories, start=1):
        hits.add_row(
            str(rank),
            f"{hit.score:.3f}",
            f"{hit.similarity:.3f}",
            "-" if hit.dense is None else f"{hit.dense:.3f}",
            "-" if hit.keyword is None else f"{hit.keyword:.3f}",
            f"{hit.recency:.3f}",
            f"{hit.importance:.3f}",
            hit.type,
            hit.content + ("  [cut to fit]" if hit.id in pack.truncated_ids else ""),
        )
    if table:
        console.print(hits)
    else:
        console.print(f"“{question}”: kept the {len(pack.memories)} best of {k} candidates")
    tokens = ", ".join(f"{name} {count}/{pack.limits[name]}" for name, count in pack.tokens.items())
    dropped = f"; {len(pack.dropped_ids)} lower-ranked memories dropped to fit" if pack.dropped_ids else ""
    console.print(f"  context tokens (used/share of {window or bank.settings.context_tokens}): {tokens}{dropped}"
                  f"; built in {elapsed_ms:.0f} ms\n")


def check(claim: str, holds: bool) -> bool:
    console.print(f"  {'[green]✔' if holds else '[red]✘'} {claim}[/]")
    return holds


def promises(bank: MemoryBank) -> bool:
    console.rule("Two promises, checked")
    editor = bank.search("which code editor should I set up?", 5, record_access=False)
    old = bank.get("seed-en-editor-vscode")
    console.print(f"  '{old.content}' was superseded by {old.superseded_by}: '{bank.get(old.superseded_by).content}'")
    console.print(f"  “which code editor should I set up?” -> {[hit.content for hit in editor[:2]]}")
    ok = check("the superseded VS Code preference is not retrieved", all(hit.id != old.id for hit in editor))
    ok &= check("its replacement (Neovim) is the top hit", editor[0].id == old.superseded_by)

    question = "why does the websocket drop after the laptop wakes from sleep?"
    own = [hit.id for hit in bank.search(question, 5, session_id="demo-debug", record_access=False)]
    other = [hit.id for hit in bank.search(question, 50, session_id="demo-refactor", record_access=False)]
    none = [hit.id for hit in bank.search(question, 50, record_access=False)]
    ok &= check("session demo-debug finds its own memory about waking from sleep", "seed-s1-sleep-wake" in own)
    ok &= check("session demo-refactor never sees it (top 50 searched)", "seed-s1-sleep-wake" not in other)
    ok &= check("a search without a session never sees it either", "seed-s1-sleep-wake" not in none)
    return bool(ok)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--home", type=Path, help="store folder (default: a fresh temporary folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vecmem-demo-") as scratch:
        home = args.home or Path(scratch)
        try:
            return run(home)
        except VecmemError as exc:
            print(f"demo: error: {exc}", file=sys.stderr)
            return 1


def run(home: Path) -> int:
    console.rule("vecmem demo — long-term memory, offline")
    started = time.perf_counter()
    with MemoryBank(Settings.from_env().with_changes(home=home, chroma_url=None)) as bank:
        return walk_through(bank, started)


def walk_through(bank: MemoryBank, started: float) -> int:
    report = bank.import_jsonl(SEED_FILE.read_text(encoding="utf-8").splitlines())
    console.print(
        f"Seeded {report.added} memories into {bank.location} with {bank.embedder.name} "
        f"({bank.embedder.dimension} dims) in {time.perf_counter() - started:.1f} s (model load included).\n"
    )
    show_memories(bank)

    console.rule("Questions: what each one retrieves, and what the prompt costs")
    w = bank.settings.dense_weight
    console.print(
        f"score = 0.6·similarity + {'max(1 - similarity, 0.2)·' if bank.settings.weights.gated else ''}"
        "(0.2·recency + 0.2·importance); recency = exp(-0.01·days since last use)\n"
        f"similarity ({bank.settings.search_mode}) = {w:g}·dense + {1 - w:g}·keyword, each side from chance (0) to "
        "the query's best match (1) and weighed by how informative it is for the query\n"
    )
    for question, session in QUESTIONS:
        ask(bank, question, session)
    console.print("The same question in a small 1,000-token window: the long-term share is 250 tokens.")
    ask(bank, "write me a sleep function", None, window=1000, k=20, table=False)
    return 0 if promises(bank) & by_meaning(bank) else 1


# memories of another user, and questions that share no word with them: found by meaning, in either language
MEANING_MEMORIES = ["我在腾讯做产品经理", "我住在杭州", "我喜欢喝乌龙茶", "I have a cat named Mochi", "I go swimming on Fridays"]
MEANING_QUESTIONS = [("我在哪个公司工作？", "我在腾讯做产品经理"), ("Which city is my home?", "我住在杭州"),
                     ("我养了什么宠物？", "I have a cat named Mochi")]


def by_meaning(bank: MemoryBank) -> bool:
    console.rule(f"By meaning, across Chinese and English ({bank.embedder.name})")
    for text in MEANING_MEMORIES:
        bank.add(text, user_id="demo-lin")
    ok = True
    for question, expected in MEANING_QUESTIONS:
        hits = bank.search(question, 3, user_id="demo-lin", record_access=False)
        console.print(f"  “{question}” -> {[hit.content for hit in hits]}")
        ok &= check(f"“{expected}” is the top hit, with no word in common", bool(hits) and hits[0].content == expected)
    return bool(ok)


if __name__ == "__main__":
    sys.exit(main())
