"""Speakers in dialogue-shaped memories (vecmem/retrieval/query/speakers.py): a name a turn addresses is an address
token, so a question naming a speaker finds that speaker's turns before the other speaker's turns to them."""

import pytest

from vecmem import RankWeights
from vecmem.models import MemoryRecord
from vecmem.retrieval.query.speakers import ADDRESS, is_dialogue_turn, split_addresses
from vecmem.retrieval.query.tokenize import memory_tokens


@pytest.mark.parametrize(("content", "dialogue"), [
    ('Caroline said, "I went to a support group."', True),
    ("Caroline: I went to a support group.", True),
    ("Mary Ann said, “hello”", True),
    ("The user went to a support group with Caroline.", False),
    ("caroline said hi", False),
])
def test_dialogue_turns_open_with_their_speaker(content, dialogue):
    assert is_dialogue_turn(content) is dialogue


@pytest.mark.parametrize(("text", "addressed"), [
    ('Melanie said, "Hey Caroline! Good to see you!"', ["Caroline"]),
    ('Melanie said, "Wow, that\'s cool, Caroline! What happened?"', ["Caroline"]),
    ('Caroline said, "Thanks, Mel! It was great. Amazing!"', ["Mel"]),
    ("Caroline: Mel, did you see it?", ["Mel"]),
    ('Melanie said, "I told Caroline about it."', []),  # a mention, not an address
    ('Melanie said, "Wow, amazing!"', []),  # an interjection opening a sentence is no name
])
def test_vocatives_are_the_addresses(text, addressed):
    blanked, names = split_addresses(text)
    assert names == addressed
    assert len(blanked) == len(text)
    assert not any(name in blanked for name in addressed)


def test_an_addressed_name_is_an_address_token_and_a_mention_is_the_name():
    addressing = MemoryRecord(id="m", content='Melanie said, "Hey Caroline! How was the group?"', user_id="u")
    mentioning = MemoryRecord(id="m", content='Melanie said, "I told Caroline about the group."', user_id="u")
    plain = MemoryRecord(id="m", content="Hey Caroline! How was the group?", user_id="u")  # not a dialogue turn
    assert "carolin" not in memory_tokens(addressing) and ADDRESS + "carolin" in memory_tokens(addressing)
    assert "melani" in memory_tokens(addressing)  # the speaker's own name stays hers
    assert "carolin" in memory_tokens(mentioning)
    assert "carolin" in memory_tokens(plain)
    assert len(memory_tokens(addressing)) == len(memory_tokens(plain)) + 2  # "melani", "said": no token is lost


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_a_question_about_a_speaker_finds_her_turn_before_turns_addressed_to_her(make_bank, settings, mode):
    bank = make_bank(settings=settings.with_changes(search_mode=mode, weights=RankWeights(1, 0, 0)))
    hers = bank.add('Caroline said, "I went to the adoption meeting last week."', resolve=False)
    bank.add('Melanie said, "Hey Caroline! Was the adoption meeting good?"', resolve=False)
    bank.add('Melanie said, "Oh Caroline, tell me about the adoption meeting!"', resolve=False)
    bank.add('Melanie said, "I painted a lake with the kids."', resolve=False)
    (hit,) = bank.search("When did Caroline go to the adoption meeting?", 1)
    assert hit.id == hers.id
