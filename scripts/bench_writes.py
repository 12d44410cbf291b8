"""Acknowledged writes a second through 1, 2 and 4 `vecmem serve` workers of one store.

    python scripts/bench_writes.py                      # make bench-writes
    python scripts/bench_writes.py --workers 1,2 --seconds 30 --threads 12 --users 32
    python scripts/bench_writes.py --workers 1,2 --seconds 30 --model multilingual-e5-small   # each worker embeds

The deployment of several workers, on 127.0.0.1: one PostgreSQL server for the state they share
(``VECMEM_DATABASE_URL``, tests/postgres.py starts it from Debian's binaries) and one `chroma run` server for the
memories (``VECMEM_CHROMA_URL``). For each worker count a new store (a Chroma database and a state schema of its
own) is served by that many workers, each its own process and home, with ``VECMEM_EMBED_MODEL=hashed:384`` (no
model: words hashed into buckets, embedding/hashed.py) so that what is measured is the write path (the locks, the
state database, Chroma, HTTP), not a model. ``--model`` names another (``VECMEM_EMBED_MODEL``'s values, e.g.
``multilingual-e5-small``): each worker then embeds every write with it, and the model's own batched rate is
measured in this process before the first row and after the last (``bench_targets.model_rate``: vecmem's batches,
on ``MODEL_SAMPLE`` texts shaped like the writes) and printed beside writes/s, as a ratio per worker count and per
worker. ``--threads`` client threads then add memories for ``--seconds``
(``POST /memories``, stored as given, each thread's requests round robin over the workers, spread over
``--users`` users), each waiting for its answer before the next.

Afterwards every acknowledged write is looked for through every worker: one that no worker lists is **lost**, one
that some worker does not list is **stale**. Printed per worker count: writes/s (acknowledged), p50 and p95
latency, lost, stale, 5xx and other failures, the CPU time a write cost in the workers, Chroma, PostgreSQL and
this script's client threads, and the share of the machine's CPU left idle. The figures depend on the machine and
what else runs on it: compare rows of one run. Every process started here is stopped before the script ends; exit status 1 when a
write was lost or stale, a request failed, or a worker did not exit cleanly.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # the test suite's throw-away PostgreSQL server

from tests.postgres import postgres_bin, running_postgres  # noqa: E402

BIN = Path(sys.executable).parent
MODEL = "hashed:384"  # the default: no model, the store's path alone
MODEL_SAMPLE = 512  # texts the model's own batched rate is timed on, before the first row and after the last
HEADERS = {"Content-Type": "application/json", "X-Vecmem-Request": "1"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def stop(process: subprocess.Popen[bytes], name: str, failures: list[str]) -> None:
    """SIGTERM, then a wait; a process that does not go is killed, and one that exits non-zero is noted."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        failures.append(f"{name} did not stop within 30 s (killed)")
        return
    if code not in (0, -signal.SIGTERM):
        failures.append(f"{name} exited with status {code}")


@contextlib.contextmanager
def running_chroma(folder: Path, failures: list[str]) -> Iterator[str]:
    """`chroma run` on a free loopback port, its data in ``folder``; stopped afterwards."""
    port = free_port()
    log = folder / "chroma.log"
    with log.open("wb") as handle:
        process = subprocess.Popen([str(BIN / "chroma"), "run", "--path", str(folder / "chroma"), "--host",
                                    "127.0.0.1", "--port", str(port)], stdout=handle, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1).read()
                break
            except OSError as exc:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"chroma run did not start ({exc}): {log.read_text()[-2000:]}") from exc
                time.sleep(0.2)
        yield url
    finally:
        stop(process, "chroma run", failures)


class Client:
    """One keep-alive HTTP connection to one worker."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.connection: http.client.HTTPConnection | None = None

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """(status, decoded JSON body); status 0 when the connection failed."""
        payload = None if body is None else json.dumps(body).encode()
        try:
            if self.connection is None:
                self.connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
            self.connection.request(method, path, body=payload, headers=HEADERS)
            response = self.connection.getresponse()
            data = response.read()
            try:
                return response.status, json.loads(data) if data else None
            except ValueError:
                return response.status, data.decode("utf-8", "replace")
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            return 0, str(exc)

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
        self.connection = None


@contextlib.contextmanager
def serving(count: int, chroma_url: str, state_url: str, folder: Path, failures: list[str],
            model: str = MODEL) -> Iterator[list[int]]:
    """``count`` workers of a new store; yields their ports once each answers, stops them afterwards."""
    run = uuid.uuid4().hex[:10]
    started: list[tuple[subprocess.Popen[bytes], Path]] = []
    ports: list[int] = []
    try:
        for number in range(count):
            port, home = free_port(), folder / f"{run}-home-{number}"
            environment = {key: value for key, value in os.environ.items() if not key.startswith("VECMEM_")}
            environment.update(VECMEM_HOME=str(home), VECMEM_CHROMA_URL=chroma_url,
                               VECMEM_CHROMA_DATABASE=f"writes-{run}", VECMEM_DATABASE_URL=state_url,
                               VECMEM_DATABASE_SCHEMA=f"writes_{run}", VECMEM_EMBED_MODEL=model, HF_HUB_OFFLINE="1")
            log = folder / f"{run}-worker-{number}.log"
            with log.open("wb") as handle:
                process = subprocess.Popen([sys.executable, "-m", "vecmem", "serve", "--port", str(port)], stdout=handle,
                                           stderr=subprocess.STDOUT, env=environment)
            started.append((process, log))
            ports.append(port)
        for (process, log), port in zip(started, ports, strict=True):
            client, deadline = Client(port), time.monotonic() + 120
            while client.call("GET", "/openapi.json")[0] != 200:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"a worker did not start: {log.read_text(errors='replace')[-3000:]}")
                time.sleep(0.2)
            client.close()
        yield ports
    finally:
        for number, (process, log) in enumerate(started):
            before = len(failures)
            stop(process, f"worker {number}", failures)
            if len(failures) > before:
                failures[-1] += f": {log.read_text(errors='replace')[-1500:]}"


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    acknowledged: dict[tuple[str, str], str] = field(default_factory=dict)  # (user, id) -> content
    failures: Counter[str] = field(default_factory=Counter)
    first_failure: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock)


def write_content(number: int, turn: int) -> str:
    """What writer ``number`` stores on its ``turn``: a short line, unique."""
    return f"writer {number} noted item {turn} {uuid.uuid4().hex[:12]}"


def writer(number: int, ports: list[int], users: list[str], until: float, tally: Tally) -> None:
    clients = [Client(port) for port in ports]
    turn = number
    while time.monotonic() < until:
        turn += 1
        user = users[turn % len(users)]
        content = write_content(number, turn)
        started = time.perf_counter()
        status, body = clients[turn % len(clients)].call(
            "POST", f"/memories?user={quote(user)}", {"content": content, "resolve": False})
        elapsed = time.perf_counter() - started
        with tally.lock:
            if status == 201 and isinstance(body, dict) and body.get("id"):
                tally.latencies.append(elapsed)
                tally.acknowledged[(user, body["id"])] = content
            else:
                tally.failures["5xx" if 500 <= status < 600 else "connection" if status == 0 else str(status)] += 1
                tally.first_failure = tally.first_failure or f"{status}: {str(body)[:300]}"
    for client in clients:
        client.close()


def verify(ports: list[int], tally: Tally) -> tuple[int, int]:
    """(lost, stale): acknowledged writes that no worker lists, and that some worker does not list."""
    misses: Counter[tuple[str, str]] = Counter()
    for port in ports:
        client = Client(port)
        for user in {user for user, _ in tally.acknowledged}:
            status, records = client.call("GET", f"/memories?user={quote(user)}")
            if status != 200:
                raise RuntimeError(f"cannot list {user} on port {port} ({status}): {str(records)[:300]}")
            listed = {record["id"]: record["content"] for record in records}
            for (owner, memory_id), content in tally.acknowledged.items():
                if owner == user and listed.get(memory_id) != content:
                    misses[(owner, memory_id)] += 1
        client.close()
    lost = sum(1 for n in misses.values() if n == len(ports))
    return lost, len(misses) - lost


def cpu_seconds() -> Counter[str]:
    """CPU seconds used so far by this script's threads (``client``) and by the processes it started, by kind
    (``workers``, ``chroma``, ``postgres``: its backends included), read from /proc; ``idle``: the machine's idle
    seconds, every core together (what other programs left over)."""
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    used: dict[int, tuple[str, float]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:  # gone meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        pid = int(entry.name)
        parents[pid] = int(fields[1])
        used[pid] = (stat[stat.index("(") + 1:stat.rindex(")")], (int(fields[11]) + int(fields[12])) / tick)
    me, totals = os.getpid(), Counter[str]()
    for pid, (name, seconds) in used.items():
        ancestor = parents.get(pid, 0)
        while ancestor not in (me, 0, 1) and ancestor in parents:
            ancestor = parents[ancestor]
        if ancestor == me:
            totals["postgres" if name.startswith("postgres") else "chroma" if "chroma" in name else "workers"] += seconds
    times = os.times()
    totals["client"] = times.user + times.system
    totals["idle"] = int(Path("/proc/stat").read_text().split()[4]) / tick
    return totals


class ModelRate:
    """The model's own batched rate (memories/s), measured in this process as bench.py measures it
    (``bench_targets.model_rate``) on ``MODEL_SAMPLE`` texts shaped like the writes; the model loads once."""

    def __init__(self, model: str, home: Path) -> None:
        from bench_targets import model_rate  # scripts/, beside this file

        from vecmem import Settings, embedder_for

        self._settings = Settings.from_env().with_changes(home=home, chroma_url=None, embed_model=model)
        self._embedder = embedder_for(self._settings)
        self._embedder.embed_query("warm up")  # the model load is start-up, not its rate
        self._texts = [write_content(n % 8, n) for n in range(MODEL_SAMPLE)]
        self._rate = model_rate

    def __call__(self) -> float:
        return float(self._rate(self._embedder, self._texts, self._settings.embed_batch_size)[0])


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


def measure(count: int, args: argparse.Namespace, chroma_url: str, state_url: str, folder: Path,
            failures: list[str]) -> dict[str, Any]:
    users = [f"writer-{uuid.uuid4().hex[:6]}-{n}" for n in range(args.users)]
    tally = Tally()
    with serving(count, chroma_url, state_url, folder, failures, args.model) as ports:
        for port in ports:  # each worker's first request opens its store and state: not part of the figures
            warm = Client(port)
            warm.call("POST", f"/memories?user={quote(users[0])}", {"content": "warm up", "resolve": False})
            warm.call("POST", f"/search?user={quote(users[0])}", {"query": "warm up", "k": 1})
            warm.close()
        until = time.monotonic() + args.seconds
        threads = [threading.Thread(target=writer, args=(n, ports, users, until, tally)) for n in range(args.threads)]
        before, started = cpu_seconds(), time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        elapsed = time.perf_counter() - started
        used = cpu_seconds()
        used.subtract(before)
        lost, stale = verify(ports, tally)
    if tally.first_failure:
        print(f"  {count} worker(s), first failure: {tally.first_failure}", file=sys.stderr)
    return {"workers": count, "writes": len(tally.latencies), "seconds": round(elapsed, 1),
            "writes_per_second": round(len(tally.latencies) / elapsed, 1),
            "p50_ms": round(1000 * statistics.median(tally.latencies), 1) if tally.latencies else None,
            "p95_ms": round(1000 * percentile(tally.latencies, 0.95), 1), "lost": lost, "stale": stale,
            "five_hundreds": tally.failures["5xx"],
            "other_failures": sum(n for kind, n in tally.failures.items() if kind != "5xx"),
            "cpu_ms_per_write": {kind: round(1000 * used[kind] / max(1, len(tally.latencies)), 1)
                                 for kind in ("workers", "chroma", "postgres", "client")},
            "idle_share": round(used["idle"] / (elapsed * (os.cpu_count() or 1)), 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated (default 1,2,4)")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long each count is loaded (default 20)")
    parser.add_argument("--threads", type=int, default=8, help="client threads (default 8)")
    parser.add_argument("--users", type=int, default=16, help="users the writes are spread over (default 16)")
    parser.add_argument("--model", default=MODEL,
                        help=f"the workers' embedding model, VECMEM_EMBED_MODEL's values (default {MODEL}: no model); "
                             "a real model's own batched rate is measured and printed beside writes/s")
    parser.add_argument("--json", action="store_true", help="also print each row as one JSON object")
    args = parser.parse_args(argv)
    try:
        counts = [int(part) for part in args.workers.split(",") if part.strip()]
    except ValueError:
        parser.error(f"--workers: comma-separated whole numbers, got {args.workers!r}")
    if not counts or min(counts) < 1 or args.threads < 1 or args.users < 1 or args.seconds <= 0:
        parser.error("--workers, --threads, --users and --seconds must be positive")
    if postgres_bin() is None:
        print("bench_writes: PostgreSQL is not installed (Debian: apt-get install postgresql; `make postgres`)",
              file=sys.stderr)
        return 1
    failures: list[str] = []
    rows: list[dict[str, Any]] = []
    rates: list[float] = []
    folder = Path(tempfile.mkdtemp(prefix="vecmem-bench-writes-"))
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    try:
        rate_of_model = None if args.model.startswith("hashed:") else ModelRate(args.model, folder / "model-home")
        if rate_of_model:
            rates.append(rate_of_model())
        with running_postgres() as state_url, running_chroma(folder, failures) as chroma_url:
            for count in counts:
                rows.append(measure(count, args, chroma_url, state_url, folder, failures))
                if args.json:
                    print(json.dumps(rows[-1]), flush=True)
        if rate_of_model:
            rates.append(rate_of_model())
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    load = f"load average {load_at_start} at start, {[round(x, 2) for x in os.getloadavg()]} at end"
    print(f"\n{args.threads} client threads, {args.users} users, {args.seconds:g} s per row, model {args.model}; {load}")
    print(f"{'workers':>7}  {'writes/s':>8}  {'p50 ms':>7}  {'p95 ms':>7}  {'lost':>4}  {'stale':>5}  {'5xx':>4}  "
          f"{'other':>5}  CPU ms a write: workers/chroma/postgres/client  idle")
    for row in rows:
        cpu = row["cpu_ms_per_write"]
        print(f"{row['workers']:>7}  {row['writes_per_second']:>8}  {row['p50_ms']:>7}  {row['p95_ms']:>7}  "
              f"{row['lost']:>4}  {row['stale']:>5}  {row['five_hundreds']:>4}  {row['other_failures']:>5}  "
              f"{cpu['workers']:>14}/{cpu['chroma']}/{cpu['postgres']}/{cpu['client']}  {row['idle_share']:>18.0%}")
    if rows:
        base = rows[0]["writes_per_second"] or 1
        print("relative to " + f"{rows[0]['workers']} worker(s): "
              + ", ".join(f"{row['workers']}: {row['writes_per_second'] / base:.2f}x" for row in rows))
    if len(rates) == 2 and rows:
        model = statistics.mean(rates)
        print(f"the model's own batched rate in this process (before, after): {model:.1f} memories/s "
              f"({rates[0]:.1f}, {rates[1]:.1f}); writes/s / it: "
              + ", ".join(f"{row['workers']} worker(s) {row['writes_per_second'] / model:.2f} "
                          f"({row['writes_per_second'] / row['workers'] / model:.2f} per worker)" for row in rows))
    for failure in failures:
        print(f"bench_writes: {failure}", file=sys.stderr)
    bad = failures or any(row["lost"] or row["stale"] or row["five_hundreds"] or row["other_failures"] for row in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
