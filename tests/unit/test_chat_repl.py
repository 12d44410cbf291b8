"""The chat REPL driven by scripted stdin, offline (no model configured)."""

import io
import json
import logging
import sys

import pytest

from tests.conftest import ScriptedModel
from vecmem.interfaces.chat import main


def run_chat(bank, lines, *argv, model=None):
    out, err = io.StringIO(), io.StringIO()
    code = main(["--session", "s1", *argv], stdin=io.StringIO("\n".join(lines) + "\n"), stdout=out, stderr=err,
                bank=bank, model=model)
    return code, out.getvalue(), err.getvalue()


def test_offline_chat_says_so_once_and_still_remembers(bank):
    code, out, err = run_chat(bank, ["你好", "我喜欢用 TypeScript", "以后都用 JavaScript 吧", "帮我写一个 sleep 函数"])
    assert code == 0 and err == ""
    assert out.count("No model is configured") == 1
    assert out.count("[no model] would send") == 4
    assert "not kept (rules: pure filler" in out
    assert 'replaces' in out and "用户喜欢用 TypeScript" in out
    recalled_line = [line for line in out.splitlines() if line.startswith("  recalled (coding")][-1]
    assert "JavaScript" in recalled_line and "TypeScript" not in recalled_line


def test_commands(bank):
    lines = [
        "我是后端工程师，负责支付系统",
        "/memories 支付",
        "/task 重构支付回调",
        "/task step 拆出签名校验",
        "/task",
        "/stats",
        "/prompt",
        "/log",
        "/session other",
        "/task",
        "/session s1",
        "/task done",
        "/help",
        "/bogus",
        "/forget no-such-id",
        "/quit",
        "this line is never read",
    ]
    code, out, err = run_chat(bank, lines)
    assert code == 0
    assert "用户是后端工程师，负责支付系统" in out
    assert "Current task (in progress): 重构支付回调" in out and "- 拆出签名校验" in out
    assert "1 kept turns" in out and "memory hit rate n/a" in out
    assert "tokens: system" in out and "--- system" in out
    assert "kept as fact" in out and "lexicon" in out
    assert "now in session 'other'" in out and "no task in progress" in out
    assert "task done: 重构支付回调 (1 steps done)" in out
    assert "/memories [QUERY]" in out
    assert err.count("vecmem: error:") == 2 and "unknown command /bogus" in err and "no memory" in err
    assert "never read" not in out


def test_edit_history_restore_in_the_chat(bank):
    ts = bank.add("用户喜欢用 TypeScript", memory_type="preference")
    js = bank.add("用户以后都用 JavaScript", memory_type="preference")
    bank.supersede(ts.id, js.id)
    code, out, err = run_chat(bank, [f"/history {js.id}", f"/restore {ts.id}", f"/edit {ts.id} 用户喜欢用 Go"])
    assert code == 0 and err == ""
    assert f"{ts.id}  (superseded by {js.id})" in out and f"{js.id}  (live)" in out
    assert f"restored {ts.id}" in out and bank.get(ts.id).content == "用户喜欢用 Go"
    assert bank.get(js.id).superseded_by == ts.id


def test_model_failure_is_one_line_and_the_chat_goes_on(bank):
    from vecmem import LLMError

    def responder(kind, messages):
        if kind == "answer" and "first" in messages[-1]["content"]:
            raise LLMError("the model at http://x did not answer within 1 s")
        if kind == "extract":
            return '{"keep": false, "reason": "chit-chat", "memories": []}'
        return "second answer"

    code, out, err = run_chat(bank, ["first message please", "second message please"], model=ScriptedModel(responder))
    assert code == 0
    assert err.count("\n") == 1 and "did not answer within 1 s" in err and "kept" in err
    assert "assistant> second answer" in out and "Model: scripted" in out


def test_bad_session_name_is_one_line(bank):
    out, err = io.StringIO(), io.StringIO()
    assert main(["--session", "global"], stdin=io.StringIO(""), stdout=out, stderr=err, bank=bank, model=None) == 2
    assert err.getvalue().count("\n") == 1 and "reserved" in err.getvalue()


@pytest.mark.parametrize("line", ["/session global", "/task step nothing", "/edit", "/restore nope"])
def test_command_mistakes_are_one_line(bank, line):
    code, out, err = run_chat(bank, [line])
    assert code == 0 and err.count("\n") == 1 and err.startswith("vecmem: error:")


def test_review_in_the_chat(bank):
    pending = bank.add("The user maybe collects stamps", source="extracted", confidence=0.2, status="pending")
    other = bank.add("The user maybe sails", source="extracted", confidence=0.2, status="pending")
    _, out, err = run_chat(bank, ["/review", f"/review approve {pending.id} The user collects stamps",
                                  f"/review reject {other.id}", "/review", "/review frobnicate"])
    assert "maybe collects stamps" in out and "approved" in out and "rejected" in out
    assert "the review queue is empty" in out and err.count("\n") == 1 and "/review approve ID" in err
    assert bank.get(pending.id).status == "live" and bank.get(pending.id).content == "The user collects stamps"


def test_stats_show_the_model_calls_and_tokens_of_the_session_and_the_last_turn(bank):
    def responder(kind, messages):
        if kind == "extract":
            return '{"keep": false, "reason": "small talk", "memories": []}'
        return "A streamed answer in a few words"

    code, out, err = run_chat(bank, ["what is the weather like on Mars today?", "/stats"], model=ScriptedModel(responder))
    assert code == 0 and err == ""
    assert "assistant> A streamed answer in a few words" in out
    (line,) = [line for line in out.splitlines() if line.startswith("model: ")]
    assert line.startswith("model: 2 calls in 1 turns") and "last turn: 2 calls" in line


def test_stats_say_so_when_no_model_was_called(bank):
    code, out, _ = run_chat(bank, ["/stats"])
    assert code == 0 and "model: no calls in this session (no model configured)" in out


# ---------------------------------------------------------------------------------------------- a failed write step

def _extraction_failing(times):
    """A model whose extraction of a message in ``times`` is cut off that many times; it remembers the rest."""

    def responder(kind, messages):
        if kind != "extract":
            return "Noted."
        said = messages[-1]["content"].split("Exchange:\nUser: ")[1].split("\nAssistant:")[0]
        if times.get(said):
            times[said] -= 1
            return '{"memories": [{"content": "The user is a back'  # cut off mid-way
        return json.dumps({"memories": [{"content": "The user said: " + said, "type": "fact", "importance": 0.5,
                                         "tags": [], "scope": "global", "confidence": 0.9, "action": "ADD",
                                         "target": None}]})

    return ScriptedModel(responder)


def _learnt(bank):
    return {record.content for record in bank.list_memories() if record.source != "template"}


def run_chat_on_a_terminal(bank, lines, model, monkeypatch):
    """The chat as a terminal shows it: answers, notes, errors and anything logged on one screen, in order, and no
    logging configured by the application (so Python's last-resort handler prints what nothing else handles)."""
    screen = io.StringIO()
    monkeypatch.setattr(sys, "stderr", screen)  # where the last-resort handler writes
    monkeypatch.setattr(logging.root, "handlers", [])  # pytest's capture would handle the records otherwise
    code = main(["--session", "s1"], stdin=io.StringIO("\n".join(lines) + "\n"), stdout=screen, stderr=screen,
                bank=bank, model=model)
    return code, screen.getvalue().splitlines()


def test_a_failed_write_step_is_one_line_and_the_retried_message_says_it_was_learnt_late(bank, monkeypatch):
    model = _extraction_failing({"I work on the payments team": 1})
    code, screen = run_chat_on_a_terminal(bank, ["I work on the payments team", "I live in Hangzhou"], model,
                                          monkeypatch)
    assert code == 0
    assert [line for line in screen if line.startswith("assistant> ")] == ["assistant> Noted."] * 2
    (failed,) = [line for line in screen if "not valid JSON" in line]  # once, on its own line
    assert failed.startswith("vecmem: error: ") and failed.endswith("retried next turn")
    assert not any(line.startswith("  note:") for line in screen)
    memory_lines = [line for line in screen if line.startswith("  memory")]
    assert memory_lines == [
        '  memory (learnt late: "I work on the payments team"): kept as fact (model: the model extracted 1 statement)',
        "  memory: kept as fact (model: the model extracted 1 statement)",
    ]
    assert _learnt(bank) == {"The user said: I work on the payments team", "The user said: I live in Hangzhou"}


def test_a_parked_write_is_one_note_and_the_next_message_is_still_learnt(bank, monkeypatch):
    model = _extraction_failing({"I work on the payments team": 2})
    code, screen = run_chat_on_a_terminal(
        bank, ["I work on the payments team", "I live in Hangzhou", "I keep two cats"], model, monkeypatch)
    assert code == 0
    # the answer's line holds the answer alone: nothing logged is glued to it, nor printed a second time
    assert [line for line in screen if line.startswith("assistant> ")] == ["assistant> Noted."] * 3
    (gave_up,) = [line for line in screen if "gave up" in line]
    assert gave_up.startswith('  note: gave up writing memories from the message "I work on the payments team"')
    # the turn that parked the failed one learnt its own message then, not a turn late
    second_turn = screen[screen.index("assistant> Noted.", screen.index("assistant> Noted.") + 1):]
    assert "  memory: kept as fact (model: the model extracted 1 statement)" in second_turn[:4]
    assert not any("learnt late" in line for line in screen)
    assert _learnt(bank) == {"The user said: I live in Hangzhou", "The user said: I keep two cats"}


# ---------------------------------------------------------------------------------------------- /history

def test_history_lists_versions_oldest_first_each_dated_when_it_began(bank, clock):
    typescript = bank.add("用户喜欢用 TypeScript", memory_type="preference")  # 12:00
    clock.advance(minutes=1)
    bank.update(typescript.id, content="用户喜欢用 Go")  # 12:01: "用户喜欢用 TypeScript" is kept as @v1
    code, out, err = run_chat(bank, [f"/history {typescript.id}"])
    assert code == 0 and err == ""
    lines = [line for line in out.splitlines() if typescript.id in line]
    assert lines == [
        f"2026-06-01 12:00  {typescript.id}@v1  (earlier version, edited 2026-06-01 12:01)  用户喜欢用 TypeScript",
        f"2026-06-01 12:01  {typescript.id}  (live)  用户喜欢用 Go",
    ]


def test_history_reads_oldest_to_newest_with_supersession_and_edits_live_last(bank, clock):
    rust = bank.add("The user likes Rust", memory_type="preference")  # 12:00, edited at 12:30 below
    clock.advance(minutes=10)
    go = bank.add("The user likes Go", memory_type="preference")  # 12:10, replaced by Rust's memory
    bank.supersede(go.id, rust.id)
    clock.advance(minutes=20)
    bank.update(rust.id, content="The user likes Rust and Zig")  # 12:30
    code, out, err = run_chat(bank, [f"/history {go.id}"])
    assert code == 0 and err == ""
    lines = [line for line in out.splitlines() if line.startswith("2026-")]
    assert [line.split("  ")[1] for line in lines] == [f"{rust.id}@v1", go.id, rust.id]
    assert [line[:16] for line in lines] == ["2026-06-01 12:00", "2026-06-01 12:10", "2026-06-01 12:30"]
    assert lines[-1].endswith("(live)  The user likes Rust and Zig")
