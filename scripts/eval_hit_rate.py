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
* MADial-Bench: one user's memories as candidates, ``str({"scene", "emotion", "event"})`` as the memory text,
  ``"".join(dialogue[:test_turn])`` as the query, recall@k = |top-k ∩ relevant| / |relevant|.
* vecmem (native): a JSON file with memories and queries, including ``forbidden`` ids; leak@k must be 0.

``--through-agent`` (LoCoMo, MADial-Bench) also feeds the conversations to the offline memory agent and scores
recall of the evidence through the memories' provenance, beside the per-turn figures and with the tokens each
protocol stores (scripts/eval_agent.py). ``--floor F`` counts only hits whose relevance reaches F: what a prompt
would get under ``VECMEM_RELEVANCE_FLOOR=F``.

Metrics: recall@k, hit@k (any relevant in the top k), mrr (first relevant within the top max-k), ndcg@k
(binary gains), leak@k (share of queries with a forbidden id in the top k). A query without relevant ids counts
1 for recall, hit, mrr and ndcg (the LoCoMo protocol's rule for empty evidence).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from vecmem import Embedder, MemoryBank, MemoryRecord, RankWeights, Settings, TiktokenCounter, VecmemError
from vecmem.config import SEARCH_MODES

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling module below, however this file is run
import eval_agent

LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}


@dataclass
class Query:
    id: str
    text: str
    user_id: str
    relevant: list[str]
    forbidden: list[str] = field(default_factory=list)
    session_id: str | None = None
    types: list[str] | None = None
    category: str = "all"


@dataclass
class Dataset:
    name: str
    records: list[MemoryRecord]
    queries: list[Query]
    now: dict[str, datetime]  # per user: the time the questions are asked


class DataError(Exception):
    """The data file is missing or not in the expected format."""


# ---------------------------------------------------------------------------------------------- loaders


def _locomo_time(text: str) -> datetime:
    """LoCoMo session times look like '1:56 pm on 8 May, 2023'."""
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError as exc:
        raise DataError(f"unreadable LoCoMo session time {text!r}") from exc


def load_locomo(path: Path, *, before: int, after: int) -> Dataset:
    if path.is_dir():
        path = path / "locomo10.json"
    try:
        conversations = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read LoCoMo data {path}: {exc}") from exc
    records: list[MemoryRecord] = []
    queries: list[Query] = []
    now: dict[str, datetime] = {}
    for conversation in conversations:
        user = conversation["sample_id"]
        body = conversation["conversation"]
        sessions = sorted((k for k in body if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1]))
        for session in sessions:
            when = _locomo_time(body[f"{session}_date_time"])
            turns = body[session]
            for index, turn in enumerate(turns):
                text = f'{turn["speaker"]} said, "{turn["text"]}"'
                if turn.get("blip_caption"):
                    text += f' and shared {turn["blip_caption"]}'
                around = [t["text"] for t in turns[max(0, index - before) : index]]
                around += [t["text"] for t in turns[index + 1 : index + 1 + after]]
                records.append(MemoryRecord(
                    id=turn["dia_id"], content=text, user_id=user, created_at=when, context=" ".join(around),
                    source="manual",
                ))
            now[user] = max(now.get(user, when), when)
        turn_ids = {r.id for r in records if r.user_id == user}
        for number, qa in enumerate(conversation["qa"]):
            evidence: list[str] = []
            for item in qa.get("evidence", []):
                for part in re.split(r"[;, ]+", str(item)):
                    match = re.fullmatch(r"D(\d+):0*(\d+)", part.strip())
                    turn_id = f"D{match.group(1)}:{match.group(2)}" if match else None
                    if turn_id in turn_ids and turn_id not in evidence:
                        evidence.append(turn_id)
            queries.append(Query(
                id=f"{user}#{number}", text=qa["question"], user_id=user, relevant=evidence,
                category=LOCOMO_CATEGORIES.get(qa.get("category"), str(qa.get("category"))),
            ))
    return Dataset("LoCoMo", records, queries, now)


MADIAL_USER = "madial-user-1"


def madial_files(path: Path, lang: str | None) -> tuple[Path, Path]:
    """The memory and dialogue files of one language of MADial-Bench."""
    if (path / "zh").is_dir() or (path / "en").is_dir():
        if lang is None:
            raise DataError(f"{path} holds several languages; choose one with --lang zh|en")
        path = path / lang
    memory_files = sorted(path.glob("*-memory.json"))
    dialogue_files = sorted(path.glob("*-dialogue.json"))
    if len(memory_files) != 1 or len(dialogue_files) != 1:
        raise DataError(f"{path} should hold one *-memory.json and one *-dialogue.json")
    return memory_files[0], dialogue_files[0]


def load_madial(path: Path, lang: str | None) -> Dataset:
    memory_file, dialogue_file = madial_files(path, lang)
    path = memory_file.parent
    user = MADIAL_USER
    records = []
    newest = datetime(1970, 1, 1, tzinfo=UTC)
    for line in memory_file.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        for key, memory in json.loads(line).items():
            when = datetime.fromisoformat(memory["time"]).replace(tzinfo=UTC)
            newest = max(newest, when)
            text = str({"scene": memory["scene"], "emotion": memory["emotion"], "event": memory["event"]})
            records.append(MemoryRecord(id=str(key), content=text, user_id=user, created_at=when, source="manual"))
    queries = []
    for number, line in enumerate(dialogue_file.read_text(encoding="utf-8").splitlines()):
        if not line.strip():
            continue
        item = json.loads(line)
        relevant = [str(i) for i in item["relevant-id"]]
        queries.append(Query(
            id=str(item.get("id", number)), text="".join(item["dialogue"][: item["test-turn"][0]]), user_id=user,
            relevant=relevant, category=f"{len(relevant)} relevant",
        ))
    return Dataset(f"MADial-Bench {path.name}", records, queries, {user: newest + timedelta(days=1)})


def load_native(path: Path) -> Dataset:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        now = datetime.fromisoformat(data["now"].replace("Z", "+00:00"))
        if now.tzinfo is None:
            now = now.replace(tzinfo=UTC)
        default_user = data.get("user_id", "eval-user")
        records = [
            MemoryRecord.from_dict({**m, "user_id": m.get("user_id", default_user)}, source="manual")
            for m in data["memories"]
        ]
        queries = [
            Query(
                id=str(q["id"]), text=q["query"], user_id=q.get("user_id", default_user),
                relevant=[str(i) for i in q.get("relevant", [])], forbidden=[str(i) for i in q.get("forbidden", [])],
                session_id=q.get("session_id"), types=q.get("types"), category=q.get("category", "all"),
            )
            for q in data["queries"]
        ]
    except (OSError, KeyError, TypeError, ValueError, VecmemError) as exc:
        raise DataError(f"cannot read native test set {path}: {exc}") from exc
    known = {(r.user_id, r.id) for r in records}
    anywhere = {r.id for r in records}
    for query in queries:
        for memory_id in query.relevant:
            if (query.user_id, memory_id) not in known:
                raise DataError(f"{path}: query {query.id}: relevant memory {memory_id!r} is not one of its user's")
        for memory_id in query.forbidden:  # may be another user's: that is how isolation is tested
            if memory_id not in anywhere:
                raise DataError(f"{path}: query {query.id}: forbidden memory {memory_id!r} is not in the set")
    return Dataset(data.get("name", path.stem), records, queries, {r.user_id: now for r in records})


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


def run(
    dataset: Dataset,
    modes: list[str],
    ks: list[int],
    settings: Settings,
    progress: bool,
    embedder: Embedder | None = None,
    floor: float = 0.0,
) -> list[ModeResult]:
    from rich.progress import Progress

    clock_now = {"value": datetime.now(UTC)}
    with tempfile.TemporaryDirectory(prefix="vecmem-eval-") as scratch:
        base = settings.with_changes(home=Path(scratch), chroma_url=None)
        indexer = MemoryBank(base, embedder=embedder, clock=lambda: clock_now["value"])
        with Progress(transient=True, disable=not progress) as bar:
            task = bar.add_task(f"indexing {len(dataset.records)} memories", total=len(dataset.records))
            step = 256
            for start in range(0, len(dataset.records), step):
                indexer.add_records(dataset.records[start : start + step], overwrite=True)
                bar.advance(task, len(dataset.records[start : start + step]))
        results = []
        depth = max(ks)
        for mode in modes:
            bank = MemoryBank(base.with_changes(search_mode=mode), embedder=indexer.embedder,
                              clock=lambda: clock_now["value"])
            rows: list[tuple[Query, dict[str, float], list[float]]] = []
            started = time.perf_counter()
            with Progress(transient=True, disable=not progress) as bar:
                task = bar.add_task(f"{mode}: {len(dataset.queries)} queries", total=len(dataset.queries))
                for query in dataset.queries:
                    clock_now["value"] = dataset.now.get(query.user_id, clock_now["value"])
                    hits = bank.search(query.text, depth, user_id=query.user_id, session_id=query.session_id,
                                       types=query.types, record_access=False)
                    ranked = [hit.id for hit in hits if hit.relevance is None or hit.relevance >= floor]
                    curve = [score_query(ranked, query, [k])[f"recall@{k}"] for k in range(1, depth + 1)]
                    rows.append((query, score_query(ranked, query, ks), curve))
                    bar.advance(task)
            seconds = time.perf_counter() - started
            categories: dict[str, list[dict[str, float]]] = {}
            for query, scores, _ in rows:
                categories.setdefault(query.category, []).append(scores)
            curve = [sum(c[i] for _, _, c in rows) / len(rows) for i in range(depth)]
            results.append(ModeResult(
                mode=mode,
                overall=average([scores for _, scores, _ in rows]),
                per_category={name: average(items) for name, items in sorted(categories.items())},
                counts={name: len(items) for name, items in sorted(categories.items())},
                curve=curve,
                seconds=seconds,
            ))
    return results


def markdown(dataset: Dataset, results: list[ModeResult], ks: list[int], settings: Settings) -> str:
    focus = 5 if 5 in ks else ks[-1]
    columns = [f"recall@{k}" for k in ks] + [f"hit@{focus}", "mrr", f"ndcg@{focus}", f"leak@{ks[-1]}"]
    w = settings.weights
    lines = [
        f"### {dataset.name}: {len(dataset.queries)} queries, {len(dataset.records)} memories; "
        f"weights {w.similarity:g}/{w.recency:g}/{w.importance:g}, dense weight {settings.dense_weight:g}",
        "",
        "| mode | category | n | " + " | ".join(columns) + " |",
        "|---|---|---|" + "---|" * len(columns),
    ]
    for result in results:
        rows = [("all", result.overall, len(dataset.queries))]
        if len(result.per_category) > 1:
            rows += [(name, metrics, result.counts[name]) for name, metrics in result.per_category.items()]
        for name, metrics, count in rows:
            cells = [f"{100 * metrics[c]:.1f}" for c in columns]
            lines.append(f"| {result.mode} | {name} | {count} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Figures are percentages. " + ", ".join(
        f"{r.mode}: {r.seconds:.1f} s for {len(dataset.queries)} queries" for r in results))
    return "\n".join(lines)


def as_json(dataset: Dataset, result: ModeResult) -> dict[str, Any]:
    return {
        "dataset": dataset.name,
        "mode": result.mode,
        "n_queries": len(dataset.queries),
        "n_memories": len(dataset.records),
        **{key: round(value, 6) for key, value in result.overall.items()},
        "per_category": {
            name: {"n_queries": result.counts[name], **{k: round(v, 6) for k, v in metrics.items()}}
            for name, metrics in result.per_category.items()
        },
        "seconds": round(result.seconds, 2),
    }


def plot(results: list[ModeResult], dataset: Dataset, target: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4))
    for result in results:
        ks = list(range(1, len(result.curve) + 1))
        axes.plot(ks, [100 * value for value in result.curve], marker="o", label=result.mode)
    axes.set_xlabel("k")
    axes.set_ylabel("recall@k (%)")
    axes.set_title(f"{dataset.name}: recall@k by retrieval mode")
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(target, dpi=120)


# ---------------------------------------------------------------------------------------------- command line


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        print(f"eval_hit_rate: error: {message}", file=sys.stderr)
        raise SystemExit(2)


def main(
    argv: list[str] | None = None,
    *,
    settings_factory: Callable[[], Settings] | None = None,
    embedder: Embedder | None = None,
) -> int:
    parser = _Parser(description="Recall of vecmem retrieval on LoCoMo, MADial-Bench or a native test set.")
    parser.add_argument("--format", required=True, choices=["vecmem", "locomo", "madial"])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--k", nargs="+", type=int, default=[1, 3, 5, 10])
    parser.add_argument("--mode", nargs="+", choices=SEARCH_MODES, help="default: the configured search mode")
    parser.add_argument("--weights", nargs=3, type=float, metavar=("SIM", "REC", "IMP"),
                        help="reranker weights (default: the configured 0.6 0.2 0.2); 1 0 0 = similarity alone")
    parser.add_argument("--decay", type=float, help="recency decay per day (default: the configured 0.01)")
    parser.add_argument("--dense-weight", type=float, help="hybrid fusion weight of the dense side (default 0.6)")
    parser.add_argument("--context", nargs=2, type=int, default=[2, 1], metavar=("BEFORE", "AFTER"),
                        help="LoCoMo: turns before and after indexed as keyword context (0 0: none)")
    parser.add_argument("--lang", choices=["zh", "en"], help="MADial: the language, when --data is the root")
    parser.add_argument("--through-agent", action="store_true",
                        help="LoCoMo, MADial: also feed the conversations to the offline memory agent and score recall "
                             "through the memories' provenance, with the tokens each protocol stores")
    parser.add_argument("--floor", type=float, default=0.0,
                        help="count only hits whose relevance reaches this (what a prompt gets under that floor)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--plot", type=Path, metavar="FILE.png", help="draw recall@k curves per mode")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    try:
        if any(k < 1 for k in args.k):
            raise DataError("every --k must be at least 1")
        if not 0.0 <= args.floor <= 1.0:
            raise DataError("--floor must be between 0 and 1")
        if args.through_agent and args.format == "vecmem":
            raise DataError("--through-agent needs conversations: --format locomo or madial")
        settings = (settings_factory or Settings.from_env)()
        changes: dict[str, Any] = {}
        if args.weights:
            changes["weights"] = RankWeights(*args.weights)
        if args.decay is not None:
            changes["recency_decay_per_day"] = args.decay
        if args.dense_weight is not None:
            changes["dense_weight"] = args.dense_weight
        settings = settings.with_changes(**changes)
        if args.format == "locomo":
            dataset = load_locomo(args.data, before=args.context[0], after=args.context[1])
        elif args.format == "madial":
            dataset = load_madial(args.data, args.lang)
        else:
            dataset = load_native(args.data)
        ks = sorted(set(args.k))
        modes = args.mode or [settings.search_mode]
        progress = not args.quiet and not args.json
        results = run(dataset, modes, ks, settings, progress=progress, embedder=embedder, floor=args.floor)
        through = _through_agent(args, dataset, modes, ks, settings, progress, embedder) if args.through_agent else None
    except (DataError, VecmemError) as exc:
        print(f"eval_hit_rate: error: {exc}", file=sys.stderr)
        return 2
    if through is not None:
        per_turn_tokens = sum(map(TiktokenCounter(settings.tokenizer).count, (r.content for r in dataset.records)))
        return _print_through_agent(args, dataset, results, through, ks, per_turn_tokens)
    if args.json:
        objects = [as_json(dataset, result) for result in results]
        print(json.dumps(objects[0] if len(objects) == 1 else {"modes": {o["mode"]: o for o in objects}},
                         ensure_ascii=False, indent=2))
    else:
        print(markdown(dataset, results, ks, settings))
    if args.plot:
        plot(results, dataset, args.plot)
        if not args.json:
            print(f"plot written to {args.plot}")
    return 0


def _through_agent(args: argparse.Namespace, dataset: Dataset, modes: list[str], ks: list[int], settings: Settings,
                   progress: bool, embedder: Embedder | None) -> list[eval_agent.AgentResult]:
    try:
        if args.format == "locomo":
            conversations = eval_agent.locomo_feeds(args.data, _locomo_time)
        else:
            memory_file, _ = madial_files(args.data, args.lang)
            conversations = eval_agent.madial_feeds(memory_file, MADIAL_USER)
    except (OSError, KeyError, TypeError, ValueError) as exc:
        raise DataError(f"cannot read the conversations of {args.data}: {exc}") from exc
    return eval_agent.run_through_agent(conversations, dataset.queries, dataset.now, modes, ks, settings,
                                        embedder=embedder, progress=progress, floor=args.floor)


def _print_through_agent(args: argparse.Namespace, dataset: Dataset, results: list[ModeResult],
                         through: list[eval_agent.AgentResult], ks: list[int], per_turn_tokens: int) -> int:
    if args.json:
        print(json.dumps({"dataset": dataset.name, "n_queries": len(dataset.queries),
                          "per_turn": {r.mode: {**{k: round(v, 6) for k, v in r.overall.items() if k.startswith("recall@")},
                                                "memories": len(dataset.records), "stored_tokens": per_turn_tokens}
                                       for r in results},
                          "through_agent": eval_agent.as_json(through)}, ensure_ascii=False, indent=2))
    else:
        print(eval_agent.markdown(dataset.name, results, through, ks, per_turn_tokens, len(dataset.records)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
