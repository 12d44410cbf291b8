"""How long the `vecmem` command takes from the shell, each call a new process, on a store of 1,000 memories:

    python scripts/bench_cli.py [--n 1000] [--runs 5] [--owner] [--linger 60] [--against ../other-checkout]
                                [--second-view use] [--json]

It seeds a temporary VECMEM_HOME with ``--n`` memories through the public API (``MemoryBank.add_records``: the
synthetic corpus of bench.py, one user, English and Chinese, embedded by the default model, so about half a
minute), then times each command ``--runs`` times in a new process and prints the median, the fastest and the
slowest, beside the bare interpreter's start (``python -c pass``) measured in the same run: on a loaded machine
every figure grows, and the interpreter's says by how much. Each command runs once untimed first (the model's
calibration and jieba's dictionary cache are made once per store, not per command).

The commands: ``vecmem --help``, ``vecmem search`` with an English and with a Chinese query (only Chinese text
loads jieba's dictionary), ``vecmem list`` (the ten newest), and ``vecmem add`` of a new statement each run.
``--owner`` times them again with ``vecmem serve`` holding the store (every command then goes through it:
interfaces/owner/); ``--linger S`` with ``VECMEM_OWNER_LINGER=S`` instead, so that the first command starts an
owner the others go through (timed on its own: interfaces/owner/lingering.py), for this checkout only. The vecmem
measured is the one this interpreter imports; ``--against DIR`` also measures another checkout's (DIR first on
PYTHONPATH) on a copy of the same store (the files each keeps beside the store, its saved replicas, may be of
another format, and would replace each other's), its runs alternating with this one's, so both see the same load
(the owner of each is its own ``vecmem serve``, one after the other). ``--second-view use`` seeds the store and
runs every command with ``VECMEM_SECOND_VIEW=use``. Figures are printed, never asserted;
docs/benchmarks.md keeps them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
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
Figures = dict[str, dict[str, float]]  # command -> median_s, min_s, max_s


def _env(home: Path, cache: Path, checkout: Path | None = None, second_view: str = "off") -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VECMEM_", "OPENAI_"))}  # no chat model
    # an installed vecmem has its bytecode compiled; without it every start compiles ~150 modules
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(VECMEM_HOME=str(home), VECMEM_MODEL_CACHE=str(cache), VECMEM_USER=USER, HF_HUB_OFFLINE="1",
               VECMEM_SECOND_VIEW=second_view)
    if checkout is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(checkout), *filter(None, [env.get("PYTHONPATH")])])
    return env


def _seed(home: Path, cache: Path, n: int, second_view: str = "off") -> float:
    """Seconds to store ``n`` memories, in this process (the public API), with the commands' settings."""
    from vecmem import MemoryBank, Settings

    records = synthetic_corpus(n, users=1, sessions=4, seed=7)
    started = time.perf_counter()
    with MemoryBank(Settings.from_env(_env(home, cache, second_view=second_view))) as bank:
        bank.add_records(records)
    return time.perf_counter() - started


def _outside(env: dict[str, str]) -> Path:
    """Where the commands run: the bench's own folder. `python -m` puts the working folder first on the path, so
    run from a checkout it would import that checkout's vecmem whatever PYTHONPATH says (``--against``)."""
    return Path(env["VECMEM_HOME"]).parent


def _timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False,
                          timeout=300, cwd=_outside(env))
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
        "vecmem list": lambda i: [*vecmem, "list", "--limit", "10"],
        "vecmem add": lambda i: [*vecmem, "add", f"The user's benchmark note {time.time_ns()}-{i} says to deploy on Thursdays"],
    }


def _figures(envs: dict[str, dict[str, str]], runs: int) -> dict[str, Figures]:
    """Each command's figures under each environment (a checkout), their runs alternating."""
    walls: dict[str, dict[str, list[float]]] = {label: {} for label in envs}
    for name, argv in _commands().items():
        for env in envs.values():
            _timed(argv(-1), env)  # untimed: whatever a store makes once (calibration, jieba's cache) is made here
        for i in range(runs):
            for label, env in envs.items():
                walls[label].setdefault(name, []).append(_timed(argv(i), env))
    return {label: {name: {"median_s": round(statistics.median(times), 3), "min_s": round(min(times), 3),
                           "max_s": round(max(times), 3)} for name, times in by_command.items()}
            for label, by_command in walls.items()}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _through_owner(home: Path, label: str, env: dict[str, str], runs: int) -> Figures:
    """The same figures with `vecmem serve` (of the same checkout) holding the store."""
    server = subprocess.Popen([sys.executable, "-m", "vecmem", "serve", "--port", str(_free_port())], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=_outside(env))
    try:
        started = time.perf_counter()
        while not (home / "owner.json").exists():
            if server.poll() is not None or time.perf_counter() - started > 120:
                raise SystemExit(f"bench_cli: vecmem serve did not start: {server.stderr.read() if server.stderr else ''}")
            time.sleep(0.05)
        return _figures({label: env}, runs)[label]
    finally:
        server.terminate()
        server.wait(60)
        gone = time.perf_counter() + 30
        while (home / "owner.json").exists() and time.perf_counter() < gone:  # it removes its file as it stops
            time.sleep(0.05)
        (home / "owner.json").unlink(missing_ok=True)  # the next owner's start is told by its own file


def _lingering(home: Path, env: dict[str, str], runs: int, linger: float) -> tuple[float, Figures]:
    """The first command's seconds (it starts the owner), and the figures of the commands after it."""
    env = {**env, "VECMEM_OWNER_LINGER": f"{linger:g}"}
    first = _timed(_commands()["vecmem search (en)"](-2), env)
    try:
        return first, _figures({"": env}, runs)[""]
    finally:
        owner = json.loads((home / "owner.json").read_text(encoding="utf-8"))
        os.kill(int(owner["pid"]), signal.SIGTERM)
        gone = time.perf_counter() + 30
        while (home / "owner.json").exists() and time.perf_counter() < gone:
            time.sleep(0.05)


def _cell(figure: dict[str, float]) -> str:
    return f"{figure['median_s']:.2f} ({figure['min_s']:.2f}-{figure['max_s']:.2f})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1000, help="memories in the store (default 1000)")
    parser.add_argument("--runs", type=int, default=5, help="timed runs of each command (default 5)")
    parser.add_argument("--owner", action="store_true", help="also time them through `vecmem serve`")
    parser.add_argument("--linger", type=float, metavar="S",
                        help="also time them with VECMEM_OWNER_LINGER=S (this checkout only)")
    parser.add_argument("--against", type=Path, metavar="DIR",
                        help="also time another checkout's vecmem (its root folder), alternating with this one")
    parser.add_argument("--second-view", choices=("off", "use"), default="off",
                        help="VECMEM_SECOND_VIEW of the store and every command (default off)")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of tables")
    args = parser.parse_args(argv)
    import vecmem

    this = str(Path(vecmem.__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory(prefix="vecmem-bench-cli-") as folder:
        home, cache = Path(folder) / "home", Path(folder) / "cache"
        seeded_s = _seed(home, cache, args.n, args.second_view)
        envs = {this: _env(home, cache, second_view=args.second_view)}
        homes = {this: home}
        if args.against is not None:  # a copy of the store of its own: the files each keeps beside the store
            other = homes[str(args.against.resolve())] = Path(folder) / "home-against"  # may be of other formats
            shutil.copytree(home, other)
            envs[str(args.against.resolve())] = _env(other, cache, args.against.resolve(), args.second_view)
        load_before = os.getloadavg()
        tables = {"no owner": _figures(envs, args.runs)}
        if args.owner:
            tables["through vecmem serve"] = {label: _through_owner(homes[label], label, env, args.runs)
                                              for label, env in envs.items()}
        first_s = None
        if args.linger:
            first_s, figures = _lingering(home, envs[this], args.runs, args.linger)
            tables[f"with VECMEM_OWNER_LINGER={args.linger:g}"] = {this: figures}
        load_after = os.getloadavg()
    report = {"memories": args.n, "second_view": args.second_view, "seeded_s": round(seeded_s, 1), "runs": args.runs,
              "load_average": [round(load_before[0], 2), round(load_after[0], 2)], "figures": tables,
              "lingering_first_s": None if first_s is None else round(first_s, 3)}
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    print(f"{args.n} memories (seeded in {report['seeded_s']} s), second view {args.second_view}; {args.runs} runs each, in seconds: median "
          f"(fastest-slowest); 1-minute load average {load_before[0]:.2f} before, {load_after[0]:.2f} after")
    for mode, columns in tables.items():
        print(f"\n{mode}:")
        for number, label in enumerate(columns, start=1):
            print(f"  [{number}] vecmem of {label}")
        print(f"  {'command':<22}" + "".join(f"{f'[{number}]':>22}" for number in range(1, len(columns) + 1)))
        for command in _commands():
            print(f"  {command:<22}" + "".join(f"{_cell(figures[command]):>22}" for figures in columns.values()))
        if mode.startswith("with VECMEM_OWNER_LINGER") and first_s is not None:
            print(f"  the first command (vecmem search, starting the owner): {first_s:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
