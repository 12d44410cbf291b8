"""One importance rule on every path (validation.normalize_importance): a value in [0, 1] as it is, above 1 up to 10
on the ten-point scale (so 1 is 1.0, 7 is 0.7, 10 is 1.0), negative or above 10 refused naming the field. Python,
the CLI, HTTP (what the panel sends too) and MCP each give the same answers for the same numbers."""

import asyncio
import json

import pytest
from fastapi.testclient import TestClient
from mcp.server.mcpserver.exceptions import ToolError

from vecmem import InvalidInputError
from vecmem.interfaces.http.app import PANEL, create_app
from vecmem.interfaces.mcp_server import create_server
from vecmem.validation import normalize_importance

# (given, stored): ints and floats alike, since no interface can be relied on to keep 1 and 1.0 apart
ACCEPTED = [(0, 0.0), (0.0, 0.0), (0.25, 0.25), (1, 1.0), (1.0, 1.0), (1.5, 0.15), (7, 0.7), (7.0, 0.7),
            (7.5, 0.75), (10, 1.0), (10.0, 1.0)]
REFUSED = [-1, -0.1, 10.5, 11, 100, float("nan"), float("inf"), float("-inf")]


@pytest.mark.parametrize(("given", "stored"), ACCEPTED)
def test_the_rule(given, stored):
    assert normalize_importance(given) == pytest.approx(stored)
    assert isinstance(normalize_importance(given), float)


@pytest.mark.parametrize("bad", [*REFUSED, True, False, "7", None, [1]])
def test_refused_with_the_field_named(bad):
    with pytest.raises(InvalidInputError) as refused:
        normalize_importance(bad)
    assert refused.value.field == "importance"


def test_a_stored_value_read_again_is_unchanged():
    """Records are validated again on every change (with_changes): the rule must map [0, 1] onto itself."""
    for _, stored in ACCEPTED:
        assert normalize_importance(normalize_importance(stored)) == pytest.approx(stored)


# ---------------------------------------------------------------------------------------------- Python


@pytest.mark.parametrize(("given", "stored"), ACCEPTED)
def test_python_add_and_update(bank, given, stored):
    record = bank.add("The user keeps bees", importance=given)
    assert bank.get(record.id).importance == pytest.approx(stored)
    other = bank.add("The user rides a bike", importance=0.5)
    assert bank.update(other.id, importance=given).importance == pytest.approx(stored)


@pytest.mark.parametrize("bad", REFUSED)
def test_python_refuses_out_of_range_and_stores_nothing(bank, bad):
    with pytest.raises(InvalidInputError, match="importance"):
        bank.add("The user keeps bees", importance=bad)
    assert bank.count() == 0


# ---------------------------------------------------------------------------------------------- CLI


@pytest.mark.parametrize(("given", "stored"), [("1", 1.0), ("1.0", 1.0), ("7", 0.7), ("0.7", 0.7), ("10", 1.0),
                                               ("2.5", 0.25), ("0", 0.0)])
def test_cli_add(cli, given, stored):
    code, out, err = cli("add", "The user keeps bees", "--importance", given, "--json")
    assert code == 0, err
    assert json.loads(out)["importance"] == pytest.approx(stored)


@pytest.mark.parametrize("bad", ["11", "-1", "10.01", "nan", "lots"])
def test_cli_refuses_with_one_line_naming_importance(cli, bad):
    code, out, err = cli("add", "The user keeps bees", "--importance", bad)
    assert code == 2 and not out
    assert "importance" in err and len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------------------------------------- HTTP and the panel


@pytest.fixture
def api(bank):
    return TestClient(create_app(bank), base_url="http://127.0.0.1:8765", client=("127.0.0.1", 50000),
                      headers={"X-Vecmem-Request": "1"})


@pytest.mark.parametrize(("given", "stored"), ACCEPTED)
def test_http_post_and_patch(api, given, stored):
    made = api.post("/memories", json={"content": "The user keeps bees", "importance": given})
    assert made.status_code == 201, made.text
    assert made.json()["importance"] == pytest.approx(stored)
    other = api.post("/memories", json={"content": "The user rides a bike"}).json()
    changed = api.patch(f"/memories/{other['id']}", json={"importance": given})
    assert changed.status_code == 200 and changed.json()["importance"] == pytest.approx(stored)


@pytest.mark.parametrize("bad", [-1, -0.1, 10.5, 11])
def test_http_refuses_out_of_range_naming_the_field(api, bad):
    refused = api.post("/memories", json={"content": "The user keeps bees", "importance": bad})
    assert refused.status_code == 422 and refused.json()["field"] == "importance"
    assert api.get("/memories").json() == []


def test_the_schema_and_the_panel_state_the_same_range(api):
    schema = api.get("/openapi.json").json()["components"]["schemas"]
    declared = schema["NewMemory"]["properties"]["importance"]
    assert (declared["minimum"], declared["maximum"]) == (0, 10) and "ten-point" in declared["description"]
    # the panel sends Number(field): its add form and its edit dialog must let 1..10 through, and say so (in both
    # of its languages)
    assert 'id="add-importance" type="number" min="0" max="10"' in PANEL
    assert 'id="edit-importance" type="number" min="0" max="10"' in PANEL
    assert "above 1 up to 10 on the ten-point scale" in PANEL and "大于 1 到 10 按十分制" in PANEL


# ---------------------------------------------------------------------------------------------- MCP


@pytest.mark.parametrize(("given", "stored"), [(7, 0.7), (1, 1.0), (0.9, 0.9), (10, 1.0)])
def test_mcp_remember(bank, given, stored):
    server = create_server(bank)
    result = asyncio.run(server.call_tool("remember", {"content": "The user keeps bees", "importance": given}))
    assert not result.is_error
    assert bank.get(result.structured_content["id"]).importance == pytest.approx(stored)


def test_mcp_refuses_out_of_range_with_vecmem_s_message(bank):
    with pytest.raises(ToolError, match=r"importance.*above 10"):
        asyncio.run(create_server(bank).call_tool("remember", {"content": "The user keeps bees", "importance": 11}))
    assert bank.count() == 0
