"""A real HTTP server on 127.0.0.1 that speaks the chat-completions API and answers from a script.

Tests drive vecmem's real openai client against it. Each request is classified by its system prompt
("gate", "extract", "summary" or "answer"; the memory agent sends no separate "gate" call any more: its
write side is one "extract" call that also decides whether to keep the message) and answered by the test's responder with a ``Reply``: a text, an
HTTP error status, a delay (to trigger the client's timeout) or a raw, possibly broken, body.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    content: str | None = None
    status: int = 200
    delay: float = 0.0
    raw_body: str | None = None
    headers: dict[str, str] = field(default_factory=dict)  # sent with the reply (a 429's Retry-After)


def request_kind(body: dict) -> str:
    system = " ".join(m.get("content", "") for m in body.get("messages", []) if m.get("role") == "system")
    if "write gate" in system:
        return "gate"
    if "maintain an assistant's long-term memory" in system:
        return "extract"
    if "Summarise" in system or "Merge these session summaries" in system:
        return "summary"
    return "answer"


class ScriptedChatServer:
    def __init__(self, responder: Callable[[str, dict], Reply]) -> None:
        self.responder = responder
        self.requests: list[tuple[str, dict]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:  # the model list (`vecmem proxy` passes it through)
                if self.path.rstrip("/").endswith("/models"):
                    payload = json.dumps({"object": "list", "data": [
                        {"id": "scripted-model", "object": "model", "created": 0, "owned_by": "tests"}]}).encode()
                    self.send_response(200)
                else:
                    payload = json.dumps({"error": {"message": f"no route {self.path}", "type": "scripted"}}).encode()
                    self.send_response(404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                kind = request_kind(body)
                server.requests.append((kind, body))
                reply = server.responder(kind, body)
                if reply.delay:
                    time.sleep(reply.delay)
                if body.get("stream") and reply.status == 200:
                    self._stream(reply, body)
                    return
                if reply.raw_body is not None:
                    payload = reply.raw_body.encode()
                elif reply.status != 200:
                    payload = json.dumps({"error": {"message": f"scripted {reply.status}", "type": "scripted"}}).encode()
                else:
                    payload = json.dumps({
                        "id": f"chatcmpl-{len(server.requests)}",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "scripted"),
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": reply.content}}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }).encode()
                try:
                    self.send_response(reply.status)
                    for name, value in reply.headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                    pass

            def _stream(self, reply: Reply, body: dict) -> None:
                """The answer as server-sent events, a chunk per word (a raw body is sent as one event's data)."""
                if reply.raw_body is not None:
                    events = [reply.raw_body]
                else:
                    words = (reply.content or "").split(" ")
                    pieces = [word + (" " if n < len(words) - 1 else "") for n, word in enumerate(words)]
                    events = [json.dumps({"id": f"chatcmpl-{len(server.requests)}", "object": "chat.completion.chunk",
                                          "created": int(time.time()), "model": body.get("model", "scripted"),
                                          "choices": [{"index": 0, "delta": {"role": "assistant", "content": piece},
                                                       "finish_reason": None}]}) for piece in pieces if piece]
                    events.append("[DONE]")
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    for event in events:
                        self.wfile.write(f"data: {event}\n\n".encode())
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass
                self.close_connection = True

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.requests]

    def __enter__(self) -> ScriptedChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
