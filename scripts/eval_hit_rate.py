"""Recall evaluation of vecmem retrieval on LoCoMo, MADial-Bench and the project's own native test sets.

    python scripts/eval_hit_rate.py --format locomo --data ../shared/data/locomo/locomo10.json
    python scripts/eval_hit_rate.py --format madial --data ../shared/data/madial_bench/zh
    python scripts/eval_hit_rate.py --format vecmem --data data/eval/native_en.json --mode dense keyword hybrid
    python scripts/eval_hit_rate.py --format locomo --data ../shared/data/locomo/locomo10.json --through-agent

Everything goes through the public vecmem API: the memories are added with ``MemoryBank.add_records`` to a
temporary store and every query is a ``MemoryBank.search``; the embedding model is the configured one
(``VECMEM_EMBED_MODEL``). One index serves every ``--mode``.

Protocols (see ../shared/data/README.md):
* LoCoMo: each conversation is its own corpus (its own user), one memory per turn with content
  ``<speaker> said, "<text>"`` (plus `` and shared <caption>``), the question as the query, recall@k over the
  evidence turns, all 1,986 questions, empty evidence counting 1. vecmem's turn context (``--context 2 1``:
  the two turns before and the one after, same session) is added as keyword-only ``context``; ``--context 0 0``
  indexes the bare protocol text. Each turn is dated by its session; "now" is the conversation's last session.
* MADial-Bench: each dialogue's user's memories as its candidates (a memory's user: its ``user-id``, else the
  same id's in the other language's file, see eval_data.py), ``str({"scene", "emotion", "event"})`` as the memory
  text, ``"".join(dialogue[:test_turn])`` as the query, recall@k = |top-k ∩ relevant| / |relevant|. Its
  categories are the number of relevant memories (1, 2, 3 relevant): what makes a dialogue harder, and the same
  in both languages, where a scene is named in each language and a dialogue's memories may span scenes.
* vecmem (native): a JSON file with memories and queries, including ``forbidden`` ids; leak@k must be 0.

``--baselines`` adds plain BM25 and plain cosine over the same users' memories and the same queries, outside
vecmem's pipeline (eval_baselines.py); with dense, keyword and hybrid the table ends with a fusion check: hybrid
minus the better of dense and keyword at R@5 and R@10, which should never be below -1 point.

``--through-agent`` (LoCoMo, MADial-Bench) also feeds the conversations to the offline memory agent and scores
recall of the evidence through the memories' provenance, beside the per-turn figures and with the tokens each
protocol stores (scripts/eval_agent.py), and recall within the prompt's budget for both protocols: the memories
taken in rank order while their text fits 512 and 2,048 tokens (``--budgets``), their evidence recall and the
share of the reference answer's content words in their text (scripts/eval_budget.py). ``--conversations N``
keeps LoCoMo's first N conversations. ``--floor F`` counts only hits whose relevance reaches F: what a prompt
would get under ``VECMEM_RELEVANCE_FLOOR=F``.

Metrics: recall@k, hit@k (any relevant in the top k), mrr (first relevant within the top max-k), ndcg@k
(binary gains), leak@k (share of queries with a forbidden id in the top k). A query without relevant ids counts
1 for recall, hit, mrr and ndcg (the LoCoMo protocol's rule for empty evidence).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from vecmem import Embedder, MemoryBank, RankWeights, Settings, VecmemError, embedder_for
from vecmem.config import SEARCH_MODES
from vecmem.retrieval.budget import TiktokenCounter

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling modules below, however this file is run
import eval_agent
import eval_baselines
import eval_budget
from eval_data import (
    MADIAL_USER,
    DataError,
    Dataset,
    Query,
    load_locomo,
    load_madial,
    load_native,
    locomo_time,
    madial_files,
    madial_memories,
    madial_speakers,
)

__all__ = ["MADIAL_USER", "DataError", "Dataset", "ModeResult", "Query", "average", "load_locomo", "load_madial",
           "load_native", "main", "markdown", "run", "score_query"]

# ---------------------------------------------------------------------------------------------- metrics


def score_query(ranked: list[str], query: Query, ks: list[int]) -> dict[str, float]:
    relevant = set(query.relevant)
    result: dict[str, float] = {}
    for k in ks:
        top = ranked[:k]
        found = len(relevant & set(top))
        if relevant:
            result[f"recall@{k}"] = found / len(relevant)
            result[f"hit@{k}"] = float(found > 0)
            dcg = sum(1 / math.log2(rank + 2) for rank, memory_id in enumerate(top) if memory_id in relevant)
            ideal = sum(1 / math.log2(rank + 2) for rank in range(min(len(relevant), k)))
            result[f"ndcg@{k}"] = dcg / ideal
        else:
            result[f"recall@{k}"] = result[f"hit@{k}"] = result[f"ndcg@{k}"] = 1.0
        result[f"leak@{k}"] = float(bool(set(query.forbidden) & set(top)))
    first = next((rank for rank, memory_id in enumerate(ranked) if memory_id in relevant), None)
    result["mrr"] = 1.0 if not relevant else (0.0 if first is None else 1 / (first + 1))
    return result


def average(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: sum(row[key] for row in rows) / len(rows) for key in rows[0]} if rows else {}


# ---------------------------------------------------------------------------------------------- running


@dataclass
class ModeResult:
    mode: str
    overall: dict[str, float]
    per_category: dict[str, dict[str, float]]
    counts: dict[str, int]
    curve: list[float]  # recall@1 .. recall@max_k
    seconds: float
    weights: str = ""  # the reranker weights it ran under ("1/0/0"); "" for the baselines, which have none
    budget: dict[int, dict[str, float]] = field(default_factory=dict)  # per budget (eval_budget.BudgetTotals)
    per_query: list[dict[str, float]] = field(default_factory=list)  # score_query of each query, in order

    @property
    def label(self) -> str:
        """How the tables name it: vecmem's modes by name, the baselines as "plain BM25" / "plain cosine"."""
        return eval_baselines.BASELINES.get(self.mode, self.mode)


def weights_name(weights: RankWeights) -> str:
    return f"{weights.similarity:g}/{weights.recency:g}/{weights.importance:g}{' gated' if weights.gated else ''}"


def summarize(mode: str, dataset: Dataset, ranked: list[list[str]], ks: list[int], seconds: float) -> ModeResult:
    """The metrics of one ranking per query (``ranked[i]`` for ``dataset.queries[i]``), overall and per category."""
    depth = max(ks)
    rows = [(query, score_query(ids, query, ks),
             [score_query(ids, query, [k])[f"recall@{k}"] for k in range(1, depth + 1)])
            for query, ids in zip(dataset.queries, ranked, strict=True)]
    categories: dict[str, list[dict[str, float]]] = {}
    for query, scores, _ in rows:
        categories.setdefault(query.category, []).append(scores)
    return ModeResult(
        mode=mode,
        overall=average([scores for _, scores, _ in rows]),
        per_category={name: average(items) for name, items in sorted(categories.items())},
        counts={name: len(items) for name, items in sorted(categories.items())},
        curve=[sum(c[i] for _, _, c in rows) / len(rows) for i in range(depth)] if rows else [0.0] * depth,
        seconds=seconds,
        per_query=[scores for _, scores, _ in rows],
    )


def run(
    dataset: Dataset,
    modes: list[str],
    ks: list[int],
    settings: Settings,
    progress: bool,
    embedder: Embedder | None = None,
    floor: float = 0.0,
    baselines: bool = False,
    weightings: Sequence[RankWeights] = (),
    budgets: Sequence[int] = (),
) -> list[ModeResult]:
    """vecmem's ``modes`` under each of ``weightings`` (default: the settings' weights) over one index of
    ``dataset`` (built once: on LoCoMo most of a run's time), then (``baselines``) plain BM25 and plain cosine
    over the same memories and queries (eval_baselines.py), the latter with the vectors the index was built from;
    with ``budgets``, vecmem's modes also score recall within each budget of tokens (eval_budget.py)."""
    from rich.progress import Progress

    clock_now = {"value": datetime.now(UTC)}
    recording = eval_baselines.RecordingEmbedder(embedder or embedder_for(settings))
    with tempfile.TemporaryDirectory(prefix="vecmem-eval-") as scratch:
        base = settings.with_changes(home=Path(scratch), chroma_url=None)
        indexer = MemoryBank(base, embedder=recording, clock=lambda: clock_now["value"])
        with Progress(transient=True, disable=not progress) as bar:
            task = bar.add_task(f"indexing {len(dataset.records)} memories", total=len(dataset.records))
            step = 256
            for start in range(0, len(dataset.records), step):
                indexer.add_records(dataset.records[start : start + step], overwrite=True)
                bar.advance(task, len(dataset.records[start : start + step]))
        results = []
        depth = max(ks)
        for weights, mode in [(w, m) for w in (weightings or [settings.weights]) for m in modes]:
            bank = MemoryBank(base.with_changes(search_mode=mode, weights=weights), embedder=recording,
                              clock=lambda: clock_now["value"])
            # searched as a long-running process (the chat, `vecmem serve`) searches: with each user's vectors held,
            # so the dense side is an exact scan (retrieval/index/held.py), not the index's approximate neighbours
            for user in sorted({record.user_id for record in dataset.records}):
                bank.warm_up(user_id=user)
            ranked: list[list[str]] = []
            totals = eval_budget.BudgetTotals()
            count = TiktokenCounter(settings.tokenizer).count
            started = time.perf_counter()
            with Progress(transient=True, disable=not progress) as bar:
                task = bar.add_task(f"{mode}: {len(dataset.queries)} queries", total=len(dataset.queries))
                for query in dataset.queries:
                    clock_now["value"] = dataset.now.get(query.user_id, clock_now["value"])
                    hits = bank.search(query.text, depth, user_id=query.user_id, session_id=query.session_id,
                                       types=query.types, record_access=False)
                    ranked.append([hit.id for hit in hits if hit.relevance is None or hit.relevance >= floor])
                    if budgets:  # searched again, deeper, so that the R@k figures stay those of a depth-k search
                        deep = hits if depth >= eval_budget.BUDGET_DEPTH else bank.search(
                            query.text, eval_budget.BUDGET_DEPTH, user_id=query.user_id,
                            session_id=query.session_id, types=query.types, record_access=False)
                        totals.add([eval_budget.BudgetHit(hit.record.content, (hit.id,)) for hit in deep
                                    if hit.relevance is None or hit.relevance >= floor],
                                   query.relevant, query.answer, count, budgets)
                    bar.advance(task)
            result = summarize(mode, dataset, ranked, ks, time.perf_counter() - started)
            result.weights = weights_name(weights)
            result.budget = totals.summary()
            results.append(result)
    if baselines:
        for name in eval_baselines.BASELINES:
            started = time.perf_counter()
            ranked = eval_baselines.rank(name, dataset.records, dataset.queries, depth, recording)
            results.append(summarize(name, dataset, ranked, ks, time.perf_counter() - started))
    return results


# the target: hybrid never below the better of its two sides by more than a point (exactly a point is not more:
# 0.82 - 0.83 is -0.01000000000000001 in floating point, so the comparison allows for its last bits)
FUSION_TOLERANCE = 0.01
BOOTSTRAP_SAMPLES = 2000  # resamples of the queries for a 95% interval (paired_interval)


def fusion_checks(results: list[ModeResult], ks: list[int]) -> dict[str, dict[str, tuple[float, float, float]]]:
    """Per weight setting where dense, keyword and hybrid all ran: hybrid minus the better of the two at R@5 and
    R@10 (those of ``ks``), with the difference's 95% interval: (difference, low, high)."""
    checks = {}
    for weights in dict.fromkeys(r.weights for r in results if r.weights):
        by_mode = {r.mode: r for r in results if r.weights == weights}
        if {"dense", "keyword", "hybrid"} <= by_mode.keys():
            check = {}
            for key in (f"recall@{k}" for k in (5, 10) if k in ks):
                better = max(by_mode["dense"], by_mode["keyword"], key=lambda result: result.overall[key])
                gap = paired_gap(better.per_query, by_mode["hybrid"].per_query, key)
                check[key] = (gap["gap"], gap["low"], gap["high"])
            checks[weights] = check
    return checks


def fusion_holds(gaps: Iterable[float]) -> bool:
    """Whether no gap (hybrid minus its better side) is below FUSION_TOLERANCE's point, a point exactly allowed."""
    return min(gaps, default=0.0) >= -FUSION_TOLERANCE - 1e-9


def paired_gap(before: Sequence[dict[str, float]], after: Sequence[dict[str, float]], measure: str) -> dict[str, float]:
    """Two rankings of the same queries (``score_query`` rows, in order) on ``measure``: both means, the gap (after
    minus before), its 95% interval (``paired_interval``) and how many queries' scores differ. KeyError when the
    rows lack the measure."""
    differences = [b[measure] - a[measure] for a, b in zip(before, after, strict=True)]
    low, high = paired_interval(differences)
    mean_before = sum(a[measure] for a in before) / len(before) if before else 0.0
    gap = sum(differences) / len(differences) if differences else 0.0
    return {"before": mean_before, "after": mean_before + gap, "gap": gap, "low": low, "high": high,
            "moved": sum(1 for difference in differences if difference)}


def paired_interval(differences: Sequence[float], samples: int = BOOTSTRAP_SAMPLES) -> tuple[float, float]:
    """The 95% interval of the mean of per-query differences between two rankings of the same queries, by
    resampling the queries with replacement (the percentile bootstrap, seeded: the same figures every run). On a
    set of 76 queries one query moves recall by up to 1.3 points, and this says which gaps chance alone could
    make."""
    if not differences:
        return 0.0, 0.0
    values = np.asarray(differences, dtype=np.float64)
    rng = np.random.default_rng(0)
    chunk = max(1, 4_000_000 // len(values))  # resamples drawn at a time: a few tens of MB however many queries
    means = np.concatenate([values[rng.integers(0, len(values), size=(min(chunk, samples - done), len(values)))]
                            .mean(axis=1) for done in range(0, samples, chunk)])
    low, high = np.percentile(means, [2.5, 97.5])
    return float(low), float(high)


def markdown(dataset: Dataset, results: list[ModeResult], ks: list[int], settings: Settings) -> str:
    focus = 5 if 5 in ks else ks[-1]
    columns = [f"recall@{k}" for k in ks] + [f"hit@{focus}", "mrr", f"ndcg@{focus}", f"leak@{ks[-1]}"]
    users = len({r.user_id for r in dataset.records})
    weightings = list(dict.fromkeys(r.weights for r in results if r.weights)) or [weights_name(settings.weights)]
    several = len(weightings) > 1  # then a column says which weights each row ran under
    lines = [
        f"### {dataset.name}: {len(dataset.queries)} queries, {len(dataset.records)} memories of {users} "
        f"user{'s' if users != 1 else ''}; weights {' and '.join(weightings)}, "
        f"dense weight {settings.dense_weight:g}",
        "",
        f"| mode | {'weights | ' if several else ''}category | n | " + " | ".join(columns) + " |",
        f"|---|{'---|' if several else ''}---|---|" + "---|" * len(columns),
    ]
    for result in results:
        rows = [("all", result.overall, len(dataset.queries))]
        if len(result.per_category) > 1:
            rows += [(name, metrics, result.counts[name]) for name, metrics in result.per_category.items()]
        for name, metrics, count in rows:
            cells = [f"{100 * metrics[c]:.1f}" for c in columns]
            weights = f"{result.weights or '-'} | " if several else ""
            lines.append(f"| {result.label} | {weights}{name} | {count} | " + " | ".join(cells) + " |")
    lines.append("")
    for weights, check in fusion_checks(results, ks).items():
        verdict = "not below its better side by more than a point" \
            if fusion_holds(value for value, _, _ in check.values()) else "BELOW its better side by more than a point"
        lines.append(f"Fusion check{f' ({weights})' if several else ''} (hybrid minus the better of dense and "
                     "keyword; in brackets its 95% interval, resampling the queries): " + ", ".join(
                         f"R@{key.split('@')[1]} {100 * value:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]"
                         for key, (value, low, high) in check.items()) + f": {verdict}.")
    lines.append("Figures are percentages. " + ", ".join(
        f"{r.label}{f' ({r.weights})' if several and r.weights else ''}: {r.seconds:.1f} s" for r in results)
        + f" for {len(dataset.queries)} queries")
    return "\n".join(lines)


def run_label(result: ModeResult) -> str:
    """How a run is named in a per-query file: "hybrid 1/0/0", "plain BM25"."""
    return f"{result.label} {result.weights}".strip()


def per_query_json(dataset: Dataset, results: list[ModeResult]) -> dict[str, Any]:
    """Each query's scores per run (``--per-query``): what scripts/compare_runs.py reads to compare two runs on
    the same queries."""
    return {"dataset": dataset.name, "queries": [query.id for query in dataset.queries],
            "runs": {run_label(result): result.per_query for result in results}}


def as_json(dataset: Dataset, result: ModeResult) -> dict[str, Any]:
    return {
        "dataset": dataset.name,
        "mode": result.mode,
        **({"weights": result.weights} if result.weights else {}),
        "n_queries": len(dataset.queries),
        "n_memories": len(dataset.records),
        **{key: round(value, 6) for key, value in result.overall.items()},
        "per_category": {
            name: {"n_queries": result.counts[name], **{k: round(v, 6) for k, v in metrics.items()}}
            for name, metrics in result.per_category.items()
        },
        "seconds": round(result.seconds, 2),
        **({"budget": _budget_json(result.budget)} if result.budget else {}),
    }


def _budget_json(budget: dict[int, dict[str, float]]) -> dict[str, dict[str, float | None]]:
    return {str(tokens): {key: None if value != value else round(value, 6) for key, value in figures.items()}
            for tokens, figures in budget.items()}


def plot(results: list[ModeResult], dataset: Dataset, target: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for result in results:
        ks = list(range(1, len(result.curve) + 1))
        axes.plot(ks, [100 * value for value in result.curve], marker="o", label=result.label)
    axes.set_xlabel("k")
    axes.set_ylabel("recall@k (%)")
    axes.set_title(f"{dataset.name}: recall@k by retrieval mode")
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(target, dpi=120)


# ---------------------------------------------------------------------------------------------- command line


class ScriptParser(argparse.ArgumentParser):
    """A parser whose usage errors are one line on stderr, "<name>: error: ...", and exit 2 (compare_runs.py too)."""

    def __init__(self, name: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.name = name

    def error(self, message: str) -> Any:
        print(f"{self.name}: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(
    argv: list[str] | None = None,
    *,
    settings_factory: Callable[[], Settings] | None = None,
    embedder: Embedder | None = None,
) -> int:
    parser = ScriptParser("eval_hit_rate", description="Recall of vecmem retrieval on LoCoMo, MADial-Bench or a native test set.")
    parser.add_argument("--format", required=True, choices=["vecmem", "locomo", "madial"])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--k", nargs="+", type=int, default=[1, 3, 5, 10])
    parser.add_argument("--mode", nargs="+", choices=SEARCH_MODES, help="default: the configured search mode")
    parser.add_argument("--weights", nargs=3, type=float, metavar=("SIM", "REC", "IMP"), action="append",
                        help="reranker weights (default: the configured 0.6 0.2 0.2); 1 0 0 = similarity alone; "
                             "repeated: each setting over the same index, in one table")
    parser.add_argument("--gated-weights", nargs=3, type=float, metavar=("SIM", "REC", "IMP"), action="append",
                        help="as --weights, with the priors gated by max(1 - similarity, 0.2) (VECMEM_GATED_PRIORS); "
                             "after every --weights, in the same table")
    parser.add_argument("--decay", type=float, help="recency decay per day (default: the configured 0.01)")
    parser.add_argument("--dense-weight", type=float, help="hybrid fusion weight of the dense side (default 0.6)")
    parser.add_argument("--context", nargs=2, type=int, default=[2, 1], metavar=("BEFORE", "AFTER"),
                        help="LoCoMo: turns before and after indexed as keyword context (0 0: none)")
    parser.add_argument("--lang", choices=["zh", "en"], help="MADial: the language, when --data is the root")
    parser.add_argument("--through-agent", action="store_true",
                        help="LoCoMo, MADial: also feed the conversations to the offline memory agent and score recall "
                             "through the memories' provenance, with the tokens each protocol stores")
    parser.add_argument("--budgets", nargs="*", type=int, metavar="TOKENS",
                        help="also recall within these prompt budgets of tokens: evidence recall and answer coverage "
                             "of the memories that fit, in rank order (eval_budget.py); default with --through-agent "
                             "512 2048, else none; --budgets alone: none")
    parser.add_argument("--conversations", type=int, metavar="N",
                        help="LoCoMo: only the first N conversations (the whole set: 10)")
    parser.add_argument("--floor", type=float, default=0.0,
                        help="count only hits whose relevance reaches this (what a prompt gets under that floor)")
    parser.add_argument("--baselines", action="store_true",
                        help="also plain BM25 and plain cosine on the same memories and queries (eval_baselines.py)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--plot", type=Path, metavar="FILE.png", help="draw recall@k curves per mode")
    parser.add_argument("--per-query", type=Path, metavar="FILE.json",
                        help="also write each query's scores per mode, for scripts/compare_runs.py")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    try:
        if any(k < 1 for k in args.k):
            raise DataError("every --k must be at least 1")
        if args.conversations is not None and args.conversations < 1:
            raise DataError("--conversations must be at least 1")
        budgets = sorted(set(args.budgets if args.budgets is not None else [512, 2048] if args.through_agent else []))
        if any(b < 1 for b in budgets):
            raise DataError("every --budgets must be at least 1")
        if not 0.0 <= args.floor <= 1.0:
            raise DataError("--floor must be between 0 and 1")
        if args.through_agent and args.format == "vecmem":
            raise DataError("--through-agent needs conversations: --format locomo or madial")
        if args.through_agent and len(args.weights or []) + len(args.gated_weights or []) > 1:
            raise DataError("--through-agent takes one --weights")
        settings = (settings_factory or Settings.from_env)()
        changes: dict[str, Any] = {}
        weightings = [RankWeights(*w) for w in args.weights or []]
        weightings += [RankWeights(*w, gated=True) for w in args.gated_weights or []]
        if weightings:
            changes["weights"] = weightings[0]
        if args.decay is not None:
            changes["recency_decay_per_day"] = args.decay
        if args.dense_weight is not None:
            changes["dense_weight"] = args.dense_weight
        settings = settings.with_changes(**changes)
        if args.format == "locomo":
            dataset = load_locomo(args.data, before=args.context[0], after=args.context[1],
                                  conversations=args.conversations)
        elif args.format == "madial":
            dataset = load_madial(args.data, args.lang)
        else:
            dataset = load_native(args.data)
        ks = sorted(set(args.k))
        modes = args.mode or [settings.search_mode]
        progress = not args.quiet and not args.json
        results = run(dataset, modes, ks, settings, progress=progress, embedder=embedder, floor=args.floor,
                      baselines=args.baselines, weightings=weightings, budgets=budgets)
        through = _through_agent(args, dataset, modes, ks, settings, progress, embedder, budgets) \
            if args.through_agent else None
    except (DataError, VecmemError) as exc:
        print(f"eval_hit_rate: error: {exc}", file=sys.stderr)
        return 2
    if args.per_query:
        try:
            args.per_query.write_text(json.dumps(per_query_json(dataset, results), ensure_ascii=False), encoding="utf-8")
        except OSError as exc:
            print(f"eval_hit_rate: error: cannot write {args.per_query}: {exc}", file=sys.stderr)
            return 2
    if through is not None:
        per_turn_tokens = sum(map(TiktokenCounter(settings.tokenizer).count, (r.content for r in dataset.records)))
        return _print_through_agent(args, dataset, results, through, ks, per_turn_tokens)
    if args.json:
        objects = [as_json(dataset, result) for result in results]
        found = fusion_checks(results, ks)
        checks = {w: {k: round(v, 6) for k, (v, _, _) in check.items()} for w, check in found.items()}
        intervals = {w: {k: [round(low, 6), round(high, 6)] for k, (_, low, high) in check.items()}
                     for w, check in found.items()}
        several: dict[str, Any]
        if len(weightings) > 1:  # a mode runs once per weight setting: keyed "hybrid 1/0/0"
            several = {"modes": {f"{o['mode']} {o['weights']}" if "weights" in o else o["mode"]: o for o in objects},
                       "fusion_check": checks, "fusion_check_95": intervals}
        else:
            several = {"modes": {o["mode"]: o for o in objects}}
            if checks:
                (several["fusion_check"],), (several["fusion_check_95"],) = checks.values(), intervals.values()
        print(json.dumps(objects[0] if len(objects) == 1 else several, ensure_ascii=False, indent=2))
    else:
        print(markdown(dataset, results, ks, settings))
        if budgets:
            print()
            print(budget_markdown(dataset, results, []))
    if args.plot:
        plot(results, dataset, args.plot)
        if not args.json:
            print(f"plot written to {args.plot}")
    return 0


def _through_agent(args: argparse.Namespace, dataset: Dataset, modes: list[str], ks: list[int], settings: Settings,
                   progress: bool, embedder: Embedder | None, budgets: Sequence[int]) -> list[eval_agent.AgentResult]:
    try:
        if args.format == "locomo":
            conversations = eval_agent.locomo_feeds(args.data, locomo_time)[:args.conversations]
        else:  # each user's memories told by that user, as load_madial assigns them
            memory_file, dialogue_file = madial_files(args.data, args.lang)
            conversations = eval_agent.madial_feeds(madial_memories(memory_file, dialogue_file),
                                                    madial_speakers(dialogue_file))
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise DataError(f"cannot read the conversations of {args.data}: {exc}") from exc
    return eval_agent.run_through_agent(conversations, dataset.queries, dataset.now, modes, ks, settings,
                                        embedder=embedder, progress=progress, floor=args.floor, budgets=budgets)


def _print_through_agent(args: argparse.Namespace, dataset: Dataset, results: list[ModeResult],
                         through: list[eval_agent.AgentResult], ks: list[int], per_turn_tokens: int) -> int:
    if args.json:
        print(json.dumps({"dataset": dataset.name, "n_queries": len(dataset.queries),
                          "per_turn": {r.mode: {**{k: round(v, 6) for k, v in r.overall.items() if k.startswith("recall@")},
                                                "memories": len(dataset.records), "stored_tokens": per_turn_tokens,
                                                **({"budget": _budget_json(r.budget)} if r.budget else {})}
                                       for r in results},
                          "through_agent": eval_agent.as_json(through)}, ensure_ascii=False, indent=2))
    else:
        print(eval_agent.markdown(dataset.name, results, through, ks, per_turn_tokens, len(dataset.records)))
        if any(r.budget for r in [*results, *through]):
            print()
            print(budget_markdown(dataset, results, through))
    return 0


def budget_markdown(dataset: Dataset, results: list[ModeResult], through: list[eval_agent.AgentResult]) -> str:
    """Recall within the budget, per protocol, mode and budget (eval_budget.py)."""
    rows = [("per turn", r.label, r.budget) for r in results if r.budget]
    rows += [("through the agent", r.mode, r.budget) for r in through if r.budget]
    return f"### {dataset.name} within the prompt's budget\n\n" + eval_budget.markdown(rows, len(dataset.queries))


if __name__ == "__main__":
    sys.exit(main())
