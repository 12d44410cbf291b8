"""The other side of test_crash_safety.py, run as its own process.

``import HOME FIRST COUNT``: bulk-import memories crash-FIRST .. crash-(FIRST+COUNT-1) into HOME, printing
``ack N`` each time the first N are acknowledged (written and announced), until killed.
``check HOME``: open the store, print what it holds as one JSON line (ids, duplicates, keyword index agreement).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.conftest import FakeEmbedder
from vecmem import MemoryBank, MemoryRecord, Settings

USER = "crash-user"
TYPES = ("fact", "preference", "instruction", "conclusion")


def record(number: int) -> MemoryRecord:
    return MemoryRecord(id=f"crash-{number}", content=f"note {number} about kestrels and budgets {number % 17}",
                        type=TYPES[number % 4], user_id=USER, scope="global" if number % 3 else f"s{number % 5}")


def bank(home: Path) -> MemoryBank:
    return MemoryBank(Settings(home=home), embedder=FakeEmbedder(dimension=32))


def import_until_killed(home: Path, first: int, count: int) -> None:
    with bank(home) as target:
        print("ready", flush=True)
        target.add_records((record(n) for n in range(first, first + count)),
                           progress=lambda done: print(f"ack {first + done}", flush=True))
    print("done", flush=True)


def check(home: Path) -> None:
    with bank(home) as store:
        exported = [r.id for r in store.export(user_id=USER)]
        index = store._retriever.keyword_index(USER)
        indexed = {memory_id for memory_id in exported if memory_id in index}
        hits = store.search("kestrels budgets", 5, user_id=USER, record_access=False)
        print(json.dumps({
            "ids": sorted(set(exported)),
            "duplicates": len(exported) - len(set(exported)),
            "count": store.count(user_id=USER),
            "index_size": len(index),
            "indexed": len(indexed),
            "hits": len(hits),
        }), flush=True)


if __name__ == "__main__":
    command, home = sys.argv[1], Path(sys.argv[2])
    if command == "import":
        import_until_killed(home, int(sys.argv[3]), int(sys.argv[4]))
    else:
        check(home)
