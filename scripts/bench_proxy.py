"""What a request costs through `vecmem proxy`: the same chat-completions requests sent to a scripted model server
directly and through the proxy, timed from the openai Python SDK, whole and streamed. Prints p50 and p95 (ms) of
each and the proxy's overhead (the difference of the two).

    .venv/bin/python scripts/bench_proxy.py [--requests 60] [--pause 0.3] [--json]

The model server is the test suite's (tests/chat_server.py: answers at once, a streamed answer a chunk per word);
the proxy is the installed command with the real embedding model, on a temporary store holding the project's
seed memories (`vecmem seed`). Each request is one user message of a rotating list (coding requests, small talk,
questions about the past), so each recalls for real; the proxy also learns from each exchange, one call to the
scripted model, and waits for the user's previous learn before it answers the next request. ``--pause`` is the
time between two requests (a person reading the answer); 0 sends them back to back, so each request of the proxy
also waits for the learn of the one before.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the test suite's scripted model server

import openai  # noqa: E402

from tests.chat_server import Reply, ScriptedChatServer  # noqa: E402

BIN = Path(sys.executable).parent
MESSAGES = [
    "Write me a sleep function in Python.",
    "What should I cook for dinner tonight?",
    "Remind me what we decided about the database last time.",
    "Can you review this function for style?",
    "I'm thinking of a weekend trip, any ideas?",
    "How do I set up a new project the way I like it?",
]
ANSWER = "Here is a short answer of about twenty words, streamed a word at a time, which is what a model would send back."


def _model(kind: str, body: dict) -> Reply:
    if kind == "extract":  # the proxy's learning call: nothing in these messages is worth keeping
        return Reply(json.dumps({"keep": False, "reason": "a request", "memories": []}))
    return Reply(ANSWER)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _percentiles(times: list[float]) -> dict[str, float]:
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50_ms": round(statistics.median(ordered) * 1000, 1), "p95_ms": round(p95 * 1000, 1)}


def _timed(client: openai.OpenAI, message: str, stream: bool) -> tuple[float, int]:
    """Seconds to the whole answer (the last chunk when streamed), and the memories the proxy put in."""
    started = time.perf_counter()
    messages = [{"role": "user", "content": message}]
    if stream:
        with client.chat.completions.with_streaming_response.create(model="scripted-model", messages=messages,
                                                                    stream=True) as response:
            for _ in response.iter_lines():
                pass
    else:
        response = client.chat.completions.with_raw_response.create(model="scripted-model", messages=messages)
        response.parse()
    took = time.perf_counter() - started
    injected = response.headers.get("x-vecmem-memories")
    return took, len(injected.split(",")) if injected else 0


def _run(client: openai.OpenAI, requests: int, pause: float, stream: bool) -> tuple[list[float], list[int]]:
    times, injected = [], []
    for n in range(requests):
        took, memories = _timed(client, MESSAGES[n % len(MESSAGES)], stream)
        times.append(took)
        injected.append(memories)
        time.sleep(pause)
    return times, injected


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=60, help="timed requests of each kind (default 60)")
    parser.add_argument("--pause", type=float, default=0.3, help="seconds between two requests (default 0.3)")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vecmem-bench-proxy-") as home, ScriptedChatServer(_model) as server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("VECMEM_", "OPENAI_"))}
        env.update(VECMEM_HOME=home, HF_HUB_OFFLINE="1", OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="bench",
                   VECMEM_CHAT_MODEL="scripted-model")
        subprocess.run([str(BIN / "vecmem"), "seed"], env=env, check=True, capture_output=True, timeout=300)
        port = _free_port()
        proxy = subprocess.Popen([str(BIN / "vecmem"), "proxy", "--port", str(port)], env=env,
                                 stderr=subprocess.PIPE, text=True)
        try:
            _wait(f"http://127.0.0.1:{port}/v1/models", proxy)
            clients = {"direct": openai.OpenAI(base_url=server.base_url, api_key="bench", max_retries=0),
                       "proxy": openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="bench",
                                              max_retries=0)}
            figures: dict[str, dict[str, float]] = {}
            for stream in (False, True):
                for name, client in clients.items():
                    _run(client, len(MESSAGES), args.pause, stream)  # warm: the model, the index, connections
                    times, injected = _run(client, args.requests, args.pause, stream)
                    label = f"{name}{', streamed' if stream else ''}"
                    figures[label] = {**_percentiles(times), "memories_per_request": round(
                        statistics.mean(injected), 1)}
        finally:
            proxy.terminate()
            proxy.wait(60)
    for kind in ("", ", streamed"):
        proxied, direct = figures[f"proxy{kind}"], figures[f"direct{kind}"]
        figures[f"overhead{kind}"] = {key: round(proxied[key] - direct[key], 1) for key in ("p50_ms", "p95_ms")}
    load = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"requests": args.requests, "pause_s": args.pause, "load_average": round(load, 2),
                          "figures": figures}))
        return 0
    print(f"{args.requests} requests each, {args.pause:g} s apart; load average {load:.1f}")
    print(f"{'':20} {'p50 ms':>8} {'p95 ms':>8} {'memories':>9}")
    for label, row in figures.items():
        memories = f"{row['memories_per_request']:9.1f}" if "memories_per_request" in row else ""
        print(f"{label:20} {row['p50_ms']:8.1f} {row['p95_ms']:8.1f} {memories}")
    return 0


def _wait(url: str, proxy: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(url, timeout=5).read()
            return
        except urllib.error.HTTPError:
            return
        except OSError as exc:
            if proxy.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"vecmem proxy did not start: {proxy.stderr.read() if proxy.stderr else exc}") from exc
            time.sleep(0.2)


if __name__ == "__main__":
    raise SystemExit(main())
