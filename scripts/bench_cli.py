"""How long the `vecmem` command takes from the shell, each call a new process, on a store of 1,000 memories:

    python scripts/bench_cli.py [--n 1000] [--runs 5] [--owner] [--json]

It seeds a temporary VECMEM_HOME with ``--n`` memories through the public API (``MemoryBank.add_records``: the
synthetic corpus of bench.py, one user, English and Chinese, embedded by the default model, so about half a
minute), then times each command ``--runs`` times in a new process and prints the median, the fastest and the
slowest, beside the bare interpreter's start (``python -c pass``) measured in the same run: on a loaded machine
every figure grows, and the interpreter's says by how much. Each command runs once untimed first (the model's
calibration and jieba's dictionary cache are made once per store, not per command).

The commands: ``vecmem --help``, ``vecmem search`` with an English and with a Chinese query (only Chinese text
loads jieba's dictionary), and ``vecmem add`` of a new statement each run. ``--owner`` times them again with
``vecmem serve`` holding the store (every command then goes through it: interfaces/owner/). Which vecmem is
measured is whichever this interpreter imports (PYTHONPATH included), so two checkouts compare by running this
script twice. Figures are printed, never asserted; docs/benchmarks.md keeps them.
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
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling module below, however this file is run
from bench import synthetic_corpus  # after the path line: bench.py is a sibling, not a package

USER = "user-0"  # synthetic_corpus's one user when asked for one
QUERY_EN = "what went wrong with the billing service?"
QUERY_ZH = "我在杭州做什么工作？"


def _env(home: Path, cache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VECMEM_", "OPENAI_"))}  # no chat model
    # an installed vecmem has its bytecode compiled; without it every start compiles ~150 modules
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(VECMEM_HOME=str(home), VECMEM_MODEL_CACHE=str(cache), VECMEM_USER=USER, HF_HUB_OFFLINE="1")
    return env


def _seed(home: Path, cache: Path, n: int) -> float:
    """Seconds to store ``n`` memories, in this process (the public API), with the commands' settings."""
    from vecmem import MemoryBank, Settings

    records = synthetic_corpus(n, users=1, sessions=4, seed=7)
    started = time.perf_counter()
    with MemoryBank(Settings.from_env(_env(home, cache))) as bank:
        bank.add_records(records)
    return time.perf_counter() - started


def _timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False,
                          timeout=300)
    took = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"bench_cli: {' '.join(argv[1:])} failed: {done.stderr.strip()[-500:]}")
    return took


def _commands() -> dict[str, Callable[[int], list[str]]]:
    """Each measured command by its shown name: the argv of its ``i``-th run."""
    python, vecmem = [sys.executable], [sys.executable, "-m", "vecmem"]
    return {
        "python -c pass": lambda i: [*python, "-c", "pass"],
        "vecmem --help": lambda i: [*vecmem, "--help"],
        "vecmem search (en)": lambda i: [*vecmem, "search", QUERY_EN],
        "vecmem search (zh)": lambda i: [*vecmem, "search", QUERY_ZH],
        "vecmem add": lambda i: [*vecmem, "add", f"The user's benchmark note {time.time_ns()}-{i} says to deploy on Thursdays"],
    }


def _figures(env: dict[str, str], runs: int) -> dict[str, dict[str, float]]:
    figures = {}
    for name, argv in _commands().items():
        _timed(argv(-1), env)  # untimed: whatever a store makes once (calibration, jieba's cache) is made here
        walls = [_timed(argv(i), env) for i in range(runs)]
        figures[name] = {"median_s": round(statistics.median(walls), 3), "min_s": round(min(walls), 3),
                         "max_s": round(max(walls), 3)}
    return figures


def _cell(figure: dict[str, float]) -> str:
    return f"{figure['median_s']:.2f} ({figure['min_s']:.2f}-{figure['max_s']:.2f})"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _through_owner(home: Path, env: dict[str, str], runs: int) -> dict[str, dict[str, float]]:
    """The same figures with `vecmem serve` holding the store."""
    server = subprocess.Popen([sys.executable, "-m", "vecmem", "serve", "--port", str(_free_port())], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        started = time.perf_counter()
        while not (home / "owner.json").exists():
            if server.poll() is not None or time.perf_counter() - started > 120:
                raise SystemExit(f"bench_cli: vecmem serve did not start: {server.stderr.read() if server.stderr else ''}")
            time.sleep(0.05)
        return _figures(env, runs)
    finally:
        server.terminate()
        server.wait(60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="memories in the store (default 1000)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each command (default 5)")
    parser.add_argument("--owner", action="store_true", help="also time them through `vecmem serve`")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    args = parser.parse_args(argv)
    import vecmem

    with tempfile.TemporaryDirectory(prefix="vecmem-bench-cli-") as folder:
        home, cache = Path(folder) / "home", Path(folder) / "cache"
        seeded_s = _seed(home, cache, args.n)
        env = _env(home, cache)
        load_before = os.getloadavg()
        columns = {"no owner": _figures(env, args.runs)}
        if args.owner:
            columns["through vecmem serve"] = _through_owner(home, env, args.runs)
        load_after = os.getloadavg()
    report = {"vecmem": str(Path(vecmem.__file__).parent), "memories": args.n, "seeded_s": round(seeded_s, 1),
              "runs": args.runs, "load_average": [round(load_before[0], 2), round(load_after[0], 2)],
              "figures": columns}
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    print(f"vecmem from {report['vecmem']}; {args.n} memories (seeded in {report['seeded_s']} s); "
          f"{args.runs} runs each, in seconds; 1-minute load average {load_before[0]:.2f} before, "
          f"{load_after[0]:.2f} after")
    header = f"{'command':<22}" + "".join(f"{name + ': median (min-max)':>40}" for name in columns)
    print(header)
    for command in _commands():
        cells = "".join(f"{_cell(figures[command]):>40}" for figures in columns.values())
        print(f"{command:<22}{cells}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
