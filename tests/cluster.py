"""Several `vecmem serve` workers of one store, as a deployment runs them: each its own process and its own
VECMEM_HOME, one `chroma run` server for the memories, one PostgreSQL database for the state they share.

``workers(chroma_url, state_url, count)`` starts them (the real embedding model; each is up once its OpenAPI
description answers) and yields a ``Worker`` per process, whose ``call`` sends one JSON request the way any HTTP
client would (with the cross-site header every state-changing request needs); they are stopped afterwards.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tests.conftest import VENV_BIN, _free_port


class Worker:
    def __init__(self, port: int, process: subprocess.Popen[bytes], log: Path, home: Path) -> None:
        self.port, self.process, self.log, self.home = port, process, log, home
        self.url = f"http://127.0.0.1:{port}"

    def call(self, method: str, path: str, body: Any = None, *, user: str | None = None) -> tuple[int, Any]:
        """(status, decoded JSON body) of one request; ``user`` is added as ``?user=``. An add stores its statement
        as given unless the body says otherwise: these tests check what workers agree on, not what an add resolves."""
        if method == "POST" and path.split("?")[0] == "/memories" and isinstance(body, dict):
            body = {"resolve": False, **body}
        if user is not None:
            path += ("&" if "?" in path else "?") + f"user={quote(user)}"
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            connection.request(method, path, body=None if body is None else json.dumps(body).encode(),
                               headers={"Content-Type": "application/json", "X-Vecmem-Request": "1"})
            response = connection.getresponse()
            data = response.read()
            return response.status, json.loads(data) if data else None
        finally:
            connection.close()

    def ok(self, method: str, path: str, body: Any = None, *, user: str | None = None) -> Any:
        """The body of a request that must succeed."""
        status, data = self.call(method, path, body, user=user)
        assert 200 <= status < 300, f"{method} {path} on {self.url}: {status} {data}"
        return data


def worker_environment(chroma_url: str, state_url: str, schema: str, database: str, home: Path) -> dict[str, str]:
    """What a worker of the deployment is configured with: docs/deployment.md's 'Several processes' lists the same."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith("VECMEM_")}
    environment.update(VECMEM_HOME=str(home), VECMEM_CHROMA_URL=chroma_url, VECMEM_CHROMA_DATABASE=database,
                       VECMEM_DATABASE_URL=state_url, VECMEM_DATABASE_SCHEMA=schema, HF_HUB_OFFLINE="1")
    return environment


@contextlib.contextmanager
def workers(chroma_url: str, state_url: str, count: int = 2) -> Iterator[list[Worker]]:
    """``count`` workers of a new store (a Chroma database and a state schema of their own)."""
    run = uuid.uuid4().hex[:12]
    folder = Path(tempfile.mkdtemp(prefix="vecmem-workers-"))
    started: list[Worker] = []
    try:
        for number in range(count):
            home, port = folder / f"home-{number}", _free_port()
            log = folder / f"worker-{number}.log"
            with log.open("wb") as handle:
                process = subprocess.Popen(
                    [str(VENV_BIN / "vecmem"), "serve", "--port", str(port)], stdout=handle,
                    stderr=subprocess.STDOUT,
                    env=worker_environment(chroma_url, state_url, f"workers_{run}", f"workers-{run}", home))
            started.append(Worker(port, process, log, home))
        for worker in started:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if worker.call("GET", "/openapi.json")[0] == 200:
                        break
                except OSError:
                    pass
                if worker.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"worker did not start: {worker.log.read_text(errors='replace')[-3000:]}")
                time.sleep(0.2)
        yield started
    finally:
        for worker in started:
            worker.process.terminate()
        for worker in started:
            try:
                worker.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.process.kill()
