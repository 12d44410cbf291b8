"""``eval_hit_rate.py --through-agent``: a benchmark's conversations fed to the memory agent, then its questions.

The per-turn protocol indexes every turn as a memory: an upper bound on what a memory module can find, at the
cost of storing the whole transcript. Through the agent, each conversation is fed in order, one message per
turn, to the agent's write side (``MemoryBank.add_messages`` with the offline ``Learner``: write gate,
extraction, supersession; no model), each message carrying the benchmark's turn id, which every memory learnt
from it records as its provenance. The questions then go through the normal search, and a memory counts for
every turn it came from: recall@k is the share of a question's evidence turns named by the provenance of the
top k memories. Next to it: how many memories were stored and their tokens (tiktoken, as the budgeter counts
the long-term section's text) against the transcript's.

* LoCoMo: each conversation is its own user; each session is one ``add_messages`` call (both speakers' turns
  are user messages: the questions ask about both, so each names its ``speaker``), dated by the session (each
  message's ``time``: what "yesterday" in it is read against), ids ``D1:3``; the photo captions the
  per-turn protocol appends are not fed (the agent reads what was said). Memories are global: the questions
  are asked outside any session.
* MADial-Bench: each user's memories are what that user told the assistant: each event, in the first person
  ("Bart在圣诞节晚会上跳舞" -> "我在圣诞节晚会上跳舞"; "Bart danced at the party" -> "I danced at the party"; the
  user's name as the dialogues tag it, the pronoun the user's events mostly use), is one message with the
  memory's id, in the order of their dates, dated by them; the dialogues are the questions, each its user's.

Everything is offline and through the public API, as the rest of the evaluation.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import eval_budget  # a sibling module: eval_hit_rate.py puts scripts/ on the path

from vecmem import Embedder, MemoryBank, Settings
from vecmem.agent.writing.learn import Learner

__all__ = ["AgentResult", "Conversation", "Feed", "first_person", "locomo_feeds", "madial_feeds", "pronoun_of", "run_through_agent",
           "turn_recall"]


@dataclass
class Feed:
    """One ``add_messages`` call: the messages of one session (or one statement), dated."""

    when: datetime
    messages: list[dict[str, str]]


@dataclass
class Conversation:
    user: str
    feeds: list[Feed]


@dataclass
class AgentResult:
    mode: str
    overall: dict[str, float]
    memories: int  # retrievable memories stored, every user together
    stored_tokens: int  # their content, counted as the budgeter counts
    transcript_tokens: int  # the messages fed
    messages: int
    seconds: float  # feeding the conversations (the write side), not the questions
    per_user: dict[str, int] = field(default_factory=dict)  # memories per user
    budget: dict[int, dict[str, float]] = field(default_factory=dict)  # per budget (eval_budget.BudgetTotals)

    @property
    def stored_share(self) -> float:
        return self.stored_tokens / self.transcript_tokens if self.transcript_tokens else 0.0


def locomo_feeds(path: Path, parse_time: Callable[[str], datetime]) -> list[Conversation]:
    """Each conversation's sessions in order, each turn a user message with its ``dia_id``."""
    if path.is_dir():
        path = path / "locomo10.json"
    conversations = []
    for conversation in json.loads(path.read_text(encoding="utf-8")):
        body = conversation["conversation"]
        sessions = sorted((k for k in body if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1]))
        feeds = [Feed(parse_time(body[f"{session}_date_time"]),
                      [{"role": "user", "content": turn["text"], "id": turn["dia_id"], "speaker": turn["speaker"],
                        "time": parse_time(body[f"{session}_date_time"]).isoformat()} for turn in body[session]
                       if str(turn.get("text", "")).strip()])
                 for session in sessions]
        conversations.append(Conversation(conversation["sample_id"], [feed for feed in feeds if feed.messages]))
    return conversations


_HE = ((r"\bhimself\b", "myself"), (r"\bHis\b", "My"), (r"\bhis\b", "my"), (r"\bhim\b", "me"), (r"\bHe\b", "I"),
       (r"\bhe\b", "I"))
# "her" is "my" before what she has ("her sister") and "me" where it is the object ("gave her a book", "with her.")
_HER_AS_OBJECT = r"(?=\s*(?:$|[^\w\s]|\b(?:a|an|the|to|that|this|with|for|and|or|but|in|on|at|about|up|out|back|"\
                 r"again|when|so|as|because|how|what|very|feel|feeling|happy|sad)\b))"
_SHE = ((r"\bherself\b", "myself"), (r"\bhers\b", "mine"), (r"\bHer\b", "My"), (r"\bher\b" + _HER_AS_OBJECT, "me"),
        (r"\bher\b", "my"), (r"\bShe\b", "I"), (r"\bshe\b", "I"))
_ZH_PRONOUNS = {"he": "他", "she": "她"}


def pronoun_of(events: Sequence[str]) -> str:
    """"he" or "she": which third person a user's events mostly use for them (he/him/his or she/her; 他 or 她)."""
    text = " ".join(events)
    he = len(re.findall(r"\b(?:he|him|his|himself)\b", text, re.IGNORECASE)) + text.count("他")
    she = len(re.findall(r"\b(?:she|her|hers|herself)\b", text, re.IGNORECASE)) + text.count("她")
    return "she" if she > he else "he"


def first_person(event: str, name: str = "Bart", pronoun: str = "he") -> str:
    """A MADial event as its user (``name``, referred to as ``pronoun``) would tell it, in the first person."""
    if re.search(r"[\u4e00-\u9fff]", event):
        third = _ZH_PRONOUNS[pronoun]
        for old, new in ((name, "我"), (f"{third}自己", "我自己"), (f"{third}的", "我的"), (third, "我")):
            event = event.replace(old, new)
        return event
    quoted = re.escape(name)
    for pattern, new in ((rf"\b{quoted}'s\b", "my"), (rf"^{quoted}\b", "I"), (rf"\b{quoted}\b", "me"),
                         *(_SHE if pronoun == "she" else _HE)):
        event = re.sub(pattern, new, event)
    return event


def madial_feeds(memories: Sequence[Any], names: dict[str, str]) -> list[Conversation]:
    """Each user's memories (eval_data.MadialMemory) as statements that user told in the order of their dates,
    one message each with its id; ``names``: each user's name in the dialogues (default Bart)."""
    by_user: dict[str, list[Any]] = {}
    for memory in memories:
        by_user.setdefault(memory.user_id, []).append(memory)
    conversations = []
    for user, own in by_user.items():
        name = names.get(user, "Bart")
        pronoun = pronoun_of([m.event for m in own])
        told = sorted(own, key=lambda m: (m.when, m.id))
        conversations.append(Conversation(user, [
            Feed(m.when, [{"role": "user", "content": first_person(m.event, name, pronoun), "id": m.id}])
            for m in told]))
    return conversations


def turn_recall(provenances: Sequence[Sequence[str]], relevant: Sequence[str], k: int) -> float:
    """The share of the evidence turns named by the provenance of the top ``k`` memories (1 without evidence)."""
    wanted = set(relevant)
    if not wanted:
        return 1.0
    named = {turn for ids in provenances[:k] for turn in ids}
    return len(wanted & named) / len(wanted)


def run_through_agent(conversations: list[Conversation], queries: Sequence[Any], now: dict[str, datetime],
                      modes: list[str], ks: list[int], settings: Settings, *, embedder: Embedder | None = None,
                      progress: bool = False, floor: float = 0.0, budgets: Sequence[int] = ()) -> list[AgentResult]:
    """Feed every conversation to the offline agent, then ask ``queries`` (eval_hit_rate.Query: ``relevant`` are
    turn ids) in each mode, counting only hits whose relevance reaches ``floor``; one result per mode, with
    recall within each of ``budgets`` tokens (eval_budget.py: each memory's text, the turns of its provenance)."""
    from rich.progress import Progress

    clock = {"value": datetime.now(UTC)}
    messages = sum(len(feed.messages) for c in conversations for feed in c.feeds)
    with tempfile.TemporaryDirectory(prefix="vecmem-eval-agent-") as scratch:
        base = settings.with_changes(home=Path(scratch), chroma_url=None)
        writer = MemoryBank(base, embedder=embedder, clock=lambda: clock["value"], learner=Learner(offline=True))
        count = writer.token_counter.count
        started = time.perf_counter()
        with Progress(transient=True, disable=not progress) as bar:
            task = bar.add_task(f"feeding {messages:,} messages to the agent", total=messages)
            for conversation in conversations:
                for feed in conversation.feeds:
                    clock["value"] = feed.when
                    writer.add_messages(feed.messages, user_id=conversation.user)
                    bar.advance(task, len(feed.messages))
        seconds = time.perf_counter() - started
        transcript = sum(count(m["content"]) for c in conversations for feed in c.feeds for m in feed.messages)
        stored = {c.user: writer.list_memories(user_id=c.user) for c in conversations}
        stored_tokens = sum(count(record.content) for records in stored.values() for record in records)
        embedder = writer.embedder
        writer.close()
        results = []
        depth = max(ks) if not budgets else max(*ks, eval_budget.BUDGET_DEPTH)
        for mode in modes:  # a fresh bank: its keyword index is built over everything stored, as a new process's
            bank = MemoryBank(base.with_changes(search_mode=mode), embedder=embedder, clock=lambda: clock["value"])
            rows = []
            totals = eval_budget.BudgetTotals()
            for query in queries:
                clock["value"] = now.get(query.user_id, clock["value"])
                hits = [hit for hit in bank.search(query.text, depth, user_id=query.user_id, record_access=False)
                        if hit.relevance is None or hit.relevance >= floor]
                provenances = [hit.record.provenance.message_ids if hit.record.provenance else () for hit in hits]
                rows.append({f"recall@{k}": turn_recall(provenances, query.relevant, k) for k in ks})
                if budgets:
                    totals.add([eval_budget.BudgetHit(hit.record.content, turns)
                                for hit, turns in zip(hits, provenances, strict=True)],
                               query.relevant, getattr(query, "answer", None), count, budgets)
            bank.close()
            overall = {key: sum(row[key] for row in rows) / len(rows) for key in rows[0]} if rows else {}
            results.append(AgentResult(mode, overall, sum(len(r) for r in stored.values()), stored_tokens, transcript,
                                       messages, seconds, {user: len(records) for user, records in stored.items()},
                                       totals.summary()))
    return results


def markdown(name: str, per_turn: list[Any], through: list[AgentResult], ks: list[int], per_turn_tokens: int,
             per_turn_memories: int) -> str:
    """Both protocols side by side: recall, memories and tokens stored (``per_turn``: eval_hit_rate.ModeResult)."""
    first = through[0]
    columns = [f"R@{k}" for k in ks]
    lines = [f"### {name} through the agent: {first.messages:,} messages fed in {first.seconds:.0f} s, "
             f"{first.transcript_tokens:,} transcript tokens", "",
             "| protocol | mode | memories | tokens stored | of the transcript | " + " | ".join(columns) + " |",
             "|---|---|---|---|---|" + "---|" * len(columns)]
    for result in per_turn:
        cells = [f"{100 * result.overall[f'recall@{k}']:.1f}" for k in ks]
        lines.append(f"| per turn | {result.mode} | {per_turn_memories:,} | {per_turn_tokens:,} | "
                     f"{100 * per_turn_tokens / max(1, first.transcript_tokens):.0f}% | " + " | ".join(cells) + " |")
    for result in through:
        cells = [f"{100 * result.overall[f'recall@{k}']:.1f}" for k in ks]
        lines.append(f"| through the agent | {result.mode} | {result.memories:,} | {result.stored_tokens:,} | "
                     f"{100 * result.stored_share:.0f}% | " + " | ".join(cells) + " |")
    lines += ["", "Recall in %: the share of each question's evidence turns (LoCoMo) or memories (MADial-Bench) "
              "among the top k, through the turns each memory came from (its provenance) for the agent's. Tokens: "
              "each memory's text as the budgeter counts it (tiktoken); per turn, the indexed turns' text."]
    return "\n".join(lines)


def as_json(through: list[AgentResult]) -> dict[str, Any]:
    return {result.mode: {**{key: round(value, 6) for key, value in result.overall.items()},
                          "memories": result.memories, "stored_tokens": result.stored_tokens,
                          "transcript_tokens": result.transcript_tokens, "stored_share": round(result.stored_share, 4),
                          "messages": result.messages, "seconds": round(result.seconds, 1),
                          "per_user": result.per_user,
                          **({"budget": {str(tokens): {key: None if value != value else round(value, 6)
                                                       for key, value in figures.items()}
                                         for tokens, figures in result.budget.items()}} if result.budget else {})}
            for result in through}
