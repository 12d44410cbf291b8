"""Export lines parsed into records (maintenance/transfer.py), without a bank: ids, users, and bad lines."""

from __future__ import annotations

import json

import pytest

from tests.conftest import T0
from vecmem import InvalidInputError
from vecmem.bank.facade import content_id
from vecmem.maintenance import transfer


def test_a_line_without_an_id_gets_the_content_derived_one_in_its_scope():
    record = transfer.parse_line(json.dumps({"content": "likes tea", "session_id": "s1"}), None, "ann", T0)
    assert record.id == content_id("ann", "s1", "likes tea") and record.user_id == "ann"
    assert record.created_at == T0


def test_the_forced_user_overrides_the_line_and_the_default_fills_a_missing_one():
    line = json.dumps({"id": "m1", "content": "x", "user_id": "alice"})
    assert transfer.parse_line(line, "zoe", "default", T0).user_id == "zoe"
    assert transfer.parse_line(line, None, "default", T0).user_id == "alice"
    assert transfer.parse_line(json.dumps({"id": "m1", "content": "x"}), None, "bob", T0).user_id == "bob"


@pytest.mark.parametrize("line", ["{not json", "[1, 2]", json.dumps({"content": 3})])
def test_a_bad_line_is_a_vecmem_error(line):
    with pytest.raises(InvalidInputError):
        transfer.parse_line(line, None, "default", T0)


def test_parse_lines_skips_blank_lines_and_reports_bad_ones_by_number():
    errors: list[tuple[int, str]] = []
    lines = [json.dumps({"id": "a", "content": "first"}), "   ", "{broken", json.dumps({"id": "b", "content": "last"})]
    parsed = list(transfer.parse_lines(lines, None, "default", lambda: T0, errors))
    assert [r.id for r in parsed] == ["a", "b"]
    assert [number for number, _ in errors] == [3] and "JSON" in errors[0][1]
