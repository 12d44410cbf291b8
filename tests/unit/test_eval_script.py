"""scripts/eval_hit_rate.py: loaders (on small files in each benchmark's format), metrics, output, errors."""

import importlib.util
import json
import math
import sys

import pytest

from tests.conftest import REPO, FakeEmbedder
from vecmem import MemoryRecord

spec = importlib.util.spec_from_file_location("eval_hit_rate", REPO / "scripts" / "eval_hit_rate.py")
evaluation = importlib.util.module_from_spec(spec)
sys.modules["eval_hit_rate"] = evaluation  # dataclasses look their module up while the class is built
spec.loader.exec_module(evaluation)


@pytest.fixture
def locomo_file(tmp_path):
    conversation = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann", "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy called Rex."},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Lovely! What breed?"},
                {"speaker": "Ann", "dia_id": "D1:3", "text": "A beagle.", "blip_caption": "a photo of a beagle"},
            ],
            "session_2_date_time": "10:00 am on 20 May, 2023",
            "session_2": [{"speaker": "Bo", "dia_id": "D2:1", "text": "I started pottery classes."}],
            "session_3_date_time": "9:00 am on 1 June, 2023",  # a date without a session
        },
        "qa": [
            {"question": "What is Ann's puppy called?", "answer": "Rex", "evidence": ["D1:01"], "category": 4},
            {"question": "What breed?", "answer": "beagle", "evidence": ["D1:3; D1:2", "D:11:26", "D9:9"], "category": 1},
            {"question": "Unanswerable?", "adversarial_answer": "x", "evidence": [], "category": 5},
        ],
    }
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps([conversation]), encoding="utf-8")
    return path


def test_locomo_follows_the_protocol(locomo_file):
    dataset = evaluation.load_locomo(locomo_file, before=2, after=1)
    by_id = {r.id: r for r in dataset.records}
    assert by_id["D1:1"].content == 'Ann said, "I adopted a puppy called Rex."'
    assert by_id["D1:3"].content == 'Ann said, "A beagle." and shared a photo of a beagle'
    assert by_id["D1:2"].context == "I adopted a puppy called Rex. A beagle."
    assert by_id["D2:1"].context == "" and by_id["D2:1"].created_at.day == 20
    assert {r.user_id for r in dataset.records} == {"conv-x"}
    assert [q.relevant for q in dataset.queries] == [["D1:1"], ["D1:3", "D1:2"], []]
    assert [q.category for q in dataset.queries] == ["single-hop", "multi-hop", "adversarial"]
    assert dataset.now["conv-x"].day == 20
    bare = evaluation.load_locomo(locomo_file.parent, before=0, after=0)
    assert all(r.context == "" for r in bare.records)


def test_madial_follows_the_protocol(tmp_path):
    folder = tmp_path / "zh"
    folder.mkdir()
    memories = [{"1": {"time": "2023-12-25", "scene": "活动类", "emotion": "开心", "event": "Bart在圣诞节晚会上跳舞。",
                       "user-id": 1, "id": "1"}},
                {"7": {"time": "2023-05-15", "scene": "喜好类", "emotion": "开心", "event": "Bart吃了芒果冰淇淋。",
                       "user-id": 1, "id": "7"}}]
    (folder / "X-zh-memory.json").write_text("\n".join(json.dumps(m, ensure_ascii=False) for m in memories))
    dialogue = {"dialogue": ["<BOD>\n", "<Bart>:\"我要表演魔术！\"\n", "<Assistant>:\"太棒了\"\n", "<Bart>:\"好紧张\"\n"],
                "test-turn": [2], "relevant-id": [1], "user-id": 1, "id": 0}
    (folder / "X-zh-dialogue.json").write_text(json.dumps(dialogue, ensure_ascii=False))
    dataset = evaluation.load_madial(folder, None)
    assert dataset.records[0].content == str({"scene": "活动类", "emotion": "开心", "event": "Bart在圣诞节晚会上跳舞。"})
    (query,) = dataset.queries
    assert query.text == '<Bart>: "我要表演魔术！"' and query.relevant == ["1"]  # one turn, the <BOD> marker left out
    with pytest.raises(evaluation.DataError, match="--lang"):
        evaluation.load_madial(tmp_path, None)
    assert evaluation.load_madial(tmp_path, "zh").queries[0].relevant == ["1"]


def test_metrics_by_hand():
    query = evaluation.Query(id="q", text="t", user_id="u", relevant=["a", "b"], forbidden=["z"])
    scores = evaluation.score_query(["x", "a", "z", "b"], query, [1, 3])
    assert scores["recall@1"] == 0 and scores["recall@3"] == 0.5
    assert scores["hit@1"] == 0 and scores["hit@3"] == 1 and scores["mrr"] == 0.5
    assert scores["leak@1"] == 0 and scores["leak@3"] == 1
    assert scores["ndcg@3"] == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    empty = evaluation.Query(id="e", text="t", user_id="u", relevant=[])
    assert evaluation.score_query(["x"], empty, [5]) == {"recall@5": 1.0, "hit@5": 1.0, "ndcg@5": 1.0,
                                                         "leak@5": 0.0, "mrr": 1.0}


def test_native_set_json_output(capsys):
    code = evaluation.main(["--format", "vecmem", "--data", str(REPO / "data" / "eval" / "native_en.json"),
                            "--json", "--k", "1", "5"], embedder=FakeEmbedder())
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    for key in ("recall@5", "hit@5", "mrr", "ndcg@5", "leak@5", "n_queries", "per_category"):
        assert key in result
    assert result["n_queries"] == 25 and result["leak@5"] == 0 and result["leak@1"] == 0
    assert "supersession" in result["per_category"] and result["mode"] == "hybrid"


def test_several_modes_table_and_plot(tmp_path, capsys):
    target = tmp_path / "curves.png"
    code = evaluation.main(["--format", "vecmem", "--data", str(REPO / "data" / "eval" / "native_zh.json"),
                            "--mode", "dense", "keyword", "hybrid", "--weights", "1", "0", "0", "--plot", str(target),
                            "--quiet"], embedder=FakeEmbedder())
    out = capsys.readouterr().out
    assert code == 0 and "| hybrid | all | 25 |" in out and "| keyword | sessions |" in out
    assert "weights 1/0/0" in out and target.stat().st_size > 1000


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--format", "locomo", "--data", "/no/such/file.json"], "cannot read LoCoMo data"),
        (["--format", "vecmem", "--data", "/no/such.json"], "cannot read native test set"),
        (["--format", "vecmem", "--data", "x", "--k", "0"], "at least 1"),
    ],
)
def test_errors_are_one_line(argv, fragment, capsys):
    assert evaluation.main(argv, embedder=FakeEmbedder()) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and fragment in err


def test_argument_mistakes_are_one_line(capsys):
    with pytest.raises(SystemExit) as exit_info:
        evaluation.main(["--format", "nonsense", "--data", "x"])
    assert exit_info.value.code == 2 and capsys.readouterr().err.count("\n") == 1


def test_a_native_set_naming_unknown_memories_is_refused(tmp_path, capsys):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"now": "2026-01-01T00:00:00Z", "memories": [{"id": "a", "content": "x"}],
                                "queries": [{"id": "q", "query": "x", "relevant": ["nope"]}]}))
    assert evaluation.main(["--format", "vecmem", "--data", str(path)], embedder=FakeEmbedder()) == 2
    assert "relevant memory 'nope'" in capsys.readouterr().err


def test_through_the_agent_on_two_conversations(tmp_path, capsys):
    """Each conversation fed turn by turn to the offline agent as its own user; the questions scored through the
    turns each memory came from, beside the per-turn protocol, with the tokens each stores."""
    conversations = [
        {"sample_id": "conv-x", "conversation": {
            "speaker_a": "Ann", "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "Hey Bo! How have you been?"},
                          {"speaker": "Bo", "dia_id": "D1:2", "text": "I adopted a beagle puppy called Rex."},
                          {"speaker": "Ann", "dia_id": "D1:3", "text": "Lovely! What does he eat?"}],
            "session_2_date_time": "10:00 am on 20 May, 2023",
            "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "I started pottery classes downtown."},
                          {"speaker": "Bo", "dia_id": "D2:2", "text": "Thanks for telling me!"}]},
         "qa": [{"question": "What is the puppy called?", "answer": "Rex", "evidence": ["D1:2"], "category": 4},
                {"question": "Which classes did Ann start?", "evidence": ["D2:1"], "category": 4}]},
        {"sample_id": "conv-y", "conversation": {
            "speaker_a": "Cy", "speaker_b": "Di",
            "session_1_date_time": "9:00 am on 1 June, 2023",
            "session_1": [{"speaker": "Cy", "dia_id": "D1:1", "text": "I live in Lisbon near the river."},
                          {"speaker": "Di", "dia_id": "D1:2", "text": "Nice, what do you do there?"},
                          {"speaker": "Cy", "dia_id": "D1:3", "text": "I work as a nurse at the city hospital."}]},
         "qa": [{"question": "Where does Cy work?", "evidence": ["D1:3"], "category": 4}]},
    ]
    path = tmp_path / "locomo10.json"
    path.write_text(json.dumps(conversations), encoding="utf-8")
    code = evaluation.main(["--format", "locomo", "--data", str(path), "--through-agent", "--json", "--k", "1", "5"],
                           embedder=FakeEmbedder())
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    per_turn, through = result["per_turn"]["hybrid"], result["through_agent"]["hybrid"]
    assert per_turn["memories"] == 8 and per_turn["recall@5"] == 1.0
    # fed: the 8 turns; kept: the four statements (the greeting, the questions and the thanks are not memories),
    # each conversation's for its own user
    assert through["messages"] == 8 and through["memories"] == 4
    assert through["per_user"] == {"conv-x": 2, "conv-y": 2}
    assert through["recall@1"] == 1.0 and through["recall@5"] == 1.0  # each answer found through its turn id
    assert 0 < through["stored_tokens"] < through["transcript_tokens"] < per_turn["stored_tokens"]
    assert through["stored_share"] == round(through["stored_tokens"] / through["transcript_tokens"], 4)
    # within the prompt's budget (512 and 2,048 tokens by default): everything fits; coverage over the one answer
    for protocol in (per_turn, through):
        assert set(protocol["budget"]) == {"512", "2048"}
        assert protocol["budget"]["2048"]["recall"] == 1.0 and protocol["budget"]["2048"]["answered"] == 1
        assert protocol["budget"]["2048"]["coverage"] == 1.0  # "Rex" is in the text that fits
    # --conversations 1: the first conversation alone, its questions and its turns
    assert evaluation.main(["--format", "locomo", "--data", str(path), "--through-agent", "--conversations", "1",
                            "--k", "1"], embedder=FakeEmbedder()) == 0
    table = capsys.readouterr().out
    assert "5 messages fed" in table and "over all 2 questions" in table and "over the 1 with a reference" in table
    assert "LoCoMo within the prompt's budget" in table and "| through the agent | hybrid | 2,048 |" in table


def test_turn_recall_counts_every_turn_a_memory_came_from():
    agent = evaluation.eval_agent
    provenances = [("D1:1", "D1:2"), ("D2:5",), ()]
    assert agent.turn_recall(provenances, ["D1:2", "D2:5"], 1) == 0.5
    assert agent.turn_recall(provenances, ["D1:2", "D2:5"], 2) == 1.0
    assert agent.turn_recall(provenances, [], 1) == 1.0  # no evidence counts 1, as in the per-turn protocol
    assert agent.first_person("Bart danced with his sister at Bart's party.") == "I danced with my sister at my party."
    assert agent.first_person("Bart在他的生日派对上跳舞。") == "我在我的生日派对上跳舞。"


def test_through_the_agent_needs_conversations(capsys):
    assert evaluation.main(["--format", "vecmem", "--data", str(REPO / "data" / "eval" / "native_en.json"),
                            "--through-agent"], embedder=FakeEmbedder()) == 2
    assert "--through-agent needs conversations" in capsys.readouterr().err


def test_a_floor_counts_only_what_a_prompt_would_get(capsys):
    native = str(REPO / "data" / "eval" / "native_en.json")
    recall = {}
    for floor in ("0", "1"):
        assert evaluation.main(["--format", "vecmem", "--data", native, "--json", "--k", "5", "--floor", floor],
                               embedder=FakeEmbedder()) == 0
        recall[floor] = json.loads(capsys.readouterr().out)["recall@5"]
    assert recall["0"] > recall["1"]  # at 1, only memories as relevant as can be count
    assert evaluation.main(["--format", "vecmem", "--data", native, "--floor", "2"], embedder=FakeEmbedder()) == 2
    assert "--floor must be between 0 and 1" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- several users

_MADIAL_EVENTS = {  # id: (user, zh event, en event); user 2's memory 3 says word for word what user 1 asks
    "1": (1, "Bart在圣诞节晚会上表演魔术。", "Bart performed a magic trick at the Christmas party."),
    "2": (1, "Bart吃了芒果冰淇淋。", "Bart ate a mango ice cream."),
    "3": (2, "我要表演魔术！好紧张", "I am going to perform a magic trick! So nervous"),
    "4": (2, "Lisa去海边游泳。", "Lisa went swimming at the beach."),
}


def _madial_copy(root, users=(1, 2), *, zh_user_ids=True, en_user_ids=False, languages=("zh", "en")):
    """A MADial-Bench copy of ``users``: zh memory lines carry user-id, en ones (as upstream) do not."""
    lines = {"zh": ["<BOD>\n", "<Bart>:\"我要表演魔术！\"\n", "<Assistant>:\"太棒了\"\n", "<Bart>:\"好紧张\"\n"],
             "en": ["<BOD>\n", "<Bart>: \"I am going to perform a magic trick!\"\n", "<Assistant>: \"Great\"\n",
                    "<Bart>: \"So nervous\"\n"]}
    for lang in languages:
        folder = root / lang
        folder.mkdir(parents=True)
        memories = []
        for key, (user, zh, en) in _MADIAL_EVENTS.items():
            if user in users:
                memory = {"time": f"2023-0{key}-01", "scene": "Activity", "emotion": "Happy",
                          "event": zh if lang == "zh" else en}
                if zh_user_ids if lang == "zh" else en_user_ids:
                    memory |= {"user-id": user, "id": key}
                memories.append({key: memory})
        (folder / f"X-{lang}-memory.json").write_text("\n".join(json.dumps(m, ensure_ascii=False) for m in memories))
        dialogues = [{"dialogue": lines[lang], "test-turn": [2], "relevant-id": [1], "user-id": 1, "id": 0}]
        if 2 in users:
            dialogues.append({"dialogue": ["<BOD>\n", "<Lisa>: \"swimming at the beach\"\n", "<Assistant>: \"!\"\n"],
                              "test-turn": [2], "relevant-id": [4], "user-id": 2, "id": 1})
        (folder / f"X-{lang}-dialogue.json").write_text("\n".join(json.dumps(d, ensure_ascii=False) for d in dialogues))
    return root


@pytest.fixture
def rankings(monkeypatch):
    """Every ranking the harness scores, by mode: (query, ranked ids) per query."""
    seen = {}
    summarize = evaluation.summarize

    def spy(mode, dataset, ranked, ks, seconds):
        seen[mode] = list(zip(dataset.queries, ranked, strict=True))
        return summarize(mode, dataset, ranked, ks, seconds)

    monkeypatch.setattr(evaluation, "summarize", spy)
    return seen


def test_madial_keeps_each_users_memories_apart(tmp_path, rankings, capsys):
    root = _madial_copy(tmp_path / "both")
    for lang in ("zh", "en"):  # en: no user-id in the memory file, each memory's user read from ../zh by its id
        dataset = evaluation.load_madial(root, lang)
        assert {r.id: r.user_id for r in dataset.records} == {
            "1": "madial-user-1", "2": "madial-user-1", "3": "madial-user-2", "4": "madial-user-2"}
        assert [q.user_id for q in dataset.queries] == ["madial-user-1", "madial-user-2"]
        code = evaluation.main(["--format", "madial", "--data", str(root), "--lang", lang, "--json", "--baselines",
                                "--mode", "dense", "keyword", "hybrid", "--k", "1", "10", "--quiet"],
                               embedder=FakeEmbedder())
        assert code == 0
        both = json.loads(capsys.readouterr().out)
        assert set(both["modes"]) == {"dense", "keyword", "hybrid", "plain-bm25", "plain-cosine"}
        assert set(rankings) == set(both["modes"])
        for mode, ranked in rankings.items():
            for query, ids in ranked:
                own = {r.id for r in dataset.records if r.user_id == query.user_id}
                assert ids and set(ids) <= own, (lang, mode, query.id, ids)  # memory 3 never in user 1's
        single = _madial_copy(tmp_path / f"one-{lang}", users=(1,), languages=(lang,))
        assert evaluation.main(["--format", "madial", "--data", str(single / lang), "--json", "--baselines",
                                "--mode", "dense", "keyword", "hybrid", "--k", "1", "10", "--quiet"],
                               embedder=FakeEmbedder()) == 0
        alone = json.loads(capsys.readouterr().out)
        first = [q.id for q in dataset.queries].index("0")
        for mode, ranked in rankings.items():  # user 1's query ranks user 1's memories as with user 1 alone
            assert ranked[0][1] == rankings[mode][first][1]
            assert alone["modes"][mode]["recall@1"] == rankings[mode][first][1][:1].count("1")


def test_madial_refuses_to_guess_whose_a_memory_is(tmp_path, capsys):
    root = _madial_copy(tmp_path, languages=("en",))  # no zh file to read the users from
    with pytest.raises(evaluation.DataError, match="memory 1 has no user-id"):
        evaluation.load_madial(root, "en")
    assert evaluation.main(["--format", "madial", "--data", str(root), "--lang", "en"], embedder=FakeEmbedder()) == 2
    assert capsys.readouterr().err.count("\n") == 1
    # one user asked for: the memories without user-id are that user's
    one = _madial_copy(tmp_path / "one", users=(1,), languages=("en",))
    assert {r.user_id for r in evaluation.load_madial(one / "en", None).records} == {"madial-user-1"}


def test_native_set_of_two_users(tmp_path, rankings, capsys):
    path = tmp_path / "two.json"
    path.write_text(json.dumps({"now": "2026-01-01T00:00:00Z", "memories": [
        {"id": "a1", "content": "I keep bees on the roof", "user_id": "ann"},
        {"id": "a2", "content": "My car is a blue estate", "user_id": "ann"},
        {"id": "b1", "content": "where do I keep bees", "user_id": "bob"},  # Ann's question, word for word
    ], "queries": [
        {"id": "q1", "query": "where do I keep bees", "user_id": "ann", "relevant": ["a1"], "forbidden": ["b1"]},
        {"id": "q2", "query": "my car", "user_id": "bob", "relevant": [], "forbidden": ["a2"]},
    ]}))
    assert evaluation.main(["--format", "vecmem", "--data", str(path), "--json", "--baselines", "--mode", "dense",
                            "keyword", "hybrid", "--k", "1", "5", "--quiet"], embedder=FakeEmbedder()) == 0
    result = json.loads(capsys.readouterr().out)
    for mode, figures in result["modes"].items():
        assert figures["leak@5"] == 0 and figures["recall@5"] == 1.0, mode
        assert {i for _, ids in rankings[mode] for i in ids} <= {"a1", "a2", "b1"}
        assert all(i.startswith({"ann": "a", "bob": "b"}[q.user_id]) for q, ids in rankings[mode] for i in ids)
    assert set(result["fusion_check"]) == {"recall@5"}
    low, high = result["fusion_check_95"]["recall@5"]  # every query found by every mode: no gap, by chance or not
    assert low == high == result["fusion_check"]["recall@5"] == 0


# ---------------------------------------------------------------------------------------------- baselines


def test_plain_bm25_returns_only_matches_and_tokenizes_chinese_like_vecmem():
    baselines = evaluation.eval_baselines
    records = [MemoryRecord(id=i, content=c, user_id="u", source="manual")
               for i, c in [("m1", "用户喜欢杭州西湖"), ("m2", "The cat sleeps"), ("m3", "我在西湖区工作")]]
    query = evaluation.Query(id="q", text="西湖", user_id="u", relevant=["m1"])
    (ranked,) = baselines.rank_bm25(records, [query], 10)
    assert set(ranked) == {"m1", "m3"}  # the cat shares no token: a BM25 engine does not return it
    other = evaluation.Query(id="o", text="西湖", user_id="nobody", relevant=[])
    assert baselines.rank_bm25(records, [other], 10) == [[]]


def test_plain_cosine_is_exact_and_reuses_the_vectors_of_the_index():
    baselines = evaluation.eval_baselines
    fake = FakeEmbedder()
    recording = baselines.RecordingEmbedder(fake)
    texts = ["bees on the roof", "a blue car", "bees and honey on the roof"]
    recording.embed_documents(texts)
    calls = fake.document_calls
    records = [MemoryRecord(id=f"m{n}", content=t, user_id="u", source="manual")
               for n, t in enumerate(texts)]
    query = evaluation.Query(id="q", text="bees on the roof", user_id="u", relevant=["m0"])
    (ranked,) = baselines.rank_cosine(records, [query], 2, recording)
    assert ranked[0] == "m0" and len(ranked) == 2 and fake.document_calls == calls


def test_the_table_shows_baselines_and_the_fusion_check(capsys):
    code = evaluation.main(["--format", "vecmem", "--data", str(REPO / "data" / "eval" / "native_en.json"),
                            "--mode", "dense", "keyword", "hybrid", "--baselines", "--quiet"], embedder=FakeEmbedder())
    out = capsys.readouterr().out
    assert code == 0 and "| plain BM25 | all | 25 |" in out and "| plain cosine | supersession |" in out
    assert "Fusion check (hybrid minus the better of dense and keyword; in brackets its 95% interval, resampling " \
        "the queries): R@5 " in out and "R@10 " in out


def test_two_runs_on_the_same_queries_are_compared_query_by_query(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("compare_runs", REPO / "scripts" / "compare_runs.py")
    compare_runs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(compare_runs)
    native = str(REPO / "data" / "eval" / "native_en.json")
    argv = ["--format", "vecmem", "--data", native, "--mode", "dense", "hybrid", "--quiet", "--weights", "1", "0", "0"]
    assert evaluation.main([*argv, "--per-query", str(tmp_path / "a.json")], embedder=FakeEmbedder()) == 0
    assert evaluation.main([*argv, "--weights", "0", "1", "0", "--per-query", str(tmp_path / "b.json")],
                           embedder=FakeEmbedder()) == 0
    stored = json.loads((tmp_path / "a.json").read_text())
    assert set(stored["runs"]) == {"dense 1/0/0", "hybrid 1/0/0"} and len(stored["queries"]) == 25
    capsys.readouterr()
    assert compare_runs.main([str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    out = capsys.readouterr().out
    assert "| dense 1/0/0 | recall@5 |" in out and "| hybrid 1/0/0 | recall@10 |" in out
    assert "0/1/0" not in out  # only the runs both files hold
    assert compare_runs.main([str(tmp_path / "a.json"), "--runs", "dense 1/0/0", "hybrid 1/0/0", "--measure",
                              "recall@1"]) == 0
    assert "| hybrid 1/0/0 minus dense 1/0/0 | recall@1 |" in capsys.readouterr().out
    # the same run against itself: no gap, and none that chance could make
    row = compare_runs.compare(stored["runs"]["dense 1/0/0"], stored["runs"]["dense 1/0/0"], "recall@5")
    assert row["gap"] == row["low"] == row["high"] == row["moved"] == 0
    (tmp_path / "c.json").write_text(json.dumps({**stored, "queries": stored["queries"][:-1]}))
    assert compare_runs.main([str(tmp_path / "a.json"), str(tmp_path / "c.json")]) == 2
    assert compare_runs.main([str(tmp_path / "a.json"), "--runs", "dense 1/0/0", "nothing"]) == 2
    (tmp_path / "d.json").write_text("not json")
    assert compare_runs.main([str(tmp_path / "d.json")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(line.startswith("compare_runs: error: ") for line in err)


def test_a_gap_of_exactly_a_point_is_not_more_than_a_point():
    assert evaluation.fusion_holds([0.82 - 0.83, 0.0])  # -0.01000000000000001 in floating point
    assert not evaluation.fusion_holds([0.81 - 0.83])


def test_a_gap_between_two_rankings_comes_with_the_interval_chance_alone_could_make():
    assert evaluation.paired_interval([0.0] * 76) == (0.0, 0.0)
    assert evaluation.paired_interval([0.25] * 40) == pytest.approx((0.25, 0.25))
    one_query_apart = [0.0] * 75 + [-1.0]  # one query of 76 lost its memory: 1.3 points, within chance
    low, high = evaluation.paired_interval(one_query_apart)
    assert low < -1 / 76 < high and high == pytest.approx(0.0)
    many_apart = [-1.0] * 20 + [0.0] * 1966  # 20 of LoCoMo's 1,986 questions: a point, and not chance
    low, high = evaluation.paired_interval(many_apart)
    assert low < -0.01 < high < 0


def test_first_person_of_a_user_called_she():
    agent = evaluation.eval_agent
    assert agent.pronoun_of(["Lisa went to her class.", "She was happy."]) == "she"
    assert agent.first_person("Lisa gave her sister a book she liked.", "Lisa", "she") == \
        "I gave my sister a book I liked."
    assert agent.first_person("Her friend called her.", "Lisa", "she") == "My friend called me."
    assert agent.first_person("Lisa在她的生日派对上跳舞。", "Lisa", "she") == "我在我的生日派对上跳舞。"


def test_several_weight_settings_share_one_index_in_one_table(capsys):
    native = str(REPO / "data" / "eval" / "native_en.json")
    argv = ["--format", "vecmem", "--data", native, "--mode", "dense", "keyword", "hybrid", "--baselines", "--quiet",
            "--weights", "1", "0", "0", "--weights", "0.6", "0.2", "0.2"]
    assert evaluation.main(argv, embedder=FakeEmbedder()) == 0
    out = capsys.readouterr().out
    assert "weights 1/0/0 and 0.6/0.2/0.2" in out and "| hybrid | 1/0/0 | all | 25 |" in out
    assert "| plain BM25 | - | all | 25 |" in out and "Fusion check (0.6/0.2/0.2)" in out
    assert evaluation.main([*argv, "--json"], embedder=FakeEmbedder()) == 0
    result = json.loads(capsys.readouterr().out)
    assert {"dense 1/0/0", "hybrid 0.6/0.2/0.2", "plain-bm25", "plain-cosine"} <= set(result["modes"])
    assert set(result["fusion_check"]) == set(result["fusion_check_95"]) == {"1/0/0", "0.6/0.2/0.2"}
    assert result["modes"]["dense 1/0/0"]["weights"] == "1/0/0"


def test_through_the_agent_tells_each_madial_user_their_own_memories(tmp_path):
    root = _madial_copy(tmp_path)
    memory_file, dialogue_file = evaluation.madial_files(root, "en")
    names = evaluation.madial_speakers(dialogue_file)
    assert names == {"madial-user-1": "Bart", "madial-user-2": "Lisa"}
    conversations = evaluation.eval_agent.madial_feeds(evaluation.madial_memories(memory_file, dialogue_file), names)
    told = {c.user: [m["content"] for feed in c.feeds for m in feed.messages] for c in conversations}
    assert told == {"madial-user-1": ["I performed a magic trick at the Christmas party.", "I ate a mango ice cream."],
                    "madial-user-2": ["I am going to perform a magic trick! So nervous", "I went swimming at the beach."]}
