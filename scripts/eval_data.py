"""The benchmarks ``eval_hit_rate.py`` reads, each user's corpus kept apart (protocols: ../shared/data/README.md).

* LoCoMo: each conversation is its own user (its ``sample_id``); each turn a memory, ``<speaker> said, "..."``,
  with the turn's speaker in its provenance (what tells vecmem that it is a turn of a conversation between people:
  retrieval/query/speakers.py), as ``add_messages`` records the speaker of a ``Turn``.
* MADial-Bench: the user of a memory is its ``"user-id"``; where a file has none (the English memory file), the
  same memory id's ``"user-id"`` in the sibling language's memory file (``../zh`` or ``../en``: the two
  languages share their ids); where still unknown, the one user the dialogues ask for, and when the dialogues
  name several users, a ``DataError`` rather than one corpus mixing them (each query competing with another
  user's memories costs 8-12 points of R@5 on the full benchmark). Each dialogue's query is its ``"user-id"``'s
  (default 1), and every relevant memory must be that user's. A dialogue's turns before its test turn are the query,
  in vecmem's dialogue format (``dialogue_query``: retrieval/query/dialogue.py), without the ``<BOD>`` marker.
* native: each memory's ``user_id`` (default the file's ``user_id``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from vecmem import MemoryRecord, Provenance, VecmemError
from vecmem.retrieval.query.dialogue import dialogue_query

__all__ = ["LOCOMO_CATEGORIES", "MADIAL_USER", "DataError", "Dataset", "MadialMemory", "Query", "load_locomo",
           "load_madial", "load_native", "locomo_time", "madial_files", "madial_memories", "madial_query",
           "madial_speakers", "madial_user"]

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
    answer: str | None = None  # the reference answer, where the benchmark has one (LoCoMo; not category 5's)


@dataclass
class Dataset:
    name: str
    records: list[MemoryRecord]
    queries: list[Query]
    now: dict[str, datetime]  # per user: the time the questions are asked


class DataError(Exception):
    """The data file is missing or not in the expected format."""


# ---------------------------------------------------------------------------------------------- LoCoMo


def locomo_time(text: str) -> datetime:
    """LoCoMo session times look like '1:56 pm on 8 May, 2023'."""
    try:
        return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError as exc:
        raise DataError(f"unreadable LoCoMo session time {text!r}") from exc


def load_locomo(path: Path, *, before: int, after: int, conversations: int | None = None) -> Dataset:
    """LoCoMo as the module docstring says; ``conversations``: only the first so many."""
    if path.is_dir():
        path = path / "locomo10.json"
    try:
        everything = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read LoCoMo data {path}: {exc}") from exc
    conversations_read = everything[:conversations] if conversations is not None else everything
    records: list[MemoryRecord] = []
    queries: list[Query] = []
    now: dict[str, datetime] = {}
    for conversation in conversations_read:
        user = conversation["sample_id"]
        body = conversation["conversation"]
        sessions = sorted((k for k in body if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1]))
        for session in sessions:
            when = locomo_time(body[f"{session}_date_time"])
            turns = body[session]
            for index, turn in enumerate(turns):
                text = f'{turn["speaker"]} said, "{turn["text"]}"'
                if turn.get("blip_caption"):
                    text += f' and shared {turn["blip_caption"]}'
                around = [t["text"] for t in turns[max(0, index - before) : index]]
                around += [t["text"] for t in turns[index + 1 : index + 1 + after]]
                records.append(MemoryRecord(
                    id=turn["dia_id"], content=text, user_id=user, created_at=when, context=" ".join(around),
                    source="manual", provenance=Provenance(f"{user}-{session}", (turn["dia_id"],), turn["speaker"]),
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
                # category 5 (adversarial) has an "adversarial_answer" instead: no reference answer
                answer=str(qa["answer"]) if str(qa.get("answer", "")).strip() else None,
            ))
    return Dataset("LoCoMo", records, queries, now)


# ---------------------------------------------------------------------------------------------- MADial-Bench


def madial_user(number: object) -> str:
    """The vecmem user of MADial-Bench's ``"user-id"`` ``number`` (1 and "1" are the same user)."""
    return f"madial-user-{number}"


MADIAL_USER = madial_user(1)
_SIBLING_LANGUAGE = {"zh": "en", "en": "zh"}
_SPEAKER_TAG = re.compile(r"^\s*<([^<>\n]{1,40})>\s*[:：]")


@dataclass(frozen=True)
class MadialMemory:
    id: str
    user_id: str
    when: datetime
    scene: str
    emotion: str
    event: str

    def record(self) -> MemoryRecord:
        """The memory as the protocol indexes it: ``str({"scene", "emotion", "event"})``."""
        text = str({"scene": self.scene, "emotion": self.emotion, "event": self.event})
        return MemoryRecord(id=self.id, content=text, user_id=self.user_id, created_at=self.when, source="manual")


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


def _json_lines(path: Path) -> list[dict[str, Any]]:
    try:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"cannot read MADial-Bench file {path}: {exc}") from exc


def _sibling_memory_file(memory_file: Path) -> Path | None:
    """The other language's memory file (``../en`` for ``zh``), when there is exactly one."""
    other = _SIBLING_LANGUAGE.get(memory_file.parent.name)
    found = sorted((memory_file.parent.parent / other).glob("*-memory.json")) if other else []
    return found[0] if len(found) == 1 else None


def _owners(memory_file: Path | None) -> dict[str, set[str]]:
    """Memory id -> the users the file gives it (a set: ids may repeat across users)."""
    owners: dict[str, set[str]] = {}
    for line in _json_lines(memory_file) if memory_file else []:
        for key, memory in line.items():
            if memory.get("user-id") is not None:
                owners.setdefault(str(key), set()).add(madial_user(memory["user-id"]))
    return owners


def madial_memories(memory_file: Path, dialogue_file: Path) -> list[MadialMemory]:
    """Every memory of the file with its user (see the module docstring for how the user is found)."""
    asked = sorted({madial_user(item.get("user-id", 1)) for item in _json_lines(dialogue_file)}) or [MADIAL_USER]
    sibling = _sibling_memory_file(memory_file)
    sibling_owners: dict[str, set[str]] | None = None  # read only when a memory needs it
    memories: list[MadialMemory] = []
    seen: set[tuple[str, str]] = set()
    for line in _json_lines(memory_file):
        for key, memory in line.items():
            if memory.get("user-id") is not None:
                user = madial_user(memory["user-id"])
            else:
                if sibling_owners is None:
                    sibling_owners = _owners(sibling)
                candidates = sibling_owners.get(str(key), set())
                if len(candidates) == 1:
                    (user,) = candidates
                elif len(asked) == 1:
                    user = asked[0]
                else:
                    raise DataError(
                        f"{memory_file}: memory {key} has no user-id, nor has it one in "
                        f"{sibling or 'a sibling ../zh or ../en memory file'}, and the dialogues ask for "
                        f"{', '.join(asked)}: its user cannot be told (one corpus would mix the users)")
            if (user, str(key)) in seen:
                raise DataError(f"{memory_file}: memory {key} of {user} appears twice")
            seen.add((user, str(key)))
            try:
                when = datetime.fromisoformat(memory["time"]).replace(tzinfo=UTC)
                memories.append(MadialMemory(str(key), user, when, memory["scene"], memory["emotion"],
                                             memory["event"]))
            except (KeyError, TypeError, ValueError) as exc:
                raise DataError(f"{memory_file}: memory {key}: {exc!r}") from exc
    return memories


def madial_speakers(dialogue_file: Path) -> dict[str, str]:
    """Each user's name, as the dialogues tag their lines ("<Bart>:"): whom the memories' events are about."""
    names: dict[str, str] = {}
    for item in _json_lines(dialogue_file):
        user = madial_user(item.get("user-id", 1))
        for line in item.get("dialogue", []):
            tag = _SPEAKER_TAG.match(line)
            if tag and tag.group(1) not in ("Assistant", "BOD", "EOD") and user not in names:
                names[user] = tag.group(1)
    return names


def madial_query(lines: list[str]) -> str:
    """A dialogue's lines (``<Bart>: "..."``, markers such as ``<BOD>`` between them) as a dialogue query."""
    turns = [(tag.group(1), line[tag.end():]) for line in lines if (tag := _SPEAKER_TAG.match(line))]
    return dialogue_query(turns)


def load_madial(path: Path, lang: str | None) -> Dataset:
    memory_file, dialogue_file = madial_files(path, lang)
    memories = madial_memories(memory_file, dialogue_file)
    corpus = {(m.user_id, m.id) for m in memories}
    newest: dict[str, datetime] = {}
    for memory in memories:
        newest[memory.user_id] = max(newest.get(memory.user_id, memory.when), memory.when)
    queries = []
    for number, item in enumerate(_json_lines(dialogue_file)):
        user = madial_user(item.get("user-id", 1))
        try:
            relevant = [str(i) for i in item["relevant-id"]]
            text = madial_query(item["dialogue"][: item["test-turn"][0]])
        except (KeyError, TypeError, IndexError) as exc:
            raise DataError(f"{dialogue_file}: dialogue {item.get('id', number)}: {exc!r}") from exc
        for memory_id in relevant:
            if (user, memory_id) not in corpus:
                raise DataError(f"{dialogue_file}: dialogue {item.get('id', number)}: relevant memory {memory_id} "
                                f"is not one of {user}'s")
        queries.append(Query(id=str(item.get("id", number)), text=text, user_id=user, relevant=relevant,
                             category=f"{len(relevant)} relevant"))
    now = {user: when + timedelta(days=1) for user, when in newest.items()}
    return Dataset(f"MADial-Bench {memory_file.parent.name}", [m.record() for m in memories], queries, now)


# ---------------------------------------------------------------------------------------------- native


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
