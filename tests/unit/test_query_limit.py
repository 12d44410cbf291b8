"""A search's work is bounded whatever its text: a query is at most MAX_QUERY_CHARS (refused beyond it, naming
the field), and a longer message is searched for by its end (``searchable``), whole lines kept."""

import pytest

from vecmem import InvalidInputError, dialogue_query
from vecmem.retrieval.query.dialogue import split_dialogue
from vecmem.retrieval.query.parsed import MAX_QUERY_CHARS, MODEL_PASS_TOKENS, one_pass, searchable


def test_a_query_longer_than_a_search_reads_is_refused_naming_the_field(bank):
    bank.search("x" * MAX_QUERY_CHARS, 3)
    with pytest.raises(InvalidInputError) as refused:
        bank.search("长" * (MAX_QUERY_CHARS + 1), 3)
    assert refused.value.field == "query" and f"{MAX_QUERY_CHARS:,}" in str(refused.value)


def test_a_long_message_is_searched_for_by_its_end_and_shown_whole(bank):
    tea = bank.add("The user drinks oolong tea", resolve=False)
    message = "lorem ipsum " * 1_000 + "\nWhich tea do I drink?"
    pack = bank.build_context(message)
    assert [hit.id for hit in pack.memories] == [tea.id]
    assert pack.messages[-1]["content"] == message


@pytest.mark.parametrize("text", ["short", "a" * MAX_QUERY_CHARS, "b" * (3 * MAX_QUERY_CHARS),
                                  "line\n" * 1_000, ("x" * 1_500 + "\n") * 3 + "the question"])
def test_searchable_keeps_the_end_within_the_limit(text):
    kept = searchable(text)
    assert len(kept) <= MAX_QUERY_CHARS
    assert text.rstrip("\n").endswith(kept.rstrip("\n")) or text.endswith(kept)
    if len(text) <= MAX_QUERY_CHARS:
        assert kept == text


def test_a_long_conversation_stays_a_dialogue_of_its_latest_turns():
    query = dialogue_query([("Dana" if i % 2 else "Assistant", f"turn {i} " + "words " * 30) for i in range(60)])
    kept = searchable(query)
    utterances = split_dialogue(kept)
    assert len(query) > MAX_QUERY_CHARS and utterances is not None
    assert utterances[-1].startswith("turn 59") and len(kept) <= MAX_QUERY_CHARS


def test_the_dense_side_embeds_one_pass_of_the_model_of_each_text():
    assert one_pass("short question?") == "short question?"
    chinese = "字" * 2_000
    assert len(one_pass(chinese)) == MODEL_PASS_TOKENS
    latin = "word " * 1_000
    assert len(one_pass(latin)) == 4 * MODEL_PASS_TOKENS and latin.endswith(one_pass(latin))


def test_a_long_query_is_embedded_as_far_as_one_pass(make_bank, monkeypatch):
    bank = make_bank()
    seen: list[str] = []
    embed = bank.embedder.embed_query
    monkeypatch.setattr(bank.embedder, "embed_query", lambda text: seen.append(text) or embed(text))
    bank.search("长" * MAX_QUERY_CHARS, 3)
    assert seen and max(len(text) for text in seen) <= MODEL_PASS_TOKENS


def test_writes_of_long_text_search_for_their_end_and_store_it_whole(bank):
    long_fact = "The user keeps notes. " * 300 + "I live in Porto."
    assert bank.add(long_fact).content == long_fact  # its related memories were searched for by its end
    result = bank.add_messages([{"role": "user", "content": "I work at Acme. " + "Also some filler words. " * 1_000}])
    assert any("Acme" in memory.content for memory in result.written)
