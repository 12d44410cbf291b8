"""Two runs of the evaluation on the same queries, compared query by query: the gap and its 95% interval.

    python scripts/eval_hit_rate.py ... --per-query before.json
    VECMEM_KEYWORD_COVERAGE=1 python scripts/eval_hit_rate.py ... --per-query after.json
    python scripts/compare_runs.py before.json after.json [--measure recall@5 recall@10]
    python scripts/compare_runs.py run.json --runs "dense 1/0/0" "hybrid 1/0/0"

With two files, each run (mode and weights) that both hold is compared, the second file's minus the first's; with
one file and ``--runs A B``, run B minus run A of that file. For each measure: both means, the gap, its 95%
interval (the queries resampled with replacement, seeded: eval_hit_rate.paired_interval) and how many queries'
scores differ. A gap whose interval holds 0 is one chance alone could make. Figures are printed, never asserted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from eval_hit_rate import ScriptParser, paired_gap  # a sibling script, after the path line


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict) or not isinstance(data.get("runs"), dict) or not isinstance(data.get("queries"), list):
        raise ValueError(f"{path} is not a file of eval_hit_rate.py --per-query")
    return data


def compare(before: list[dict[str, float]], after: list[dict[str, float]], measure: str) -> dict[str, float]:
    """eval_hit_rate.paired_gap, a measure the runs lack said as bad input."""
    try:
        return paired_gap(before, after, measure)
    except KeyError as exc:
        raise ValueError(f"no {measure} in the runs (--k of the evaluation)") from exc


def pairs(files: list[dict[str, Any]], runs: list[str] | None) -> list[tuple[str, list[Any], list[Any]]]:
    """(name, before's scores, after's scores) of every comparison asked for."""
    if len(files) == 2:
        if files[0]["queries"] != files[1]["queries"]:
            raise ValueError("the two files score different queries (another data set, --k or --conversations)")
        shared = [name for name in files[0]["runs"] if name in files[1]["runs"]]
        if runs:
            shared = [name for name in shared if name in runs]
        if not shared:
            raise ValueError("the two files share no run (mode and weights)")
        return [(name, files[0]["runs"][name], files[1]["runs"][name]) for name in shared]
    if not runs or len(runs) != 2:
        raise ValueError("with one file, name the two runs to compare: --runs A B")
    missing = [name for name in runs if name not in files[0]["runs"]]
    if missing:
        raise ValueError(f"no run {missing[0]!r} in the file (it holds: {', '.join(files[0]['runs'])})")
    return [(f"{runs[1]} minus {runs[0]}", files[0]["runs"][runs[0]], files[0]["runs"][runs[1]])]


def main(argv: list[str] | None = None) -> int:
    parser = ScriptParser("compare_runs", description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, metavar="FILE.json", help="one or two --per-query files")
    parser.add_argument("--runs", nargs="+", metavar="RUN", help="the runs to compare (with one file: exactly two)")
    parser.add_argument("--measure", nargs="+", default=["recall@5", "recall@10"], help="default: recall@5 recall@10")
    args = parser.parse_args(argv)
    if len(args.files) > 2:
        parser.error("at most two files")
    try:
        files = [_load(path) for path in args.files]
        rows = [(name, measure, compare(before, after, measure))
                for name, before, after in pairs(files, args.runs) for measure in args.measure]
    except ValueError as exc:
        print(f"compare_runs: error: {exc}", file=sys.stderr)
        return 2
    print(f"{files[0].get('dataset', '')}: {len(files[0]['queries'])} queries; gap and its 95% interval in points")
    print("| run | measure | before | after | gap | 95% interval | moved |")
    print("|---|---|---|---|---|---|---|")
    for name, measure, row in rows:
        print(f"| {name} | {measure} | {100 * row['before']:.1f} | {100 * row['after']:.1f} | {100 * row['gap']:+.1f} | "
              f"{100 * row['low']:+.1f} to {100 * row['high']:+.1f} | {row['moved']:.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
