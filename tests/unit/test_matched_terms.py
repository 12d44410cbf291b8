"""Why a memory was found: each hit's ``matched_terms``, the query's words its keyword tokens hold (content, tags,
context), as the query wrote them (tokenize.terms, tokenize.matched_terms), computed for the k hits returned."""

import pytest

from vecmem.retrieval.query.tokenize import matched_terms, terms, tokenize

pytestmark = pytest.mark.both_stores  # the index's stored tokens: in memory, embedded and on a `chroma run` server


def shared(query, memory):
    return matched_terms(query, terms(query), tokenize(memory))


@pytest.mark.parametrize("text", ["Josephine's Paintings by the harbour", "我住在杭州西湖区，用 PostgreSQL", "İstanbul trip",
                                  "it's", "", "C++ & Rust!", "帮我写一个 sleep 函数"])
def test_terms_are_the_tokens_with_what_they_were_made_from(text):
    found = terms(text)
    assert [token for _, token in found] == tokenize(text)
    assert all(surface.lower() in text.lower() for surface, _ in found)


def test_latin_terms_are_the_query_s_words_not_their_stems():
    assert terms("Josephine's Paintings") == [("Josephine", "josephin"), ("Paintings", "paint")]
    assert shared("Which paintings by Josephine?", "Josephine painted a harbour") == ("paintings", "Josephine")
    assert shared("the tea and the coffee", "The user likes coffee") == ("coffee",)  # stopwords are no terms


def test_chinese_terms_show_what_no_other_term_shows():
    assert shared("我住在杭州西湖区", "用户住在杭州西湖区附近") == ("住", "杭州", "西湖区")  # not 西湖, 湖区, 州西
    assert shared("我住在杭州西湖区", "用户住在杭州") == ("住", "杭州")
    assert shared("帮我写一个查询 PostgreSQL 的函数", "用户的公司用的是 PostgreSQL") == ("PostgreSQL",)
    assert shared("今天天气", "用户喜欢喝乌龙茶") == ()


def test_each_hit_names_the_words_it_was_found_by(bank):
    tea = bank.add("The user drinks oolong every afternoon", tags=["tea"], context="我们聊到了乌龙茶")
    bank.add("The user works at Acme on billing")
    (hit,) = bank.search("Which tea does the user drink in the afternoon? 乌龙茶", 1)
    assert hit.id == tea.id
    assert hit.matched_terms == ("tea", "user", "drink", "afternoon", "乌龙茶")  # a tag and the context count too
    assert hit.to_dict()["matched_terms"] == list(hit.matched_terms)
    assert all(hit.matched_terms == () for hit in bank.search("", 2))  # nothing asked, nothing matched


def test_a_dialogue_query_matches_by_its_utterances_not_its_speaker_tags(bank):
    bank.add("Greta painted a sunrise over the harbour")
    (hit,) = bank.search("<Josephine>: what did you paint, Greta?\n<Greta>: a sunrise, by the harbour", 1)
    assert hit.matched_terms == ("paint", "Greta", "sunrise", "harbour")  # the second Greta only tags a speaker
    portraits = bank.add("Josephine paints portraits")
    hits = {hit.id: hit for hit in bank.search("<Josephine>: and you, Greta?\n<Greta>: a sunrise", 2)}
    assert hits[portraits.id].matched_terms == ()  # its name is only a speaker tag here


@pytest.mark.parametrize("mode", ["dense", "keyword", "hybrid"])
def test_every_mode_says_which_words_the_memory_shares(make_bank, settings, mode):
    bank = make_bank(settings=settings.with_changes(search_mode=mode))
    edited = bank.add("the cat sleeps on the sofa")
    bank.update(edited.id, content="the cat sleeps on the windowsill")  # tokens of the edit, not of the first text
    (hit,) = bank.search("where does the cat sleep: sofa or windowsill?", 1)
    assert hit.matched_terms == ("cat", "sleep", "windowsill")
