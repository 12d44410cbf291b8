"""The seed memories meet what the project promises of them."""

import json

from tests.conftest import SEED_FILE
from vecmem import MemoryRecord
from vecmem.models import MEMORY_TYPES

SEEDS = [json.loads(line) for line in SEED_FILE.read_text(encoding="utf-8").splitlines() if line.strip()]
TUTORIAL = {
    "用户喜欢简洁的代码风格，不需要过多注释": (["偏好", "编程", "代码风格"], 9),
    "用户正在做一个 TypeScript Agent 项目": (["项目", "TypeScript", "Agent"], 8),
    "用户不喜欢过长的解释，直接给结论": (["偏好", "沟通", "回复风格"], 8),
    "用户的操作系统是 macOS": (["环境", "系统", "macOS"], 5),
    "用户学过 Python，熟悉异步编程": (["背景", "Python", "异步"], 6),
}


def test_every_line_is_a_valid_record():
    records = [MemoryRecord.from_dict(seed) for seed in SEEDS]
    assert len({r.id for r in records}) == len(records) >= 30


def test_the_tutorial_memories_are_there_as_written():
    by_content = {seed["content"]: seed for seed in SEEDS}
    for content, (tags, importance) in TUTORIAL.items():
        assert by_content[content]["tags"] == tags
        assert by_content[content]["importance"] == importance


def test_coverage_of_types_scopes_and_supersession():
    assert {seed["type"] for seed in SEEDS} == set(MEMORY_TYPES)
    assert any("session_id" in seed for seed in SEEDS) and any("session_id" not in seed for seed in SEEDS)
    superseded = [seed for seed in SEEDS if seed.get("superseded_by")]
    assert len(superseded) == 1
    ids = {seed["id"] for seed in SEEDS}
    assert superseded[0]["superseded_by"] in ids
    assert sum(1 for seed in SEEDS if seed["id"].startswith("seed-en-")) >= 5  # English equivalents
