"""How long a `vecmem` command takes from the shell with the chat open on an embedded store (the chat serves the
store: one local owner), against the same command with no other process holding the store (it opens the store
and loads the model itself). Only the installed command and the chat are used, as a person would run them:

    .venv/bin/python scripts/bench_owner.py [--runs 7] [--query "write me a sleep function"] [--json]

It seeds a temporary store (`vecmem seed`), times `vecmem list` and `vecmem search QUERY` --runs times each
with no owner, then starts `python -m vecmem.chat` (stdin kept open), waits for VECMEM_HOME/owner.json and for
the chat's background warm-up to settle (two untimed calls of each command), and times them again. Prints the
median and the maximum of each (seconds) and the load average, which on a shared machine says much of the rest.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
COMMANDS = {"list": ["list"], "search": ["search"]}


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("VECMEM_")}
    return {**env, "VECMEM_HOME": str(home), "HF_HUB_OFFLINE": "1"}


def _timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    result = subprocess.run([str(BIN / "vecmem"), *argv], env=env, capture_output=True, text=True, timeout=300)
    took = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"vecmem {' '.join(argv)} failed: {result.stderr.strip()}")
    return took


def _figures(env: dict[str, str], query: str, runs: int, warm: int = 0) -> dict[str, dict[str, float]]:
    figures = {}
    for name, argv in COMMANDS.items():
        full = argv + ([query] if name == "search" else [])
        for _ in range(warm):
            _timed(full, env)
        times = [_timed(full, env) for _ in range(runs)]
        figures[name] = {"median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3)}
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="timed runs of each command (default 7)")
    parser.add_argument("--query", default="write me a sleep function")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of lines")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="vecmem-bench-owner-") as folder:
        home = Path(folder) / "home"
        env = _env(home)
        _timed(["seed"], env)
        alone = _figures(env, args.query, args.runs)
        chat = subprocess.Popen([sys.executable, "-m", "vecmem.chat", "--session", "bench"], env=env, text=True,
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            started = time.perf_counter()
            while not (home / "owner.json").exists():
                if chat.poll() is not None or time.perf_counter() - started > 120:
                    raise SystemExit(f"the chat did not start serving: {chat.stderr.read() if chat.stderr else ''}")
                time.sleep(0.02)
            serving_after = time.perf_counter() - started
            through = _figures(env, args.query, args.runs, warm=2)
        finally:
            if chat.stdin is not None:
                chat.stdin.close()  # end of input: the chat leaves
            chat.wait(60)
    report = {"runs": args.runs, "query": args.query, "no_owner": alone, "through_the_chat": through,
              "chat_serving_after_s": round(serving_after, 2), "load_average": [round(x, 2) for x in os.getloadavg()]}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"{args.runs} runs each; the chat served its store {report['chat_serving_after_s']} s after it started; "
          f"load average {report['load_average']}")
    for name in COMMANDS:
        shown = f"vecmem {name}" + (f" {args.query!r}" if name == "search" else "")
        print(f"{shown:<40} no owner: median {alone[name]['median_s']:.2f} s, max {alone[name]['max_s']:.2f} s;  "
              f"through the chat: median {through[name]['median_s']:.2f} s, max {through[name]['max_s']:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
