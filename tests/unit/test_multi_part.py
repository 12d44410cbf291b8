"""Multi-part questions (retrieval/query/question.py): split where a question plainly asks two things, each part
retrieved on its own, every memory counting by the part that points at it most."""

import pytest

from tests.conftest import FakeEmbedder
from vecmem import RankWeights
from vecmem.retrieval.query.question import MOST_PARTS, split_question


@pytest.mark.parametrize(("query", "parts"), [
    ("下属的学历是什么？另外，我用的家电是啥呀？", ["下属的学历是什么？", "我用的家电是啥呀？"]),
    ("我的爱好是什么以及我的工作是什么", ["我的爱好是什么", "我的工作是什么"]),
    ("我的猫叫什么？顺便问一下，我住在哪里？", ["我的猫叫什么？", "我住在哪里？"]),
    ("Where does Ravi work, and what does he drive?", ["Where does Ravi work", "what does he drive?"]),
    ("Where did I go last week, also who did I meet?", ["Where did I go last week", "who did I meet?"]),
    ("What hurdles does Omar meet, and how does he get past them?",
     ["What hurdles does Omar meet", "how does he get past them?"]),
    ("Also, what is my cat called? And where do I live?", ["what is my cat called?", "where do I live?"]),
    # a part that asks nothing stays with the question after it, as its context
    ("I moved last month. Where do I live now? And what is my cat called?",
     ["I moved last month. Where do I live now?", "what is my cat called?"]),
])
def test_a_question_that_asks_several_things_is_split(query, parts):
    assert split_question(query) == parts


@pytest.mark.parametrize("query", [
    "What did Priya research?",
    "What is the name of Greta's dog and cat?",  # one question about two things
    "What does Ravi also like?",  # "also" inside a clause joins nothing
    "Hi! What is my dog called?",  # a greeting asks nothing: split off, "hi" would pull its own matches up
    "My dog is sick. What should I feed him?",
    "我最近在装修。你推荐什么颜色？",
    "我还有一个问题：我的猫叫什么？",  # 还有 inside a clause is "still have"
    "Rock and roll, how did it start?",
    # a shared predicate, a relative clause, a bare "why", a clause of time
    "What kind of bread does Lena say that Omar bakes and is crunchy?",
    "What is a well-known hiking club that Ravi might want to join and why?",
    "What did Lena post a picture of, which made Nadia laugh out loud?",
    "When Ravi was a boy, what did he and his uncle build in the shed?",
    "",
    "? ? ?",
])
def test_one_question_stays_whole(query):
    assert split_question(query) is None


def test_a_passage_of_many_questions_stays_whole():
    questions = " ".join(f"What is item {n}?" for n in range(MOST_PARTS + 1))
    assert split_question(questions) is None
    assert len(split_question(" ".join(f"What is item {n}?" for n in range(MOST_PARTS))) or []) == MOST_PARTS


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_each_part_finds_its_memory(make_bank, settings, mode):
    """The first part has many words: retrieved whole, every memory sharing a few of them outranks the second
    part's only match. Part by part, each part's best match leads."""
    bank = make_bank(settings=settings.with_changes(search_mode=mode, weights=RankWeights(1, 0, 0)),
                     embedder=FakeEmbedder())
    thesis = bank.add("Wang Lei finished his university thesis on topic models for the degree", resolve=False)
    for text in ["Wang Lei picked a thesis topic", "the university degree of Wang Lei", "Lei finished the degree thesis",
                 "topic of the university thesis"]:
        bank.add(text, resolve=False)
    fridge = bank.add("the fridge in my kitchen is a Haier", resolve=False)
    question = "Which university, degree and thesis topic did Wang Lei finish? And what fridge is mine?"
    assert [hit.id for hit in bank.search(question, 2)] in ([thesis.id, fridge.id], [fridge.id, thesis.id])
