"""Offline, updates replace what they update: by topic slot as well as type, within scope, newer wins, the whole
slot considered, and never an unrelated memory that merely shares a word (issue 16, item 3). The slot model is
vecmem/agent/writing/topics.py; the decisions are conflict.py's, driven here through MemoryAgent on the in-memory store
with the fake embedder."""

import pytest

from vecmem.agent.writing import topics

# A scripted conversation, Chinese and English mixed as a real user would: (message, what the gate must do).
CONVERSATION = [
    ("你好", "drop"),
    ("我叫王芳，在字节跳动做前端开发", "keep"),
    ("我住在杭州", "keep"),
    ("我喜欢用 TypeScript 写前端", "keep"),
    ("能不能推荐一个好用的状态管理库？", "drop"),
    ("我不用 Windows，我用 macOS 和 zsh", "keep"),
    ("帮我写一个防抖函数", "drop"),
    ("以后都用 JavaScript 吧", "keep"),
    ("谢谢", "drop"),
    ("From now on, use pnpm", "keep"),
    ("what package manager should I use?", "drop"),
    ("switched to bun, no longer pnpm", "keep"),
    ("嗯嗯", "drop"),
    ("I moved to Shanghai", "keep"),
    ("thanks", "drop"),
    ("我们团队用 Go 写后端服务", "keep"),
    ("ok", "drop"),
]


def live(agent):
    return {r.content: r for r in agent.bank.list_memories() if r.source == "extracted" and "summary" not in r.tags}


def superseded(agent):
    return {r.content: r for r in agent.bank.list_memories(include_superseded=True) if r.superseded}


class TestAScriptedConversation:
    @pytest.fixture
    def agent(self, make_agent):
        agent = make_agent(cold_start=False, summary_every=100)
        self.results = [(message, expected, agent.turn(message)) for message, expected in CONVERSATION]
        return agent

    def test_the_gate_keeps_statements_and_drops_greetings_questions_and_requests(self, agent):
        for message, expected, result in self.results:
            (write,) = result.writes
            assert write.decision.keep is (expected == "keep"), (message, write.decision.reason)

    def test_what_is_live_is_the_current_picture_in_clean_statements(self, agent):
        assert sorted(live(agent)) == sorted([
            "用户叫王芳", "用户在字节跳动做前端开发", "用户不用 Windows，用户用 macOS 和 zsh", "用户要求以后都用 JavaScript",
            "The user switched to bun, no longer pnpm.", "The user moved to Shanghai.", "用户的团队用 Go 写后端服务",
        ])

    def test_updates_replaced_what_they_update_across_types(self, agent):
        old = superseded(agent)
        current = live(agent)
        assert old["用户喜欢用 TypeScript 写前端"].superseded_by == current["用户要求以后都用 JavaScript"].id
        assert old["用户喜欢用 TypeScript 写前端"].type == "preference"
        assert current["用户要求以后都用 JavaScript"].type == "instruction"
        assert old["The user wants the assistant to use pnpm from now on."].superseded_by == current[
            "The user switched to bun, no longer pnpm."].id
        assert old["用户住在杭州"].superseded_by == current["The user moved to Shanghai."].id
        assert set(old) == {"用户喜欢用 TypeScript 写前端", "The user wants the assistant to use pnpm from now on.", "用户住在杭州"}

    def test_each_update_says_why(self, agent):
        reasons = {message: w.reason for message, _e, result in self.results for write in result.writes
                   for w in write.written if w.action == "UPDATE"}
        assert "programming language" in reasons["以后都用 JavaScript 吧"]
        assert "package manager" in reasons["switched to bun, no longer pnpm"]
        assert "residence" in reasons["I moved to Shanghai"]

    def test_nothing_was_stored_from_what_the_gate_dropped(self, agent):
        stored = " ".join(live(agent)) + " ".join(superseded(agent))
        for word in ("状态管理", "防抖", "package manager should", "你好", "谢谢", "thanks"):
            assert word not in stored

    def test_the_team_memory_is_not_the_users_choice(self, agent):
        assert "用户的团队用 Go 写后端服务" in live(agent)
        assert "用户要求以后都用 JavaScript" in live(agent)  # the team's Go did not replace the user's own choice


class TestSlotsAndScope:
    def test_every_live_memory_of_the_slot_is_replaced(self, make_agent):
        agent = make_agent(cold_start=False)
        agent.turn("我喜欢用 TypeScript 写前端")
        agent.turn("我也用 JavaScript 写一些脚本")
        result = agent.turn("以后都用 Go 吧")
        (item,) = result.writes[0].written
        replaced = {r.content for r in [item.replaced, *item.also_replaced]}
        assert replaced == {"用户喜欢用 TypeScript 写前端", "用户也用 JavaScript 写一些脚本"}
        assert list(live(agent)) == ["用户要求以后都用 Go"]

    def test_a_negation_alone_replaces_only_what_it_negates(self, make_agent):
        agent = make_agent(cold_start=False)
        agent.turn("I use pnpm for the monorepo")
        agent.turn("I also use bun for scripts")
        agent.turn("I no longer use pnpm")
        assert sorted(live(agent)) == ["The user also uses bun for scripts.", "The user no longer uses pnpm."]

    def test_a_session_memory_never_hides_a_global_one(self, make_agent):
        agent = make_agent(cold_start=False)
        agent.turn("我喜欢用 TypeScript 写前端")
        (item,) = agent.turn("这次改用 JavaScript 写这个脚本").writes[0].written
        assert item.action == "ADD" and item.record.scope == "s1" and item.replaced is None
        assert not superseded(agent)

    def test_a_global_memory_replaces_a_global_one_and_one_of_this_session(self, make_agent):
        agent = make_agent(cold_start=False)
        agent.turn("这次改用 JavaScript 写这个脚本")
        agent.turn("我喜欢用 TypeScript 写前端")
        agent.turn("以后都用 Go 吧")
        assert list(live(agent)) == ["用户要求以后都用 Go"]

    def test_a_session_memory_replaces_one_of_its_own_session_only(self, make_agent, make_bank):
        agent = make_agent(cold_start=False, session="A")
        agent.turn("这次用 TypeScript 写这个脚本")
        agent.switch_session("B")
        agent.turn("这次用 Python 写这个脚本")
        agent.switch_session("A")
        agent.turn("这次改用 JavaScript 写这个脚本")
        scopes = {r.content: r.scope for r in agent.bank.list_memories()}
        assert scopes == {"用户这次用 Python 写这个脚本": "B", "用户这次改用 JavaScript 写这个脚本": "A"}

    def test_a_memory_that_says_more_than_the_update_restates_stays(self, make_agent):
        agent = make_agent(cold_start=False)
        agent.turn("我平时用 Neovim 写 Python")
        agent.turn("I've switched from VS Code to Cursor")  # editor only: the Python must not go with Neovim
        assert not superseded(agent) and len(live(agent)) == 2

    def test_a_single_valued_slot_takes_the_newer_value_without_a_cue(self, make_agent):
        agent = make_agent(cold_start=False)
        manual = agent.bank.add("The user lives in Hangzhou")
        agent.turn("I live in Shanghai, near the Bund")
        assert agent.bank.get(manual.id).superseded
        assert list(live(agent)) == ["The user lives in Shanghai, near the Bund."]

    def test_newer_wins_and_restating_the_older_restores_it(self, make_agent):
        agent = make_agent(cold_start=False)
        ts = agent.turn("我喜欢用 TypeScript 写前端").writes[0].written[0].record
        js = agent.turn("以后都用 JavaScript 吧").writes[0].written[0].record
        assert agent.bank.get(ts.id).superseded_by == js.id
        agent.turn("我喜欢用 TypeScript 写前端")
        assert not agent.bank.get(ts.id).superseded and agent.bank.get(js.id).superseded_by == ts.id

    @pytest.mark.parametrize(
        ("first", "second"),
        [
            ("我住在杭州", "我喜欢杭州的西湖"),  # shares 杭州, is not a residence
            ("I like Python for data work", "I like Rust for systems work"),  # a slot of several values, no cue
            ("我学过 Rust", "以后都用 Go 吧"),  # a skill is not a choice
            ("我们团队用 Go", "以后都用 JavaScript 吧"),  # the team's, not the user's
            ("我妈妈住在上海", "我住在杭州"),  # the mother's residence
            ("My favourite editor is Vim", "I prefer dark mode in every editor"),  # shares the word "editor"
            ("I work at Acme", "I work from home on Fridays"),
            ("我住在杭州", "以后都用 JavaScript 吧"),  # a change cue about another slot
        ],
    )
    def test_unrelated_memories_that_share_a_word_both_stay(self, make_agent, first, second):
        agent = make_agent(cold_start=False)
        agent.turn(first)
        agent.turn(second)
        assert not superseded(agent)
        assert len(live(agent)) == 2


@pytest.mark.parametrize(
    ("newer", "older", "slot"),
    [
        ("用户要求以后都用 JavaScript", "用户喜欢用 TypeScript 写前端", "programming language"),
        ("The user switched to bun, no longer pnpm.", "The user wants the assistant to use pnpm from now on.",
         "package manager"),
        ("The user moved to Shanghai.", "The user lives in Hangzhou.", "residence"),
        ("用户搬到上海了", "用户住在杭州", "residence"),
        ("The user works at Google.", "The user works at Alibaba Cloud.", "employer"),
        ("用户在字节跳动工作", "用户在阿里云工作", "employer"),  # 阿里云 is the employer here, not a cloud
        ("The user's name is Li Wei.", "用户叫王芳", "name"),
        ("用户要求以后用英文回答", "用户要求用中文回答", "reply language"),
        ("The user doesn't use Windows anymore.", "The user uses Windows at work.", "operating system"),
        ("The user switched from npm to pnpm.", "The user uses npm.", "package manager"),
        ("The user doesn't like Java.", "The user likes Java.", "programming language"),  # negated, no cue needed
        ("用户要求详细一点回答", "Answer concisely and lead with the conclusion. (回答简洁，先给结论)", "answer length"),
    ],
)
def test_the_slot_model_says_which_statement_revises_which(newer, older, slot):
    reason = topics.revises(newer, older)
    assert reason is not None and slot in reason


@pytest.mark.parametrize(
    ("newer", "older"),
    [
        ("用户喜欢用 TypeScript 写前端", "用户要求以后都用 JavaScript"),  # no change cue: the older choice stands too
        ("The user no longer uses pnpm.", "The user uses bun for scripts."),  # negates a value the older lacks
        ("用户的团队用 Go", "用户喜欢用 Rust"),  # another holder
        ("用户住在杭州西湖区", "用户住在杭州"),  # the same place, more precisely: not a contradiction
        ("用户喜欢杭州的西湖", "用户住在杭州"),
        ("The user learned Go last year.", "The user uses Python at work."),
        ("The user switched to Cursor.", "用户平时用 Neovim 写 Python"),  # the older one also holds the language
        ("The user always wants type hints in Python code.", "用户不喜欢 Python 了"),  # affirming needs a cue
    ],
)
def test_the_slot_model_leaves_what_does_not_revise(newer, older):
    assert topics.revises(newer, older) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("用户不用 Windows，用户用 macOS 和 zsh", {("operating system", "windows", True), ("operating system", "macos", False),
                                           ("shell", "zsh", False)}),
        ("The user prefers tabs over spaces.", {("indentation", "tabs", False), ("indentation", "spaces", True)}),
        ("The user speaks English and Chinese.", set()),  # a language spoken is not a reply language
        ("The user has too many tabs open.", set()),  # browser tabs are not indentation
        ("The user goes hiking on weekends.", set()),  # "go" the verb is not Go the language
        ("用户现在用Go写后端", {("programming language", "go", False)}),
        ("The user moved to Neovim.", {("editor", "neovim", False)}),  # a switch of editor, not a residence
        ("用户住院了", set()),
    ],
)
def test_facets(text, expected):
    assert {(f.slot, f.value, f.negated) for f in topics.facets(text)} == expected
