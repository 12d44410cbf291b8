"""Events are memories: a narrated event (who did what, when) passes the offline write gate as a fact, its
relative date resolved to the day it refers to (the message's own time is the reference), and its speaker named;
filler is still dropped. A model's extraction is told the day and the speaker, and asked for events too."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from tests.conftest import ScriptedModel
from vecmem import Turn
from vecmem.agent.writing.events import dated, event_reason
from vecmem.agent.writing.gate import WriteGate
from vecmem.agent.writing.learn import Learner
from vecmem.agent.writing.statements import statements

SAID = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)  # a Monday


@pytest.mark.parametrize(("message", "stored"), [
    ("I went to a pottery workshop yesterday.", "Priya went to a pottery workshop on 7 May 2023."),
    ("We adopted a kitten last week!", "Priya and others adopted a kitten in the week of 1 May 2023!"),
    ("Hey Omar! Last week I took a ferry to Norway.", "In the week of 1 May 2023 Priya took a ferry to Norway."),
    ("Oh, we went sailing on Saturday.", "Priya and others went sailing on 6 May 2023."),
    ("Four days ago I bought a travel guide.", "On 4 May 2023 Priya bought a travel guide."),
    ("In 2021 I ran my first marathon.", "In 2021 Priya ran Priya's first marathon."),
    ("Had an interview yesterday for a teaching job.", "Priya: Had an interview on 7 May 2023 for a teaching job."),
])
def test_an_english_event_names_its_speaker_and_the_day_it_happened(message, stored):
    assert [s.content for s in statements(message, speaker="Priya", now=SAID)] == [stored]


@pytest.mark.parametrize(("message", "stored"), [
    ("我昨天去了医院看牙", "李伟2023年5月7日去了医院看牙"),
    ("上周我们领养了一只小狗", "2023年5月1日那一周李伟和其他人领养了一只小狗"),
    ("去年我去过一次日本", "2022年李伟去过一次日本"),
    ("三天前参加了一个读书会", "李伟2023年5月5日参加了一个读书会"),
])
def test_a_chinese_event_names_its_speaker_and_the_day_it_happened(message, stored):
    found = statements(message, speaker="李伟", now=SAID)
    assert [(s.content, s.memory_type) for s in found] == [(stored, "fact")]


def test_without_a_speaker_an_event_is_about_the_user():
    assert [s.content for s in statements("I went to a support group yesterday.", now=SAID)] == [
        "The user went to a support group on 7 May 2023."]
    assert [s.content for s in statements("昨天我去了医院", now=SAID)] == ["2023年5月7日用户去了医院"]


def test_the_date_is_read_against_the_time_given_in_its_own_zone():
    later = SAID + timedelta(days=30)
    assert dated("The user went to the gym yesterday.", later) == "The user went to the gym on 6 June 2023."
    evening_in_shanghai = datetime(2023, 5, 8, 23, 30, tzinfo=timezone(timedelta(hours=8)))
    assert dated("用户昨天去了医院", evening_in_shanghai) == "用户2023年5月7日去了医院"


def test_a_date_ahead_or_a_standing_choice_is_not_rewritten():
    assert dated("The user's meeting is at 9 a.m. on Monday.", SAID) == "The user's meeting is at 9 a.m. on Monday."
    assert dated("The user ran a marathon in 2021.", SAID) == "The user ran a marathon in 2021."
    assert [s.content for s in statements("以后都用 pnpm", now=SAID)] == ["用户要求以后都用 pnpm"]


@pytest.mark.parametrize("filler", [
    "Wow, that looks lovely Lena! Is that your second one?", "I loved it!", "That sounded amazing.",
    "Thanks, Greta! Take care!", "太好了", "嗯，赢了就特别开心！", "今天天气不错啊", "Did you take part or just watch?",
])
def test_the_gate_still_drops_filler(filler):
    assert not WriteGate().judge(filler, now=SAID).keep


@pytest.mark.parametrize("event", [
    "Hey Omar! What a nice surprise! Been busy at work, got engaged last week - what about you?",
    "By the way, four days ago I bought myself a new bike.", "上周我们领养了一只小狗",
    "Last weekend our town held a food festival!",
])
def test_the_gate_keeps_events(event):
    decision = WriteGate().judge(event, now=SAID)
    assert decision.keep and decision.memory_type == "fact"
    assert event_reason("Had an interview yesterday for a teaching job.", SAID) is not None


def test_add_messages_names_each_speaker_and_dates_each_turn_by_its_own_time(bank):
    result = bank.add_messages([
        {"role": "user", "content": "I went to a pottery workshop yesterday.", "speaker": "Priya",
         "time": "2023-05-08T13:56:00", "id": "D1:3"},
        Turn("user", "We went sailing last weekend, it was great.", id="D2:1", speaker="Greta",
             time=datetime(2023, 7, 12, 9, tzinfo=UTC)),
        {"role": "user", "content": "Thanks, Greta!", "speaker": "Priya"},
    ], user_id="friends")
    contents = sorted(record.content for record in result.written)
    assert contents == ["Greta and others went sailing on the weekend of 8 July 2023, it was great.",
                        "Priya went to a pottery workshop on 7 May 2023."]
    assert [s.content for s in result.skipped] == ["Thanks, Greta!"]
    hit = bank.search("When did Priya go to the pottery workshop?", 1, user_id="friends")[0]
    assert hit.record.provenance is not None and hit.record.provenance.message_ids == ("D1:3",)


def test_a_speaker_or_time_that_is_not_valid_is_refused(bank):
    from vecmem import InvalidInputError

    with pytest.raises(InvalidInputError, match=r"messages\[0\]\.time"):
        bank.add_messages([{"role": "user", "content": "I went home.", "time": "last Tuesday"}])
    with pytest.raises(InvalidInputError, match=r"messages\[0\]\.speaker"):
        bank.add_messages([{"role": "user", "content": "I went home.", "speaker": "  "}])


def test_the_model_is_told_the_day_and_the_speaker_and_asked_for_events(make_bank):
    seen: list[str] = []

    def respond(kind, messages):
        seen.append(messages[0]["content"] + "\n" + messages[1]["content"])
        return json.dumps({"keep": True, "reason": "an event", "memories": [{
            "content": "Priya went to a pottery workshop on 7 May 2023", "type": "fact", "importance": 0.5,
            "tags": [], "scope": "global", "confidence": 0.9, "action": "ADD", "target": None}]})

    bank = make_bank(learner=Learner(model=ScriptedModel(respond)))
    result = bank.add_messages([{"role": "user", "content": "I went to a pottery workshop yesterday.",
                                 "speaker": "Priya", "time": "2023-05-08T13:56:00"}], user_id="friends")
    assert [r.content for r in result.written] == ["Priya went to a pottery workshop on 7 May 2023"]
    assert "Events are facts" in seen[0] and "Said on: Monday, 2023-05-08" in seen[0]
    assert "Speaker: Priya" in seen[0] and "Priya: I went to a pottery" in seen[0]


def test_the_http_api_takes_a_speaker_and_a_time(bank):
    from fastapi.testclient import TestClient

    from vecmem.interfaces.http.app import create_app

    client = TestClient(create_app(bank), base_url="http://127.0.0.1:8765", client=("127.0.0.1", 50000),
                        headers={"X-Vecmem-Request": "1"})
    response = client.post("/messages", params={"user": "friends"}, json={"messages": [
        {"role": "user", "content": "I went to a support group yesterday.", "speaker": "Priya",
         "time": "2023-05-08T13:56:00Z"}]})
    assert response.status_code == 200, response.text
    assert [m["content"] for m in response.json()["written"]] == ["Priya went to a support group on 7 May 2023."]


def test_between_people_a_remark_or_a_directive_to_the_other_one_is_no_memory():
    for remark in ("Don't quit, you've got this!", "I definitely will!", "Let's remember the advice she gave.",
                   "You've spent so many hours on this.", "It was a really quiet evening."):
        assert statements(remark, speaker="Nadia", now=SAID) == [], remark
    # in a chat with the user alone, a directive is an instruction to the assistant, as before
    assert [s.memory_type for s in statements("Don't use emojis in your answers.", now=SAID)] == ["instruction"]


def test_a_named_speakers_message_is_one_memory_and_still_holds_every_fact():
    found = statements("My family's been wonderful, they really supported me through a rough patch. We went hiking in "
                       "the hills last week.", speaker="Greta", now=SAID)
    assert [(s.content, s.memory_type) for s in found] == [(
        "Greta's family's been wonderful, they really supported Greta through a rough patch. Greta and others went "
        "hiking in the hills in the week of 1 May 2023.", "fact")]


def test_the_gate_and_extraction_agree_on_a_named_speakers_remark(bank):
    """A remark extraction leaves out between people is dropped by the gate too, not stored whole instead."""
    assert not WriteGate().judge("I definitely will!", speaker="Ravi", now=SAID).keep
    result = bank.add_messages([{"role": "user", "content": "I definitely will!", "speaker": "Ravi"}], user_id="x")
    assert result.written == () and len(result.skipped) == 1


@pytest.mark.parametrize("said", ["0001-01-01T00:00:00+23:59", "0001-01-01t00:00:00z", "9999-12-31T23:59:59-23:59"])
def test_a_time_at_the_calendars_edge_is_taken_and_a_day_beyond_it_left_as_said(bank, said):
    result = bank.add_messages([{"role": "user", "content": "I went to the dentist yesterday.", "time": said,
                                 "speaker": "Ann"}], user_id="u")
    [written] = result.written
    if said.startswith("0001"):
        assert written.content == "Ann went to the dentist yesterday."  # the day before year 1 has no date
    else:
        assert written.content == "Ann went to the dentist on 30 December 9999."
