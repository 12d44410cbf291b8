import pytest

from vecmem import MemoryFilter, MemoryRecord
from vecmem.lexical import IndexedMemory, KeywordIndex, memory_tokens, split_dialogue, tokenize


def test_english_is_stemmed_without_stopwords_or_possessives():
    assert tokenize("Caroline's paintings of the sunrise") == ["carolin", "paint", "sunris"]
    assert tokenize("She painted a SUNRISE") == ["she", "paint", "sunris"]


def test_chinese_gets_jieba_words_and_character_bigrams():
    tokens = tokenize("我喜欢用TypeScript写代码")
    assert "喜欢" in tokens and "代码" in tokens  # jieba words
    assert "欢用" in tokens and "写代" in tokens  # bigrams catch other segmentations
    assert "typescript" in tokens
    assert "我" not in tokens  # a stopword
    assert tokenize("猫") == ["猫"]


def test_memory_tokens_cover_content_tags_and_context():
    record = MemoryRecord(id="m", content="alpha", tags=["beta"], context="gamma delta")
    assert memory_tokens(record) == ["alpha", "beta", "gamma", "delta"]


@pytest.mark.parametrize(
    ("query", "utterances"),
    [
        ("what is async/await?", None),
        ('<BOD>\n<Bart>:"I am nervous"\n<Assistant>:"Breathe deeply"\n', ["I am nervous", "Breathe deeply"]),
        ("User: hi there\nAssistant: hello\n\nUser: how are you", ["hi there", "hello", "how are you"]),
        ("one line\n", None),
    ],
)
def test_dialogue_shaped_queries_are_split(query, utterances):
    assert split_dialogue(query) == utterances


def record(memory_id, content, scope="global", memory_type="fact", superseded_by=None):
    return MemoryRecord(id=memory_id, content=content, scope=scope, type=memory_type, superseded_by=superseded_by)


def index_of(*records):
    index = KeywordIndex()
    index.replace_all((r.id, IndexedMemory.of(r, memory_tokens(r))) for r in records)
    return index


def test_scores_respect_the_isolation_filter():
    index = index_of(
        record("g", "green tea every morning"),
        record("s1", "green tea in session one", scope="s1"),
        record("old", "green tea forever", superseded_by="g"),
        record("pref", "green tea preference", memory_type="preference"),
    )
    query = [(tokenize("green tea"), 1.0)]
    assert set(index.scores(query, MemoryFilter())) == {"g", "pref"}
    assert set(index.scores(query, MemoryFilter(session_id="s1"))) == {"g", "s1", "pref"}
    assert set(index.scores(query, MemoryFilter(types=frozenset({"preference"})))) == {"pref"}
    assert "old" in index.scores(query, MemoryFilter(include_superseded=True, all_sessions=True))


def test_edits_keep_the_index_in_step():
    index = index_of(record("a", "apples"), record("b", "bananas"))
    query = [(tokenize("apples"), 1.0)]
    assert set(index.scores(query, MemoryFilter())) == {"a"}
    index.put("c", IndexedMemory.of(record("c", "apples and pears"), tokenize("apples and pears")))
    assert set(index.scores(query, MemoryFilter())) == {"a", "c"}
    index.remove(["a"])
    assert set(index.scores(query, MemoryFilter())) == {"c"}
    index.refresh_filters([record("c", "apples and pears", superseded_by="b")])
    assert index.scores(query, MemoryFilter()) == {}
    assert len(index) == 2 and "c" in index


def test_weighted_query_parts_average_their_scores():
    index = index_of(record("a", "apples"), record("b", "bananas"))
    both = index.scores([(tokenize("apples"), 1.0), (tokenize("bananas"), 3.0)], MemoryFilter())
    assert both["b"] == pytest.approx(3 * both["a"])
    assert index.scores([([], 1.0)], MemoryFilter()) == {}
    assert KeywordIndex().scores([(["x"], 1.0)], MemoryFilter()) == {}
