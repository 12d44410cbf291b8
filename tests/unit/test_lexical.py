import pytest

from vecmem import MemoryRecord
from vecmem.models import MemoryFilter
from vecmem.retrieval.index.keyword import IndexedMemory, KeywordIndex, memory_tokens, tokenize


def test_english_is_stemmed_without_stopwords_or_possessives():
    assert tokenize("Josephine's paintings of the sunrise") == ["josephin", "paint", "sunris"]
    assert tokenize("She painted a SUNRISE") == ["she", "paint", "sunris"]


def test_chinese_gets_jieba_words_and_character_bigrams():
    tokens = tokenize("我喜欢用TypeScript写代码")
    assert "喜欢" in tokens and "代码" in tokens  # jieba words
    assert "欢用" in tokens and "写代" in tokens  # bigrams catch other segmentations
    assert "杭州" in tokenize("住在杭州市") and "西湖" in tokenize("西湖区")
    assert "typescript" in tokens
    assert "我" not in tokens  # a stopword
    assert tokenize("猫") == ["猫"]


def test_a_bigram_that_is_a_stopword_weighs_nothing():
    assert not {"一个", "什么", "我们"} & set(tokenize("帮我写一个函数，我们用什么好"))
    assert "函数" in tokenize("帮我写一个函数")
    index = index_of(record("ts", "用户喜欢用 TypeScript 写一个前端"), record("go", "用户写后端用 Go"))
    assert tokenize("一个") == [] and found(index, "一个") == set()  # the stop-bigram alone matches nothing
    assert found(index, "一个前端") == {"ts"}  # what names the topic still does


def test_a_bigram_across_two_words_weighs_nothing():
    # 写一 (写|一个) and 我写 (我|写) are accidents of adjacency: they once ranked the TypeScript memory first
    assert not {"写一", "我写", "帮我", "个前"} & set(tokenize("帮我写一个 sleep 函数，用 TypeScript 写一个前端"))
    assert "㐀㐁" in tokenize("㐀㐁")  # characters jieba leaves single (an unknown name) still pair up
    index = index_of(record("ts", "用户喜欢用 TypeScript 写一个前端"), record("sleep", "用户常用 sleep 调试"),
                     record("city", "用户住在杭州"), record("cat", "用户养了一只猫"))
    result = index.search([(tokenize("帮我写一个 sleep 函数"), 1.0)], MemoryFilter(), 10)
    assert [memory_id for memory_id, _ in result.top] == ["sleep", "ts"]  # 写一 made it ["ts", "sleep"]


def test_memory_tokens_cover_content_tags_and_context():
    record = MemoryRecord(id="m", content="alpha", tags=["beta"], context="gamma delta")
    assert memory_tokens(record) == ["alpha", "beta", "gamma", "delta"]


def record(memory_id, content, scope="global", memory_type="fact", superseded_by=None):
    return MemoryRecord(id=memory_id, content=content, scope=scope, type=memory_type, superseded_by=superseded_by)


def index_of(*records, **options):
    index = KeywordIndex(**options)
    index.replace_all((r.id, IndexedMemory.of(r, memory_tokens(r))) for r in records)
    return index


def found(index, text, memory_filter=None, top_n=50):
    result = index.search([(tokenize(text), 1.0)], memory_filter or MemoryFilter(), top_n)
    return {memory_id for memory_id, _ in result.top}


def test_search_respects_the_isolation_filter():
    index = index_of(
        record("g", "green tea every morning"),
        record("s1", "green tea in session one", scope="s1"),
        record("old", "green tea forever", superseded_by="g"),
        record("pref", "green tea preference", memory_type="preference"),
    )
    assert found(index, "green tea") == {"g", "pref"}
    assert found(index, "green tea", MemoryFilter(session_id="s1")) == {"g", "s1", "pref"}
    assert found(index, "green tea", MemoryFilter(types=frozenset({"preference"}))) == {"pref"}
    assert "old" in found(index, "green tea", MemoryFilter(include_superseded=True, all_sessions=True))
    assert index.view(MemoryFilter()).fraction == 0.5
    assert index.view(MemoryFilter()).visible("g") is True and index.view(MemoryFilter()).visible("s1") is False
    assert index.view(MemoryFilter()).visible("unknown") is None
    assert found(index, "green tea", MemoryFilter(session_id="never-seen")) == {"g", "pref"}


def test_result_best_top_and_lookup():
    index = index_of(record("a", "apples apples"), record("b", "apples and pears"), record("c", "bananas"))
    result = index.search([(tokenize("apples"), 1.0)], MemoryFilter(), 1)
    assert [memory_id for memory_id, _ in result.top] == ["a"] and result.best == result.top[0][1]
    assert 0 < result.score_of("b") < result.best and result.score_of("c") == 0 and result.score_of("zz") == 0


def test_edits_keep_the_index_in_step():
    index = index_of(record("a", "apples"), record("b", "bananas"))
    assert found(index, "apples") == {"a"}
    index.put("c", IndexedMemory.of(record("c", "apples and pears"), tokenize("apples and pears")))
    assert found(index, "apples") == {"a", "c"}
    index.remove(["a"])
    assert found(index, "apples") == {"c"}
    index.refresh_filters([record("c", "apples and pears", superseded_by="b")])
    assert found(index, "apples") == set()
    index.put("b", IndexedMemory.of(record("b", "apple pie"), tokenize("apple pie")))  # new words for b
    assert found(index, "apple pie") == {"b"} and found(index, "bananas") == set()
    assert len(index) == 2 and "c" in index and "a" not in index


def test_the_delta_scores_exactly_like_bm25s_and_merges():
    import random

    rng = random.Random(3)
    words = [f"w{i}" for i in range(40)]
    docs = [record(f"d{i}", " ".join(rng.choices(words, k=rng.randint(3, 12)))) for i in range(200)]
    whole = index_of(*docs)
    query = [(tokenize("w1 w2 w2 w39"), 1.0)]
    reference = whole.search(query, MemoryFilter(), 200)
    # the formula used for the delta, applied to the main memories, gives bm25s's own scores
    formula = whole.snapshot().delta_scores(query[0][0], range(0, 200))
    for memory_id, score in reference.top:
        assert formula[whole._slot[memory_id]] == pytest.approx(score, rel=1e-5)
    growing = index_of(*docs[:150], min_merge=1000)
    for doc in docs[150:]:
        growing.put(doc.id, IndexedMemory.of(doc, memory_tokens(doc)))
    assert len(growing) == 200 and growing._main_size == 150  # no rebuild on writes
    assert found(growing, "w1 w2 w39", top_n=200) == {m for m, _ in reference.top}
    merging = index_of(*docs[:150], min_merge=10, merge_fraction=0.1)
    for doc in docs[150:]:
        merging.put(doc.id, IndexedMemory.of(doc, memory_tokens(doc)))
    merged = merging.search(query, MemoryFilter(), 200)
    assert merging._main_size == 200 and [m for m, _ in merged.top] == [m for m, _ in reference.top]


def test_weighted_query_parts_average_their_scores():
    index = index_of(record("a", "apples"), record("b", "bananas"))
    both = index.search([(tokenize("apples"), 1.0), (tokenize("bananas"), 3.0)], MemoryFilter(), 5)
    assert both.score_of("b") == pytest.approx(3 * both.score_of("a"))
    assert index.search([([], 1.0)], MemoryFilter(), 5).top == []
    assert KeywordIndex().search([(["x"], 1.0)], MemoryFilter(), 5).top == []


def test_the_english_stopwords_are_bm25s_own():
    from bm25s.stopwords import STOPWORDS_EN

    from vecmem.retrieval.query.tokenize import EN_STOPWORDS

    assert frozenset(STOPWORDS_EN) == EN_STOPWORDS


def test_every_han_block_is_split_alike_by_retrieval_and_the_hit_rate():
    """Extension A and the compatibility block count as Chinese too (text.py), in keywords and in the hit rate."""
    from vecmem.agent.hits import hit_terms

    extension_a, compatibility = "\u3400\u3401", "\uf900\uf901"
    text = f"{extension_a} {compatibility} 中文"
    assert {extension_a, compatibility, "中文"} <= set(tokenize(text))
    assert {extension_a, compatibility, "中文"} <= hit_terms(text)


def test_a_user_whose_memories_hold_no_keyword_token_is_still_searched(bank):
    """bm25s cannot index a corpus without a single token (found by schemathesis: content "~\\" with a tag of
    letters the tokenizer drops); such a user is found by the dense side alone, not a 500."""
    record = bank.add("~\\", user_id="symbols", tags=["\u0136-\u00f2\u0129\u00c3\u012a\U0005bce6"])
    assert [hit.id for hit in bank.search("anything", 3, user_id="symbols")] == [record.id]


def test_the_query_stopwords_hold_nltks_english_list_as_bm25s_ships_it():
    from bm25s.stopwords import STOPWORDS_EN_PLUS

    from vecmem.retrieval.query.question import QUERY_STOPWORDS

    assert frozenset(STOPWORDS_EN_PLUS) <= QUERY_STOPWORDS
    assert {"what", "did", "谁", "啥"} <= QUERY_STOPWORDS and "caroline" not in QUERY_STOPWORDS


# ---- jieba's dictionary kept in the home (tokenize.keep_dictionary_in)

def test_the_kept_dictionary_reads_back_as_written_and_only_for_its_jieba(tmp_path):
    from vecmem.retrieval.query.tokenize import read_dictionary, write_dictionary

    kept = tmp_path / "jieba-dictionary.npz"
    write_dictionary(kept, "0.42.1", {"杭州": 20, "杭": 0, "杭州市": 3}, 23)
    assert read_dictionary(kept, "0.42.1") == ({"杭州": 20, "杭": 0, "杭州市": 3}, 23)
    assert read_dictionary(kept, "0.43") is None  # another jieba's words: built again
    assert read_dictionary(tmp_path / "missing.npz", "0.42.1") is None
    assert [path.name for path in tmp_path.iterdir()] == ["jieba-dictionary.npz"]  # no temporary file left


def test_a_damaged_dictionary_file_is_built_again_not_trusted(tmp_path):
    from vecmem.retrieval.query.tokenize import read_dictionary, write_dictionary

    kept = tmp_path / "jieba-dictionary.npz"
    write_dictionary(kept, "0.42.1", {"杭州": 20, "杭": 0}, 20)
    kept.write_bytes(kept.read_bytes()[:-40])  # cut short
    assert read_dictionary(kept, "0.42.1") is None
    kept.write_bytes(b"not a zip")
    assert read_dictionary(kept, "0.42.1") is None


def test_a_folder_that_cannot_be_written_costs_a_build_not_an_error(tmp_path):
    from vecmem.retrieval.query.tokenize import write_dictionary

    write_dictionary(tmp_path / "gone" / "jieba-dictionary.npz", "0.42.1", {"杭州": 20}, 20)
    assert not (tmp_path / "gone").exists()


@pytest.mark.slow  # builds jieba's dictionary in a new process (a second or two)
def test_a_home_builds_jiebas_dictionary_once_and_later_processes_read_it(tmp_path):
    import os
    import subprocess
    import sys

    kept = tmp_path / "jieba-dictionary.npz"
    env = {**os.environ, "TMPDIR": str(tmp_path / "temp")}  # jieba's own cache would go there: it must not
    (tmp_path / "temp").mkdir()
    cut = ("import sys, marshal; from pathlib import Path; from vecmem.retrieval.query import tokenize as t; {before}"
           "t.keep_dictionary_in(Path(sys.argv[1])); print(t.tokenize('我住在杭州，在一家云计算公司工作'))")
    built = subprocess.run([sys.executable, "-c", cut.format(before=""), str(kept)], env=env, capture_output=True,
                           text=True, check=True)
    assert kept.is_file() and not list((tmp_path / "temp").iterdir())
    # a later process reads the file: building the dictionary again would fail here
    never_build = "import jieba; jieba.dt.gen_pfdict = None; "
    read = subprocess.run([sys.executable, "-c", cut.format(before=never_build), str(kept)], env=env,
                          capture_output=True, text=True, check=True)
    plain = subprocess.run([sys.executable, "-c", "from vecmem.retrieval.query.tokenize import tokenize; "
                            "print(tokenize('我住在杭州，在一家云计算公司工作'))"], capture_output=True, text=True, check=True)
    assert built.stdout == read.stdout == plain.stdout and "杭州" in plain.stdout
