"""A conversation as a query (vecmem/retrieval/query/dialogue.py): a dialogue only when every line says it is a
turn, written by dialogue_query and read back by split_dialogue."""

import pytest

from vecmem.models import Turn
from vecmem.retrieval.query.dialogue import dialogue_query, split_dialogue
from vecmem.retrieval.query.parsed import parse_query


@pytest.mark.parametrize(
    ("query", "utterances"),
    [
        ("what is async/await?", None),
        ('<Dana>: "I am nervous about the exam"\n<Assistant>: "Breathe slowly"\n',
         ["I am nervous about the exam", "Breathe slowly"]),
        ("User: hi there\nAssistant: hello\n\nUser: how are you", ["hi there", "hello", "how are you"]),
        ("用户：我明天去杭州\n助手：玩得开心！", ["我明天去杭州", "玩得开心！"]),
        ("<Dana>: one turn only\n", None),
        # a pasted prompt, a list, code: lines that are not turns make a plain query, read whole
        ("Task: fix the login bug\nContext: the session cookie expires early", None),
        ("<BOD>\n<Dana>: hello\n<Assistant>: hi", None),
        ("def f(x):\n    return x", None),
        ("milk\neggs\nbread", None),
    ],
)
def test_a_query_is_a_dialogue_only_when_every_line_is_a_turn(query, utterances):
    assert split_dialogue(query) == utterances


def test_dialogue_query_writes_what_split_dialogue_reads():
    turns = [Turn("user", "I booked the\nflights to Lisbon."), Turn("assistant", "Great! When?"),
             Turn("user", "Tomorrow", speaker="Dana"), Turn("user", "   ")]
    written = dialogue_query(turns)
    assert written == "<User>: I booked the flights to Lisbon.\n<Assistant>: Great! When?\n<Dana>: Tomorrow"
    assert split_dialogue(written) == ["I booked the flights to Lisbon.", "Great! When?", "Tomorrow"]
    assert split_dialogue(dialogue_query([("<A>", "x y"), ("B" * 100, "z")])) == ["x y", "z"]


def test_a_multi_line_prompt_is_read_whole():
    prompt = "Summarise my notes:\nthe deploy runs at 9\nthe backup at 11"
    assert parse_query(prompt).utterances is None
    assert len(parse_query(prompt).terms) == 1
