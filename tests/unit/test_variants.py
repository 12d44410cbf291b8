"""Spelling variants on the keyword side (vecmem/retrieval/query/variants.py): which pairs the rule joins and which it
cannot, that Chinese and digits are left alone, that an exact match outranks a variant, and "Muhammad" finding
the memory that says "Mohammed" through MemoryBank in keyword and hybrid mode."""

import pytest

from vecmem import RankWeights
from vecmem.models import MemoryFilter, MemoryRecord
from vecmem.retrieval.index.keyword import IndexedMemory, KeywordIndex
from vecmem.retrieval.query.parsed import parse_query
from vecmem.retrieval.query.tokenize import memory_tokens, terms
from vecmem.retrieval.query.variants import VARIANT_WEIGHT, distance, edit_distance, spelling_variants, variants_of


def _stem(word: str) -> str:
    ((_, stem),) = terms(word)
    return stem


def _index(texts: list[str], *, delta: bool = False) -> KeywordIndex:
    """An index of these texts: in the BM25 model (built at once) or, with ``delta``, all in the delta."""
    items = []
    for number, text in enumerate(texts):
        record = MemoryRecord(id=f"m{number}", content=text, user_id="u")
        items.append((record.id, IndexedMemory.of(record, memory_tokens(record))))
    index = KeywordIndex()
    if delta:
        index.put_many(items)
    else:
        index.replace_all(items)
    return index


def test_edit_distance_counts_substitutions_insertions_and_adjacent_transpositions():
    assert edit_distance("kitten", "sitting", 5) == 3
    assert edit_distance("abcd", "abdc", 2) == 1  # one transposition
    assert edit_distance("abcd", "abcd", 0) == 0
    assert edit_distance("abcdef", "uvwxyz", 2) == 3  # past the bound: bound + 1


@pytest.mark.parametrize(("asked", "written"), [
    ("Muhammad", "Mohammed"),  # "mohammed" is stemmed to "moham": reached through "muham", one vowel changed
    ("Mohammed", "Muhammad"),  # the word as written against the unstemmed "muhammad": two vowels changed
    ("Mohammad", "Muhammed"),
    ("Carolyn", "Caroline"),
    ("Phillip", "Philip"),  # one edit in six letters
])
def test_pairs_the_name_rule_joins(asked, written):
    assert distance(asked.lower(), _stem(asked), _stem(written), named=True) is not None


@pytest.mark.parametrize(("asked", "written"), [
    ("Aqib", "Akim"),  # two consonants of four letters: a rule loose enough for this would join most short names
    ("Akin", "Akim"),  # one consonant in four letters: another name as often as a variant
    ("Sean", "Shaun"),
    ("Steven", "Stephen"),
    ("Jeffrey", "Geoffrey"),
    ("Katherine", "Catherine"),  # the first letter differs
    ("Aleksander", "Alexander"),  # "ks" for "x": two edits against the seven-letter stem "alexand"
    ("Sandwich", "Sand"),  # a word the asked one merely begins with, shorter than five letters
])
def test_pairs_the_name_rule_cannot_join(asked, written):
    assert distance(asked.lower(), _stem(asked), _stem(written), named=True) is None


@pytest.mark.parametrize("delta", [False, True])
def test_a_word_the_index_lacks_finds_its_variant_in_the_model_and_in_the_delta(delta):
    snapshot = _index(["Mohammed fixed the bike", "The bike shop opens at nine"], delta=delta).snapshot()
    assert variants_of(snapshot, "Muhammad", _stem("Muhammad")) == ["moham"]


def test_a_word_the_index_holds_is_never_widened():
    snapshot = _index(["Muhammad fixed the bike", "Mohammed sold the car"]).snapshot()
    assert variants_of(snapshot, "Muhammad", _stem("Muhammad")) == []


def test_chinese_digits_and_short_words_are_left_alone():
    snapshot = _index(["用户住在杭州市西湖区", "order 20231 shipped", "the cart is red"]).snapshot()
    assert variants_of(snapshot, "20232", "20232") == []  # one edit from 20231, but digits are never guessed at
    assert variants_of(snapshot, "Cart", "cart") == []  # four letters: too many neighbours
    query = parse_query("Where is 杭洲 西胡区 20232")
    assert [token for _, token in query.terms[0]]  # Chinese tokens the index lacks
    assert spelling_variants(snapshot, query).parts == ()


def test_only_words_written_as_names_are_widened():
    snapshot = _index(["Mohammed fixed the bike", "The bike shop opens at nine"]).snapshot()
    for query, widened in [("Who is Muhammad", True), ("who is muhammad", False), ("Muhammad fixed it", False)]:
        found = spelling_variants(snapshot, parse_query(query))
        assert bool(found.parts) == widened, query


def test_an_exact_match_outranks_a_variant_match():
    index = _index(["Mohammed fixed the bike", "Muhammad fixed the bike", "The weather was cold"])
    snapshot = index.snapshot()
    variants = spelling_variants(snapshot, parse_query("Who is Muhammad"))
    assert variants.parts == ()  # the index holds "muhammad": no variants
    query = parse_query("Who is Muhamad")  # a spelling neither memory has: both are variants, one edit each
    parts = query.keyword_parts
    variants = spelling_variants(snapshot, query)
    assert variants.parts and all(weight == VARIANT_WEIGHT for _, weight in variants.parts)
    found = snapshot.search(parts, snapshot.view(MemoryFilter()), 3, variants.parts)
    assert {memory_id for memory_id, _ in found.top} == {"m0", "m1"}
    # the exact word against its variant, in the same query part: the exact one weighs twice as much
    exact = snapshot.search([(["muhammad"], 1.0)], snapshot.view(MemoryFilter()), 3, [(["moham"], VARIANT_WEIGHT)])
    assert exact.top[0][0] == "m1" and exact.top[1][0] == "m0" and exact.top[0][1] > exact.top[1][1]


def test_a_variant_does_not_dilute_the_exact_matches():
    snapshot = _index(["Mohammed fixed the bike", "The bike shop opens at nine"]).snapshot()
    view = snapshot.view(MemoryFilter())
    plain = snapshot.search([(["bike"], 1.0)], view, 2)
    widened = snapshot.search([(["bike"], 1.0)], view, 2, [(["moham"], VARIANT_WEIGHT)])
    assert widened.score_of("m1") == pytest.approx(plain.score_of("m1"))
    assert widened.scale == pytest.approx(plain.scale)
    assert widened.score_of("m0") > plain.score_of("m0")


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_muhammad_finds_the_memory_that_says_mohammed(make_bank, settings, mode):
    bank = make_bank(settings=settings.with_changes(search_mode=mode, weights=RankWeights(1, 0, 0)))
    target = bank.add("Mohammed lent me his ladder for the weekend")
    for text in ["I need to return the library books", "My sister lent me her bicycle",
                 "The ladder in the garage is broken", "We watched a film at the weekend"]:
        bank.add(text)
    hits = bank.search("What did Muhammad lend me?", 2)
    found = next(hit for hit in hits if hit.id == target.id)  # hybrid: the fake embedder's dense side may lead
    assert found.keyword == 1.0 and "Muhammad" in found.matched_terms
    if mode == "keyword":
        assert hits[0].id == target.id


def test_a_parsed_query_names_the_words_it_writes_as_names_in_each_part():
    assert [written for written, _ in parse_query("Did Priya meet Gus in Paris?").names[0]] == [
        "Priya", "Gus", "Paris"]
    assert parse_query("Paris is lovely").names == ((),)  # a sentence's first word is capitalised anyway
    dialogue = parse_query("<Priya>: I met Gus today\n<Gus>: Hi Priya!")
    assert [[written for written, _ in part] for part in dialogue.names] == [["Gus"], ["Priya"]]
