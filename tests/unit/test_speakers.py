"""Speakers in a conversation between people (vecmem/retrieval/query/speakers.py): in a memory whose provenance
names its speaker, a name the turn addresses is an address token, so a question naming a speaker finds that
speaker's turns before the other speaker's turns to them. What a memory's text looks like decides nothing."""

import itertools

import pytest

from vecmem import RankWeights
from vecmem.models import MemoryRecord, Provenance, Turn
from vecmem.retrieval.query.speakers import ADDRESS, split_addresses
from vecmem.retrieval.query.tokenize import memory_tokens


@pytest.mark.parametrize(("text", "addressed"), [
    ("Hey Priya! Long time no see!", ["Priya"]),
    ("Oh, that sounds lovely, Priya! Where was it?", ["Priya"]),
    ("Thanks, Tom! It went well. Brilliant!", ["Tom"]),
    ("Tom, did you get the tickets?", ["Tom"]),
    ("I told Priya about the concert.", []),  # a mention, not an address
    ("Wow, brilliant!", []),  # an interjection opening a sentence is no name
    ("We went to Paris, Lyon and Nice.", []),  # names in a list are no addresses
])
def test_vocatives_are_the_addresses(text, addressed):
    blanked, names = split_addresses(text)
    assert names == addressed
    assert len(blanked) == len(text)
    assert not any(name in blanked for name in addressed)


def test_nobody_addresses_themselves():
    assert split_addresses("Tom, the one who booked it, paid.", "Tom")[1] == []
    assert split_addresses("Tom, did you pay?", "Priya")[1] == ["Tom"]


def turn_of(speaker: str | None, content: str) -> MemoryRecord:
    said = None if speaker is None else Provenance("s1", ("3",), speaker)
    return MemoryRecord(id="m", content=content, user_id="u", provenance=said)


def test_in_a_turn_an_addressed_name_is_an_address_token_and_a_mention_is_the_name():
    addressing = turn_of("Tom", "Hey Priya! How was the choir rehearsal?")
    mentioning = turn_of("Tom", "I told Priya about the choir rehearsal.")
    plain = turn_of(None, "Hey Priya! How was the choir rehearsal?")  # no speaker: not a turn between people
    assert "priya" not in memory_tokens(addressing) and ADDRESS + "priya" in memory_tokens(addressing)
    assert "priya" in memory_tokens(mentioning)
    assert "priya" in memory_tokens(plain)
    assert len(memory_tokens(addressing)) == len(memory_tokens(plain))  # no token is lost


@pytest.mark.parametrize("content", ['Tom said, "Hey Priya! Ready?"', "Tom: Hey Priya! Ready?"])
def test_a_memory_shaped_like_a_transcript_is_no_turn_without_its_speaker(content):
    assert "priya" in memory_tokens(turn_of(None, content))


def test_add_messages_records_who_said_each_message(make_bank):
    bank = make_bank()
    result = bank.add_messages([Turn("user", "Hey Priya! I adopted a kitten called Miso yesterday.", speaker="Tom")],
                               session_id="chat-1")
    (memory,) = result.written
    assert memory.provenance == Provenance("chat-1", ("0",), "Tom")
    assert MemoryRecord.from_dict(memory.to_dict()).provenance == memory.provenance


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_question_about_a_speaker_finds_her_turn_before_turns_addressed_to_her(make_bank, settings, mode):
    bank = make_bank(settings=settings.with_changes(search_mode=mode, weights=RankWeights(1, 0, 0)))
    turns = itertools.count()

    def said(speaker: str, text: str) -> MemoryRecord:
        return bank.add(f"{speaker}: {text}", provenance=Provenance("s1", (next(turns),), speaker), resolve=False)

    hers = said("Priya", "I went to the choir audition last week.")
    said("Tom", "Hey Priya! Was the choir audition good?")
    said("Tom", "Oh Priya, tell me about the choir audition!")
    said("Tom", "I painted a lighthouse with the kids.")
    (hit,) = bank.search("When did Priya go to the choir audition?", 1)
    assert hit.id == hers.id
