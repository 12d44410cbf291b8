"""data/eval/paraphrase.json asks by meaning alone: no question shares a keyword token with the memory it should
find, so the keyword side cannot find it and the set measures what the embedding understands.

The tokens on each side are the keyword index's own: a memory's ``memory_tokens`` (content, tags, context), a
query's terms without the words that only make it a question (``query_parts``), of the whole query and of each
part a multi-part question is split into. Questions come in four groups, by the language of the question and of
its memory (zh→zh, en→en, en→zh, zh→en), tagged as each query's category so the eval's table breaks them down.
"""

import importlib.util
import sys
from collections import Counter

import pytest

from tests.conftest import REPO
from vecmem.retrieval.fusion import query_parts, query_terms
from vecmem.retrieval.query.question import split_question
from vecmem.retrieval.query.tokenize import memory_tokens, split_dialogue
from vecmem.text import has_cjk

PATH = REPO / "data" / "eval" / "paraphrase.json"
GROUPS = ("zh→zh", "en→en", "en→zh", "zh→en")

if "eval_data" not in sys.modules:  # the eval script's loader, as test_eval_script imports it (one module, not two)
    spec = importlib.util.spec_from_file_location("eval_data", REPO / "scripts" / "eval_data.py")
    sys.modules["eval_data"] = importlib.util.module_from_spec(spec)  # dataclasses look their module up
    spec.loader.exec_module(sys.modules["eval_data"])
eval_data = sys.modules["eval_data"]


@pytest.fixture(scope="module")
def dataset():
    return eval_data.load_native(PATH)


def query_tokens(query: str) -> set[str]:
    """What the keyword side searches for: the query's parts' tokens, and those of each question it splits into."""
    utterances = split_dialogue(query)
    asked = [query_terms(query, utterances)]
    asked += [query_terms(part, None) for part in (split_question(query) or []) if utterances is None]
    return {token for worded in asked for tokens, _ in query_parts(worded) for token in tokens}


def shared_tokens(query: str, record) -> set[str]:
    return query_tokens(query) & set(memory_tokens(record))


def language(text: str) -> str:
    return "zh" if has_cjk(text) else "en"


def test_no_question_shares_a_token_with_its_memory(dataset):
    records = {record.id: record for record in dataset.records}
    shared = {f"{query.id} {query.text!r} / {memory_id}": sorted(found)
              for query in dataset.queries for memory_id in query.relevant
              if (found := shared_tokens(query.text, records[memory_id]))}
    assert not shared, f"questions sharing keyword tokens with their memory: {shared}"


def test_every_question_asks_something(dataset):
    assert all(query_tokens(query.text) for query in dataset.queries)


def test_the_check_sees_a_shared_word(dataset):
    records = {record.id: record for record in dataset.records}
    by_id = {query.id: query for query in dataset.queries}
    for query_id, word in [("ee-01", "Hangzhou"), ("ee-01", "living"), ("zz-25", "地铁"), ("ez-09", "ThinkPad")]:
        query = by_id[query_id]
        assert shared_tokens(f"{query.text} {word}", records[query.relevant[0]]), (query_id, word)


def test_ids_are_unique_and_every_expected_memory_exists(dataset):
    memory_ids = [record.id for record in dataset.records]
    query_ids = [query.id for query in dataset.queries]
    assert len(set(memory_ids)) == len(memory_ids)
    assert len(set(query_ids)) == len(query_ids)
    assert all(len(query.relevant) == 1 and query.relevant[0] in memory_ids for query in dataset.queries)
    assert not any(query.forbidden for query in dataset.queries)
    assert len({record.user_id for record in dataset.records}) == 1


def test_groups_are_tagged_by_language_and_balanced(dataset):
    records = {record.id: record for record in dataset.records}
    for query in dataset.queries:
        group = f"{language(query.text)}→{language(records[query.relevant[0]].content)}"
        assert query.category == group, (query.id, query.category, group)
    counts = Counter(query.category for query in dataset.queries)
    assert set(counts) == set(GROUPS)
    assert max(counts.values()) - min(counts.values()) <= 2, counts
    assert 90 <= len(dataset.queries) <= 110
    languages = Counter(language(record.content) for record in dataset.records)
    assert abs(languages["zh"] - languages["en"]) <= 4, languages
    assert 50 <= len(dataset.records) <= 70
