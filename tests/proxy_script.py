"""A conversation for `vecmem proxy`'s tests, and the scripted model server's side of it: the first message states
a fact, the model's extraction (the proxy's learning call) turns it into a memory, and the second message asks
something only that memory answers well. A few messages make the server fail in the ways the proxy must pass on."""

from __future__ import annotations

import json

from tests.chat_server import Reply

FACT = "I am allergic to peanuts."
LEARNT = "The user is allergic to peanuts"
QUESTION = "Is a peanut butter sandwich a good snack for my hike?"
ANSWER = "Noted, and enjoy the hike."


def said_in(body: dict) -> str:
    """The user message an extraction request is about."""
    return body["messages"][-1]["content"].split("Exchange:\nUser: ")[1].split("\nAssistant:")[0]


def remembering_upstream(kind: str, body: dict) -> Reply:
    """The model server: extracts the allergy (and nothing else), answers every question alike, and fails on
    request: "rate limit me" (429, Retry-After: 7), "break down" (500), "take your time" (2 s late), "stream then
    fail" (an error event instead of a chunk)."""
    if kind == "extract":
        if "allergic" in said_in(body):
            return Reply(json.dumps({"keep": True, "reason": "a lasting fact", "memories": [{
                "content": LEARNT, "type": "fact", "importance": 0.5, "tags": ["health"], "scope": "global",
                "confidence": 0.9, "action": "ADD", "target": None}]}))
        return Reply(json.dumps({"keep": False, "reason": "a question", "memories": []}))
    last = body["messages"][-1]["content"]
    if "rate limit me" in last:
        return Reply(status=429, headers={"Retry-After": "7"})
    if "break down" in last:
        return Reply(status=500)
    if "take your time" in last:
        return Reply("late", delay=2.0)
    if "stream then fail" in last:
        return Reply(raw_body=json.dumps({"error": {"message": "overloaded mid-way", "type": "server_error"}}))
    return Reply(ANSWER)


def carries(body: dict, text: str = LEARNT) -> bool:
    """Whether a request the server got has ``text`` in one of its messages."""
    return any(text in str(message.get("content")) for message in body["messages"])
