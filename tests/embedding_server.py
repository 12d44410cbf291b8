"""A real HTTP server on 127.0.0.1 that speaks OpenAI's ``/v1/embeddings`` and answers from a script.

``ScriptedEmbeddingServer(embed)`` answers each request with ``embed(texts)`` (a matrix: the real local model's
vectors, or the fake embedder's), as OpenAI does (``data`` with ``index`` and ``embedding``, ``usage``); a test
queues failures first (``fail_next(status, times)``, a delay past the client's timeout, a broken body). Every
request body is kept (``requests``), and the bearer key each one carried (``keys``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np


class ScriptedEmbeddingServer:
    def __init__(self, embed: Callable[[Sequence[str]], np.ndarray]) -> None:
        self.embed = embed
        self.requests: list[dict] = []
        self.keys: list[str | None] = []
        self.failures: list[tuple[int, float, str | None]] = []  # (status, delay, raw body) of the next requests
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                server.requests.append(body)
                server.keys.append(self.headers.get("Authorization"))
                status, delay, raw = server.failures.pop(0) if server.failures else (200, 0.0, None)
                if delay:
                    time.sleep(delay)
                if raw is not None:
                    payload = raw.encode()
                elif status != 200:
                    payload = json.dumps({"error": {"message": f"scripted {status}", "type": "scripted"}}).encode()
                else:
                    texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                    vectors = np.asarray(server.embed(texts), dtype=np.float32)
                    payload = json.dumps({"object": "list", "model": body.get("model"), "usage": {
                        "prompt_tokens": 0, "total_tokens": 0}, "data": [
                        {"object": "embedding", "index": n, "embedding": [float(x) for x in vector]}
                        for n, vector in reversed(list(enumerate(vectors)))]}).encode()  # any order: by index
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):
                    pass

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def fail_next(self, status: int = 500, times: int = 1, *, delay: float = 0.0, raw: str | None = None) -> None:
        self.failures.extend([(status, delay, raw)] * times)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> ScriptedEmbeddingServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
