"""The write side's dev set: does a new statement replace what it contradicts, keep what is distinct, and
recognise the same statement again? Offline, through the public API, on both write paths.

    python scripts/eval_updates.py                       # data/eval/updates.json, the configured model
    python scripts/eval_updates.py --paths add --verbose # one path, every failure printed

Each case (data/eval/updates.json) tells ``earlier`` statements, then a ``later`` one, to a user of its own, on
a path: ``add`` (``MemoryBank.remember`` of each statement as given) or ``add_messages`` (each statement as a
user message, through the write gate, extraction and the rules). Then, on what is live:

* replace: every memory made from a stale earlier statement is superseded, or no longer says ``outdated``
  (a memory of several facts keeps the others: ``survives`` is still live); the other earlier memories are
  live and unchanged;
* keep: every earlier memory is live and unchanged, and the later statement was stored;
* same: no memory was added (one live memory for the claim);
* and in every case the new value (``value``) is in a live memory.

It prints the share of cases that pass, per path and expected outcome, and per path and category.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from vecmem import MemoryBank, MemoryRecord, Settings

PATHS = ("add", "add_messages")


def _told(bank: MemoryBank, path: str, text: str, user: str) -> list[str]:
    """Tell the statement on the path; the ids of the memories it stored (or that already said it)."""
    if path == "add":
        return [bank.remember(text, user_id=user).record.id]
    learnt = bank.add_messages([{"role": "user", "content": text}], user_id=user)
    return [record.id for record in learnt.written] + list(learnt.unchanged)


def _has(records: list[MemoryRecord], token: str) -> bool:
    return any(token.casefold() in record.content.casefold() for record in records)


def run_case(bank: MemoryBank, case: dict[str, Any], path: str, user: str) -> str | None:
    """None when the case passes on this path, else what went wrong."""
    made: list[list[str]] = []
    before: dict[str, str] = {}
    for text in case["earlier"]:
        ids = _told(bank, path, text, user)
        made.append(ids)
        for memory_id in ids:
            before[memory_id] = bank.get(memory_id, user_id=user).content
    live_before = len(bank.list_memories(user_id=user))
    _told(bank, path, case["later"], user)
    live = bank.list_memories(user_id=user)
    if not _has(live, case["value"]):
        return f"the new value {case['value']!r} is not live: {[m.content for m in live]}"
    stale = set(case.get("stale", range(len(case["earlier"]))) if case["expect"] == "replace" else ())
    for index, ids in enumerate(made):
        for memory_id in ids:
            now = bank.get(memory_id, user_id=user)
            if index in stale:
                if not now.superseded and case["outdated"].casefold() in now.content.casefold():
                    return f"{now.content!r} is still live"
            elif now.superseded or now.content != before[memory_id]:
                return f"{before[memory_id]!r} was {'superseded' if now.superseded else 'rewritten'}"
    if case.get("survives") and not _has(live, case["survives"]):
        return f"{case['survives']!r} was lost: {[m.content for m in live]}"
    if case["expect"] == "keep" and not [m for m in live if m.id not in before]:
        return "the later statement was not stored"
    if case["expect"] == "same" and len(live) != live_before:
        return f"stored again: {[m.content for m in live]}"
    if not made and case["expect"] != "keep":
        return None
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default="data/eval/updates.json")
    parser.add_argument("--paths", nargs="+", choices=PATHS, default=list(PATHS))
    parser.add_argument("--verbose", action="store_true", help="print every failing case")
    args = parser.parse_args(argv)
    data = json.loads(Path(args.data).read_text(encoding="utf-8"))
    cases = data["cases"]
    started = time.perf_counter()
    passed: dict[tuple[str, str], list[bool]] = defaultdict(list)
    by_category: dict[tuple[str, str], list[bool]] = defaultdict(list)
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="vecmem-updates-") as scratch:
        settings = Settings.from_env().with_changes(home=Path(scratch), chroma_url=None, cold_start=False)
        with MemoryBank(settings) as bank:
            print(f"{data.get('name', args.data)}: {len(cases)} cases, model {bank.embed_model}")
            for path in args.paths:
                for number, case in enumerate(cases):
                    problem = run_case(bank, case, path, f"u{number}-{path.replace('_', '-')}")
                    passed[(path, case["expect"])].append(problem is None)
                    by_category[(path, case["category"])].append(problem is None)
                    if problem is not None:
                        failures.append(f"{path:12} {case['id']:32} {problem}")
    print(f"\n{'path':14}{'expected':10}{'cases':>7}{'passed':>9}")
    for (path, expect), results in sorted(passed.items()):
        print(f"{path:14}{expect:10}{len(results):7}{100 * sum(results) / len(results):8.1f}%")
    print(f"\n{'path':14}{'category':18}{'cases':>7}{'passed':>9}")
    for (path, category), results in sorted(by_category.items()):
        print(f"{path:14}{category:18}{len(results):7}{100 * sum(results) / len(results):8.1f}%")
    print(f"\n{len(failures)} failing of {sum(len(r) for r in passed.values())} ({time.perf_counter() - started:.0f} s)")
    if args.verbose:
        print("\n".join(failures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
