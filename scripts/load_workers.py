"""Load several `vecmem serve` workers of one store at once, then check that no acknowledged write was lost.

    python scripts/load_workers.py --url http://127.0.0.1:8001 --url http://127.0.0.1:8002 \\
        --threads 8 --operations 2000 [--users 4] [--token KEY] [--json]

Every request goes to the next worker in turn (round robin, per thread). Each thread runs a fixed number of mixed
operations over a few users: add, edit its own memories, supersede and restore them, forget, get, list, search,
and change one field of memories every thread shares (each shared field belongs to one thread, so the field's
last acknowledged value is known while several threads change the same memories at once: field-level merges
are what is tested). After an add, the next worker is asked for it at once (read-your-writes across workers).

At the end every acknowledged write is checked through every worker: a write no worker reflects is **lost**, one
a worker does not reflect (while another does) is **stale**, as are read-your-writes misses during the run. Any
5xx, connection failure or unexpected 4xx is an **error**. Printed: requests, errors by kind, acknowledged writes,
lost, stale, and p50 / p99 latency per operation and overall. Exit code 1 when anything was lost, stale or failed.
Only the HTTP API is used (the workers' OpenAPI description documents every route).
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

SHARED_FIELDS = ("importance", "tags", "confidence", "context")  # each owned by one thread
SHARED_PER_USER = 3
WORDS = ("amber", "basil", "cedar", "dune", "ember", "fjord", "garnet", "heron", "indigo", "juniper", "kelp",
         "lichen", "mesa", "nectar", "onyx", "pumice", "quartz", "rowan", "saffron", "tundra", "umber", "vetch")


class Worker:
    """One keep-alive connection to one worker (a connection is used by one thread only)."""

    def __init__(self, url: str, token: str | None) -> None:
        parts = urlsplit(url)
        self.url = url
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.headers = {"Content-Type": "application/json", "X-Vecmem-Request": "1"}
        if token:
            self.headers["Authorization"] = f"Bearer {token}"
        self.connection: http.client.HTTPConnection | None = None

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """(status, decoded JSON) of one request; status 0 when the connection failed (retried once)."""
        payload = None if body is None else json.dumps(body).encode("utf-8")
        for attempt in range(2):
            try:
                if self.connection is None:
                    self.connection = http.client.HTTPConnection(self.host, self.port, timeout=60)
                self.connection.request(method, path, body=payload, headers=self.headers)
                response = self.connection.getresponse()
                data = response.read()
                try:
                    return response.status, json.loads(data) if data else None
                except ValueError:
                    return response.status, data.decode("utf-8", "replace")
            except (OSError, http.client.HTTPException) as exc:
                if self.connection is not None:
                    self.connection.close()
                self.connection = None
                if attempt:
                    return 0, str(exc)
        return 0, "unreachable"


@dataclass
class Own:
    """What one thread knows it wrote to one of its memories (acknowledged writes only)."""

    user: str
    content: str
    superseded_by: str | None = None
    forgotten: bool = False


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: Counter[str] = field(default_factory=Counter)
    acknowledged: int = 0
    stale_reads: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def ack(self) -> None:
        with self.lock:
            self.acknowledged += 1

    def stale(self) -> None:
        with self.lock:
            self.stale_reads += 1

    def record(self, operation: str, seconds: float, status: int, expected: tuple[int, ...], detail: Any) -> bool:
        with self.lock:
            self.latencies[operation].append(seconds)
            if status in expected:
                return True
            kind = "connection" if status == 0 else f"{status}"
            self.errors[f"{operation} {kind}"] += 1
            if len(self.errors) <= 10 and sum(self.errors.values()) <= 10:
                print(f"unexpected {operation} {status}: {str(detail)[:300]}", file=sys.stderr)
            return False


class LoadThread(threading.Thread):
    def __init__(self, number: int, urls: list[str], token: str | None, users: list[str], operations: int,
                 shared: dict[str, list[str]], tally: Tally, seed: int) -> None:
        super().__init__(name=f"load-{number}")
        self.number = number
        self.workers = [Worker(url, token) for url in urls]
        self.turn = number  # threads start on different workers
        self.users, self.operations, self.shared, self.tally = users, operations, shared, tally
        self.random = random.Random(seed)
        self.own: dict[str, Own] = {}
        self.field = SHARED_FIELDS[number] if number < len(SHARED_FIELDS) else None
        self.field_values: dict[tuple[str, str], Any] = {}  # (user, id) -> last acknowledged value of my field

    def next_worker(self) -> Worker:
        self.turn += 1
        return self.workers[self.turn % len(self.workers)]

    def call(self, operation: str, method: str, path: str, body: Any = None,
             expected: tuple[int, ...] = (200, 201)) -> tuple[bool, Any]:
        started = time.perf_counter()
        status, data = self.next_worker().call(method, path, body)
        ok = self.tally.record(operation, time.perf_counter() - started, status, expected, data)
        return ok, data

    def run(self) -> None:
        choices = ["add", "edit", "shared", "get", "search", "list", "forget", "supersede"]
        weights = [25, 12, 15 if self.field else 0, 10, 20, 5, 5, 8]
        for _ in range(self.operations):
            getattr(self, f"do_{self.random.choices(choices, weights)[0]}")()

    def _phrase(self) -> str:
        return " ".join(self.random.sample(WORDS, 3)) + f" {uuid.uuid4().hex[:8]}"

    def _mine(self, *, live: bool = True) -> tuple[str, Own] | None:
        candidates = [(i, o) for i, o in self.own.items() if not o.forgotten and (not live or not o.superseded_by)]
        return self.random.choice(candidates) if candidates else None

    def do_add(self) -> None:
        user = self.random.choice(self.users)
        content = f"thread {self.number} noted {self._phrase()}"
        # stored as given: the load checks that no acknowledged write is lost, not what an add resolves
        ok, data = self.call("add", "POST", f"/memories?user={quote(user)}", {"content": content, "resolve": False})
        if not ok:
            return
        self.own[data["id"]] = Own(user, content)
        self.tally.ack()
        ok, hits = self.call("search", "POST", f"/search?user={quote(user)}", {"query": content, "k": 5})
        if ok and data["id"] not in {hit["id"] for hit in hits}:  # another worker than the one that wrote it
            self.tally.stale()

    def do_edit(self) -> None:
        mine = self._mine()
        if mine is None:
            return self.do_add()
        memory_id, own = mine
        content = f"thread {self.number} revised {self._phrase()}"
        ok, _ = self.call("edit", "PATCH", f"/memories/{quote(memory_id)}?user={quote(own.user)}", {"content": content})
        if ok:
            own.content = content
            self.tally.ack()

    def do_shared(self) -> None:
        user = self.random.choice(self.users)
        memory_id = self.random.choice(self.shared[user])
        value: Any = {"importance": round(self.random.uniform(0.05, 0.95), 3),
                      "tags": [f"t{self.number}-{self.random.randrange(1000)}"],
                      "confidence": round(self.random.uniform(0.5, 1.0), 3),
                      "context": f"context {self._phrase()}"}[self.field or ""]
        ok, _ = self.call("shared", "PATCH", f"/memories/{quote(memory_id)}?user={quote(user)}", {self.field: value})
        if ok:
            self.field_values[(user, memory_id)] = value
            self.tally.ack()

    def do_get(self) -> None:
        mine = self._mine(live=False)
        if mine is None:
            return
        memory_id, own = mine
        ok, data = self.call("get", "GET", f"/memories/{quote(memory_id)}?user={quote(own.user)}")
        if ok and (data["content"] != own.content or data["superseded_by"] != own.superseded_by):
            self.tally.stale()

    def do_search(self) -> None:
        user = self.random.choice(self.users)
        self.call("search", "POST", f"/search?user={quote(user)}", {"query": self._phrase(), "k": 5})

    def do_list(self) -> None:
        user = self.random.choice(self.users)
        self.call("list", "GET", f"/memories?user={quote(user)}&limit=20")

    def do_forget(self) -> None:
        mine = self._mine()
        if mine is None:
            return
        memory_id, own = mine
        ok, _ = self.call("forget", "DELETE", f"/memories/{quote(memory_id)}?user={quote(own.user)}")
        if ok:
            own.forgotten = True
            for other in self.own.values():  # what it had replaced is live again (or replaced by its successor)
                if other.superseded_by == memory_id:
                    other.superseded_by = None
            self.tally.ack()

    def do_supersede(self) -> None:
        """Replace one of my live memories by a newer one of the same user, or restore a replaced one."""
        replaced = [(i, o) for i, o in self.own.items() if o.superseded_by and not o.forgotten
                    and self.own[o.superseded_by].superseded_by is None]  # its successor live: restorable exactly
        if replaced and self.random.random() < 0.4:
            memory_id, own = self.random.choice(replaced)
            newer = self.own[own.superseded_by or ""]
            ok, _ = self.call("restore", "POST", f"/memories/{quote(memory_id)}/restore?user={quote(own.user)}")
            if ok:  # the restored one is live, and the one that replaced it is superseded by it
                own.superseded_by, newer.superseded_by = None, memory_id
                self.tally.ack()
            return
        mine = self._mine()
        newer = self._mine()
        if mine is None or newer is None or mine[0] == newer[0] or mine[1].user != newer[1].user:
            return
        ok, _ = self.call("supersede", "POST", f"/memories/{quote(mine[0])}/supersede?user={quote(mine[1].user)}",
                          {"new_id": newer[0]})
        if ok:
            mine[1].superseded_by = newer[0]
            self.tally.ack()


def seed_shared(urls: list[str], token: str | None, users: list[str]) -> dict[str, list[str]]:
    """The memories every thread changes a field of: SHARED_PER_USER a user."""
    worker = Worker(urls[0], token)
    shared: dict[str, list[str]] = {}
    for user in users:
        for n in range(SHARED_PER_USER):
            status, data = worker.call("POST", f"/memories?user={quote(user)}",
                                       {"content": f"shared memory {n} of {user} {uuid.uuid4().hex[:8]}",
                                        "resolve": False})
            if status != 201:
                raise SystemExit(f"load_workers: could not seed a shared memory ({status}): {data}")
            shared.setdefault(user, []).append(data["id"])
    return shared


def verify(urls: list[str], token: str | None, threads: list[LoadThread]) -> tuple[int, int, int]:
    """(writes checked, lost, stale): every thread's acknowledged state, read back through every worker."""
    expected: dict[tuple[str, str], dict[str, Any]] = {}
    for thread in threads:
        for memory_id, own in thread.own.items():
            expected[(own.user, memory_id)] = ({} if own.forgotten
                                               else {"content": own.content, "superseded_by": own.superseded_by})
        for key, value in thread.field_values.items():
            expected.setdefault(key, {})[thread.field or ""] = value
    misses: Counter[tuple[str, str, str]] = Counter()
    for url in urls:
        worker = Worker(url, token)
        stored: dict[tuple[str, str], dict[str, Any]] = {}
        for user in {user for user, _ in expected}:
            status, records = worker.call("GET", f"/memories?user={quote(user)}&include_superseded=true")
            if status != 200:
                raise SystemExit(f"load_workers: cannot list {user} on {url} ({status}): {records}")
            stored.update({(user, record["id"]): record for record in records})
        for key, fields in expected.items():
            record = stored.get(key)
            if not fields:  # forgotten
                if record is not None:
                    misses[(*key, "forgotten")] += 1
                continue
            for name, value in fields.items():
                if record is None or record.get(name) != value:
                    misses[(*key, name)] += 1
    checked = sum(max(1, len(fields)) for fields in expected.values())
    lost = sum(1 for count in misses.values() if count == len(urls))
    stale = sum(1 for count in misses.values() if count < len(urls))
    return checked, lost, stale


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", action="append", required=True, help="a worker's base URL (repeat for each)")
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--operations", type=int, default=2000, help="operations in all, shared by the threads")
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--token", help="an admin key, when the workers require one")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    args = parser.parse_args(argv)
    run = uuid.uuid4().hex[:6]
    users = [f"load-{run}-{n}" for n in range(args.users)]
    shared = seed_shared(args.url, args.token, users)
    tally = Tally()
    per_thread = max(1, args.operations // args.threads)
    threads = [LoadThread(n, args.url, args.token, users, per_thread, shared, tally, args.seed * 1000 + n)
               for n in range(args.threads)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    checked, lost, stale = verify(args.url, args.token, threads)
    every = [value for values in tally.latencies.values() for value in values]
    figures = {
        "workers": len(args.url), "threads": args.threads, "requests": len(every),
        "seconds": round(elapsed, 2), "requests_per_second": round(len(every) / elapsed, 1),
        "errors": sum(tally.errors.values()), "errors_by_kind": dict(tally.errors),
        "five_hundreds": sum(n for kind, n in tally.errors.items() if kind.split()[-1].startswith("5")),
        "acknowledged_writes": tally.acknowledged, "checked": checked, "lost": lost,
        "stale": stale + tally.stale_reads, "stale_reads_during_run": tally.stale_reads,
        "p50_ms": round(1000 * statistics.median(every), 1) if every else None,
        "p99_ms": round(1000 * percentile(every, 0.99), 1),
        "by_operation": {name: {"requests": len(values), "p50_ms": round(1000 * statistics.median(values), 1),
                                "p99_ms": round(1000 * percentile(values, 0.99), 1)}
                         for name, values in sorted(tally.latencies.items())},
    }
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"{figures['requests']} requests to {len(args.url)} workers from {args.threads} threads in "
              f"{elapsed:.1f} s ({figures['requests_per_second']}/s): p50 {figures['p50_ms']} ms, "
              f"p99 {figures['p99_ms']} ms")
        print(f"errors {figures['errors']} {figures['errors_by_kind'] or ''}; acknowledged writes "
              f"{tally.acknowledged}, checked {checked}: lost {lost}, stale {figures['stale']}")
        for name, row in figures["by_operation"].items():
            print(f"  {name:10} {row['requests']:6} requests  p50 {row['p50_ms']:7} ms  p99 {row['p99_ms']:7} ms")
    return 1 if figures["errors"] or lost or figures["stale"] else 0


if __name__ == "__main__":
    sys.exit(main())
