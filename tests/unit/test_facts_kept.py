"""No fact lost on the way in: ``MemoryBank.add_messages`` offline keeps every fact a user states whole.

* Who the user is, in one English word ("I am vegetarian", "I'm a nurse"), is kept as its Chinese twin is
  (我是素食者, 我是程序员); a passing state ("I'm tired") still is not.
* Sentences end where sentences end: never at an initial ("Ursula K. Le Guin"), a title ("Dr. Smith",
  "St. Louis") or an abbreviation ("U.S.", "e.g.", "a.m.", "Inc."), in English, Chinese and mixed text; a
  property test states facts holding such tokens and checks every name and number of each reaches a memory.
"""

from __future__ import annotations

import itertools
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.tally import count
from vecmem.agent import rules
from vecmem.agent.writing.gate import WriteGate
from vecmem.text import drop_full_stop, split_sentences

EXAMPLES = int(os.environ.get("VECMEM_PROPERTY_EXAMPLES", "100"))


def _stored(bank, user_id):
    return [record.content for record in bank.list_memories(user_id=user_id, include_superseded=True)]


# ---------------------------------------------------------------------------------------------- identity


@pytest.mark.parametrize(("said", "stored"), [
    ("I am vegetarian", "The user is vegetarian."),
    ("I'm a nurse", "The user is a nurse."),
    ("I'm an engineer.", "The user is an engineer."),
    ("I’m married", "The user is married."),
    ("我是素食者", "用户是素食者"),
    ("我是程序员", "用户是程序员"),
])
def test_a_short_identity_statement_is_kept_in_either_language(bank, said, stored):
    result = bank.add_messages(said, user_id="ada")
    assert [record.content for record in result.written] == [stored], result.skipped
    assert result.written[0].type == "fact"


@pytest.mark.parametrize("said", ["I'm tired", "I'm so excited!", "I'm fine", "I am happy", "I'm back", "我很累"])
def test_a_passing_state_is_still_not_a_memory(bank, said):
    result = bank.add_messages(said, user_id="ada")
    assert result.written == () and [s.content for s in result.skipped] == [said]


def test_identity_is_one_word_saying_who_the_user_is():
    assert rules.is_identity("I'm a nurse") and rules.is_identity("I am vegetarian")
    assert not rules.is_identity("I'm Li")  # a name: "The user's name is Li." is person.py's
    assert not rules.is_identity("I'm excited") and not rules.is_identity("I'm so tired")
    assert not rules.is_identity("I'm a nurse and I live in Paris")  # more than a word: counted as usual
    assert WriteGate().judge("I'm a nurse").keep and not WriteGate().judge("I'm sorry").keep


# ---------------------------------------------------------------------------------------------- sentences


@pytest.mark.parametrize(("said", "stored"), [
    ("My favourite author is Ursula K. Le Guin", ["The user's favourite author is Ursula K. Le Guin."]),
    ("I moved to St. Louis in 2021", ["The user moved to St. Louis in 2021."]),
    ("My doctor is Dr. Smith in the U.S. office", ["The user's doctor is Dr. Smith in the U.S. office."]),
    ("My meeting is at 9 a.m. on Monday. I work at Acme Inc. in Boston.",
     ["The user's meeting is at 9 a.m. on Monday.", "The user works at Acme Inc. in Boston."]),
    ("I like fruit, e.g. apples and pears. I live in Paris.",
     ["The user likes fruit, e.g. apples and pears.", "The user lives in Paris."]),
    ("I work at Acme Inc. I live in Paris.", ["The user works at Acme Inc.", "The user lives in Paris."]),
    ("我的医生是 Dr. Smith。我住在 St. Louis！", ["用户的医生是 Dr. Smith", "用户住在 St. Louis"]),
    ("我最喜欢的作家是 Ursula K. Le Guin", ["用户最喜欢的作家是 Ursula K. Le Guin"]),
    ("我住在 U.S.", ["用户住在 U.S."]),
])
def test_a_fact_is_stored_whole_not_cut_at_an_abbreviation(bank, said, stored):
    result = bank.add_messages(said, user_id="ada")
    assert sorted(record.content for record in result.written) == sorted(stored), result.skipped


@pytest.mark.parametrize(("text", "sentences"), [
    ("Mr. and Mrs. Smith came. Prof. Lee vs. Ms. Wu, No. 5", ["Mr. and Mrs. Smith came.", "Prof. Lee vs. Ms. Wu, No. 5"]),
    ("J. R. R. Tolkien wrote it. I read it", ["J. R. R. Tolkien wrote it.", "I read it"]),
    ("I wake at 7 a.m. I sleep at 11 p.m. every day", ["I wake at 7 a.m.", "I sleep at 11 p.m. every day"]),
    ("Smith Jr. is my son. He is five", ["Smith Jr. is my son.", "He is five"]),
    ("apples, pears, etc. are fine. I like tea", ["apples, pears, etc. are fine.", "I like tea"]),
    ("No. I don't eat meat", ["No.", "I don't eat meat"]),  # an answer, not a number
    ("Version 3.5 is out. I use it", ["Version 3.5 is out.", "I use it"]),
    ("我喜欢茶。你呢？我住在杭州！", ["我喜欢茶。", "你呢？", "我住在杭州！"]),
    ("I live in Paris.我喜欢茶。", ["I live in Paris.", "我喜欢茶。"]),  # mixed: a full stop before Chinese
    ("我在 Acme Inc. 工作", ["我在 Acme Inc. 工作"]),  # Chinese ends at 。, not at Inc.
    ("我住在 U.S. 我喜欢茶", ["我住在 U.S.", "我喜欢茶"]),
    ('He said "hi." I left', ['He said "hi."', "I left"]),
    ("line one\nline two", ["line one", "line two"]),
])
def test_sentences_end_where_sentences_end(text, sentences):
    assert split_sentences(text) == sentences


def test_a_final_full_stop_goes_but_never_an_abbreviations_dot():
    assert drop_full_stop("The user lives in Paris.") == "The user lives in Paris"
    assert drop_full_stop("用户住在杭州。") == "用户住在杭州"
    assert drop_full_stop("The user lives in the U.S.") == "The user lives in the U.S."
    assert drop_full_stop("The user works at Acme Inc.") == "The user works at Acme Inc."


# ---------------------------------------------------------------------------------------------- property

FIRST = ("Ursula", "James", "Mary", "Wei", "Aiko", "Pedro", "Grace", "Omar")
LAST = ("Smith", "Guin", "Tolkien", "Zhang", "Okafor", "Garcia", "Novak", "Haddad")
CITIES = ("Louis", "Paul", "Petersburg", "Augustine", "Albans", "Helens")
COMPANIES = ("Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay")
DAYS = ("Monday", "Tuesday", "Friday", "Sunday")
INITIALS = tuple("ABCDEGHJKLMNPRSTW")

# (template, language); every abbreviation stands inside the sentence, so a memory ending at one was cut there
ENGLISH = (
    "My favourite author is {first} {initial}. {last}",
    "I moved to St. {city} in {year}",
    "My doctor is Dr. {last} in the U.S. office",
    "My meeting is at {hour} a.m. on {day}",
    "I work at {company} Inc. in St. {city}",
    "My lawyer is Mr. {last} from No. {number} Main Road",
    "My teacher is Prof. {first} {last}, e.g. for maths",
    "My sister Mrs. {last} lives in St. {city} since {year}",
    "I prefer {company} vs. {company2} for work",
    "My dentist Ms. {last} opens at {hour} p.m. on {day}",
    "I keep pens, paper, etc. at {company} Inc. with {first} {last} Jr. every {day}",
)
CHINESE = (
    "我的医生是 Dr. {last}",
    "我最喜欢的作家是 {first} {initial}. {last}",
    "我{year}年搬到了 St. {city}",
    "我在 {company} Inc. 工作",
    "我每天 {hour} a.m. 起床",
    "我的老师是 Prof. {last}，住在 No. {number} 大街",
    "我的律师是 Mr. {first} {last}",
)
ABBREVIATED_END = re.compile(r"(?:\b[A-Z]|\b(?:Dr|St|Mr|Mrs|Ms|Prof|No|vs|Inc|Jr|etc)|e\.g|a\.m|p\.m|U\.S)\.?$")
_users = itertools.count()


@st.composite
def messages(draw):
    """One user message stating one to three facts, English, Chinese or both, and the tokens each must keep."""
    chosen = draw(st.lists(st.sampled_from(ENGLISH + CHINESE), min_size=1, max_size=3, unique=True))
    values = {
        "first": draw(st.sampled_from(FIRST)), "last": draw(st.sampled_from(LAST)),
        "initial": draw(st.sampled_from(INITIALS)), "city": draw(st.sampled_from(CITIES)),
        "company": draw(st.sampled_from(COMPANIES)), "company2": draw(st.sampled_from(COMPANIES)),
        "day": draw(st.sampled_from(DAYS)), "year": str(draw(st.integers(1990, 2030))),
        "hour": str(draw(st.integers(1, 12))), "number": str(draw(st.integers(2, 999))),
    }
    # each ends as its language ends a sentence: a full stop and a space, or 。
    text = "".join(template.format(**values) + ("。" if template in CHINESE else ". ") for template in chosen)
    tokens = {name: value for name, value in values.items() if any("{" + name + "}" in t for t in chosen)}
    return text.strip(), tokens


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(messages())
def test_every_name_and_number_of_a_stated_fact_reaches_a_memory(bank, message):
    text, tokens = message
    user = f"user-{next(_users)}"  # one bank for every example; a user of its own for each
    bank.add_messages(text, user_id=user)
    stored = _stored(bank, user)
    count("facts stated with abbreviations (property examples)")
    everything = " ".join(stored)
    for name, token in tokens.items():
        assert re.search(rf"(?<![A-Za-z0-9]){re.escape(token)}(?![A-Za-z0-9])", everything), (name, token, text, stored)
    for content in stored:  # a memory ends where the fact ends, never at the abbreviation inside it
        assert not ABBREVIATED_END.search(drop_full_stop(content)), (text, content)
