"""The write decision as a pure function (agent/writing/decide.py): a contradiction replaces, closeness never
does, and a differing value keeps two statements apart. ``VECMEM_PROPERTY_EXAMPLES`` runs more examples."""

from __future__ import annotations

import os

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vecmem import MemoryRecord
from vecmem.agent.writing.claims import claims, normalized, value_tokens
from vecmem.agent.writing.decide import decide
from vecmem.agent.writing.revision import without_claims
from vecmem.bank.resolving import Known

EXAMPLES = int(os.environ.get("VECMEM_PROPERTY_EXAMPLES", "60"))


def plan(later: str, *earlier: str, closeness: float | None = None):
    known = [Known(MemoryRecord(id=f"m{i}", content=text), closeness) for i, text in enumerate(earlier)]
    return decide(MemoryRecord(id="new", content=later), known)


@pytest.mark.parametrize(("earlier", "later"), [
    ("我在字节跳动工作", "我现在在腾讯工作了"),
    ("我女儿今年5岁", "我女儿今年6岁了"),
    ("我每天早上七点跑步", "我现在每天六点跑步"),
    ("I am vegetarian", "I'm not vegetarian anymore"),
    ("I live in Hangzhou", "I don't live in Hangzhou"),
    ("I smoke a pack a day", "I quit smoking"),
    ("回答我的时候请用中文", "以后回答都用英文"),
    ("Our standup is at 9:30", "Our standup is at 10:30"),
    ("My phone plan is with Verizon", "I switched my phone plan to T-Mobile"),
    ("Format dates as DD/MM/YYYY", "Actually, format dates as YYYY-MM-DD"),
    ("我住在杭州", "I moved to Shanghai"),
])
def test_a_contradiction_replaces(earlier, later):
    decided = plan(later, earlier)
    assert decided.action == "replace" and decided.replace == ("m0",), decided


@pytest.mark.parametrize(("earlier", "later", "kept"), [
    ("我喜欢吃红烧肉和火锅", "我现在不吃肉了", "我喜欢吃火锅"),
    ("我平时用 VS Code 写代码，终端用 zsh", "我现在用 Cursor 写代码了", "我终端用 zsh"),
    ("I live in Austin and work at Dell", "I moved to Denver", "I work at Dell"),
    ("回答我的时候请用中文，简洁一点", "以后回答都用英文", "回答我的时候请简洁一点"),
])
def test_a_memory_of_several_facts_keeps_the_ones_not_revised(earlier, later, kept):
    assert plan(later, earlier).rewrite == (("m0", kept),)


@pytest.mark.parametrize(("earlier", "later", "action"), [
    ("I live in Paris", "I used to live in Paris, now I'm in Rome", "timeline"),
    ("我在阿里工作", "我以前在阿里工作，现在在字节", "timeline"),
    ("I live in Berlin", "I used to live in Berlin", "timeline"),
])
def test_a_change_over_time_keeps_the_past_in_the_new_memory(earlier, later, action):
    decided = plan(later, earlier)
    assert (decided.action, decided.replace) == (action, ("m0",))


@pytest.mark.parametrize(("earlier", "later"), [
    ("SELECT * FROM users WHERE id = 1", "SELECT * FROM orders WHERE id = 2"),
    ("Run `npm test` before pushing", "Run `npm run lint` before pushing"),
    ("Host web-01 runs nginx 1.24", "Host web-02 runs nginx 1.26"),
    ("测试账号 alice01 的密码在 1Password 里", "测试账号 alice02 的密码在 1Password 里"),
    ("API v3 returns JSON", "API v4 returns JSON"),
    ("我住在杭州", "我妹妹住在成都"),
    ("My daughter is 5", "My son is 3"),
    ("I like Python", "I also like Rust"),
    ("我养了一只猫", "我还养了一只狗"),
    ("I use Vim for Python", "I use VS Code for TypeScript"),
    ("我们团队用 Go", "以后都用 JavaScript 吧"),
    ("我平时用 Neovim 写 Python", "I've switched from VS Code to Cursor"),
    ("The user trains at the gym on Mondays.", "The user trains at the gym on Thursdays."),
])
def test_what_merely_looks_alike_is_kept_however_close(earlier, later):
    assert plan(later, earlier, closeness=0.99).action == "add"


@pytest.mark.parametrize(("earlier", "later"), [
    ("I live in Paris", "I live in Paris."),
    ("我住在杭州", "用户住在杭州"),
    ("I work at Google", "The user works at Google."),
    ("I'm a nurse", "I am a nurse"),
    ("我用 VS Code 写代码", "我用vs code写代码"),
    ("我在腾讯工作", "我在腾讯上班"),
    ("I reside in Paris", "I live in Paris"),
    ("Run the tests with pytest -x before pushing", "Before pushing, run the tests with pytest -x"),
])
def test_the_same_claim_again_is_unchanged(earlier, later):
    assert plan(later, earlier).action == "unchanged"


def test_closeness_alone_neither_replaces_nor_merges():
    assert plan("I like dogs", "I like cats", closeness=1.0).action == "add"
    assert plan("Deploy on Fridays is fine", "Never deploy on Fridays", closeness=0.99).action == "add"


def test_a_conclusion_is_never_replaced():
    old = MemoryRecord(id="c", content="The user lives in Hangzhou", type="conclusion")
    assert decide(MemoryRecord(id="n", content="I live in Shanghai"), [Known(old)]).action == "add"


def test_the_statement_model_reads_holder_value_polarity_and_time():
    (age,) = claims("我女儿今年五岁")
    assert (age.holder, age.attribute, age.value) == ("daughter", "age", "5")
    past, now = claims("I used to live in Paris, now I'm in Rome")
    assert (past.value, past.past, now.value, now.past) == ("paris", True, "rome", False)
    (diet,) = claims("I'm not vegetarian anymore")
    assert (diet.attribute, diet.negated) == ("diet", True)
    assert normalized("I'm in Paris.") == normalized("the user is in paris")
    assert without_claims("我住在苏州，在一家外企做会计", list(claims("我住在苏州")[:1])) is not None


# statements about things that differ only in an identifier-like value: numbers, ids, versions, code, names
_TEMPLATES = [
    "Host {id} runs nginx {version}", "Run `{command}` before pushing", "测试账号 {id} 的密码在 1Password 里",
    "工单 {ticket} 是支付超时的问题", "The {name} service listens on port {port}", "SELECT * FROM {table} WHERE id = {port}",
    "API {version} returns JSON", "分支 {branch} 用于发布", "The nightly backup of {table} runs on {id}",
    "Deploy {name} with `{command}`",
]
_IDS = st.from_regex(r"[a-z]{2,5}-0[1-9]", fullmatch=True)
_VALUES = {
    "id": _IDS, "version": st.from_regex(r"v?[1-9]\.[0-9]{1,2}(\.[0-9])?", fullmatch=True),
    "command": st.sampled_from(["npm test", "npm run lint", "make check", "pytest -x", "cargo clippy", "go vet ./..."]),
    "ticket": st.from_regex(r"(OPS|PAY|WEB)-[1-9][0-9]{2,3}", fullmatch=True),
    "name": st.sampled_from(["Billing", "Search", "Auth", "Payments", "Atlas", "Orion"]),
    "port": st.integers(1000, 9999).map(str), "table": st.sampled_from(["t_users", "t_orders", "t_user_ext", "events_v2"]),
    "branch": st.from_regex(r"(release|feature)/[a-z]{3,6}", fullmatch=True),
}


@st.composite
def _pairs(draw):
    template = draw(st.sampled_from(_TEMPLATES))
    fields = [name for name in _VALUES if "{" + name + "}" in template]
    first = {name: draw(_VALUES[name]) for name in fields}
    changed = draw(st.sampled_from(fields))
    second = dict(first, **{changed: draw(_VALUES[changed].filter(lambda value: value != first[changed]))})
    return template.format(**first), template.format(**second)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
@given(_pairs(), st.floats(0.9, 1.0))
def test_statements_differing_in_an_identifier_never_replace_nor_duplicate(pair, closeness):
    earlier, later = pair
    assert value_tokens(earlier) != value_tokens(later)
    assert plan(later, earlier, closeness=closeness).action == "add"
    assert plan(earlier, later, closeness=closeness).action == "add"
