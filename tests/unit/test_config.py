import dataclasses
import re
from pathlib import Path

import pytest

from vecmem import BudgetShares, ConfigError, RankWeights, Settings
from vecmem.config import declared_settings, default_home


def test_defaults():
    settings = Settings.from_env({})
    assert settings.home == default_home()
    assert settings.chroma_url is None
    assert settings.embed_model is None  # the store's own model, else the default (test_embed.py)
    assert (settings.weights.similarity, settings.weights.recency, settings.weights.importance) == (0.6, 0.2, 0.2)
    assert settings.recency_decay_per_day == 0.01
    assert settings.context_tokens == 8192
    shares = settings.shares
    assert (shares.system, shares.long_term, shares.short_term, shares.current) == (0.15, 0.25, 0.30, 0.30)
    assert settings.relevance_floor == 0.1 and Settings.from_env({"VECMEM_RELEVANCE_FLOOR": "0"}).relevance_floor == 0


def test_every_variable_is_read():
    env = {
        "VECMEM_HOME": "/tmp/x",
        "VECMEM_CHROMA_URL": "http://127.0.0.1:9000",
        "VECMEM_EMBED_MODEL": "BAAI/bge-small-zh-v1.5",
        "VECMEM_EMBED_DEVICE": "cuda",
        "VECMEM_EMBED_BATCH_SIZE": "8",
        "VECMEM_USER": "alice",
        "VECMEM_WEIGHT_SIMILARITY": "1",
        "VECMEM_WEIGHT_RECENCY": "0",
        "VECMEM_WEIGHT_IMPORTANCE": "0",
        "VECMEM_RECENCY_DECAY": "0.05",
        "VECMEM_OVERFETCH": "3",
        "VECMEM_MIN_CANDIDATES": "7",
        "VECMEM_CONTEXT_TOKENS": "1000",
        "VECMEM_SHARE_SYSTEM": "0.1",
        "VECMEM_SHARE_LONG_TERM": "0.4",
        "VECMEM_SHARE_SHORT_TERM": "0.2",
        "VECMEM_SHARE_CURRENT": "0.3",
        "VECMEM_TOKENIZER": "o200k_base",
    }
    s = Settings.from_env(env)
    assert s.home == Path("/tmp/x") and s.chroma_url == "http://127.0.0.1:9000"
    assert s.embed_model == "BAAI/bge-small-zh-v1.5" and s.embed_device == "cuda" and s.embed_batch_size == 8
    assert s.default_user == "alice"
    assert s.weights == RankWeights(1, 0, 0) and s.recency_decay_per_day == 0.05
    assert (s.overfetch_factor, s.min_candidates, s.context_tokens) == (3, 7, 1000)
    assert s.shares == BudgetShares(0.1, 0.4, 0.2, 0.3)
    assert s.tokenizer == "o200k_base"


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"VECMEM_CONTEXT_TOKENS": "lots"}, "VECMEM_CONTEXT_TOKENS"),
        ({"VECMEM_CONTEXT_TOKENS": "10"}, "VECMEM_CONTEXT_TOKENS"),
        ({"VECMEM_RECENCY_DECAY": "-1"}, "VECMEM_RECENCY_DECAY"),
        ({"VECMEM_RECENCY_DECAY": "nan"}, "VECMEM_RECENCY_DECAY"),
        ({"VECMEM_WEIGHT_SIMILARITY": "-0.5"}, "VECMEM_WEIGHT_SIMILARITY"),
        ({"VECMEM_SHARE_LONG_TERM": "0.5"}, "VECMEM_SHARE_"),
        ({"VECMEM_CHROMA_URL": "localhost:8000"}, "VECMEM_CHROMA_URL"),
        ({"VECMEM_OVERFETCH": "0"}, "VECMEM_OVERFETCH"),
        ({"VECMEM_EMBED_BACKEND": "tensorflow"}, "VECMEM_EMBED_BACKEND"),
        ({"VECMEM_EMBED_QUERY_STYLE": "prefix"}, "VECMEM_EMBED_QUERY_STYLE"),
        ({"VECMEM_SEARCH_MODE": "fuzzy"}, "VECMEM_SEARCH_MODE"),
        ({"VECMEM_DENSE_WEIGHT": "1.5"}, "VECMEM_DENSE_WEIGHT"),
    ],
)
def test_bad_values_name_the_variable(env, named):
    with pytest.raises(ConfigError, match=named):
        Settings.from_env(env)


def test_shares_must_sum_to_one():
    with pytest.raises(ConfigError, match="sum to 1"):
        BudgetShares(0.2, 0.25, 0.3, 0.3)
    BudgetShares(0.1, 0.3, 0.3, 0.3)


def test_weights_must_not_all_be_zero():
    with pytest.raises(ConfigError):
        RankWeights(0, 0, 0)


def test_settings_are_frozen():
    with pytest.raises(AttributeError):
        Settings().context_tokens = 5  # type: ignore[misc]


ROOT = Path(__file__).resolve().parents[2]


def _leaf_field_paths(settings, prefix=""):
    """Every leaf field of a settings object: a field holding a dataclass (weights, shares) counts by its fields."""
    paths = []
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        paths += _leaf_field_paths(value, f"{prefix}{f.name}.") if dataclasses.is_dataclass(value) else [prefix + f.name]
    return paths


def test_every_field_is_declared_once_with_its_variable():
    declared = declared_settings()
    assert sorted(declared) == sorted(_leaf_field_paths(Settings()))
    variables = [declaration.env for declaration in declared.values()]
    assert all(re.fullmatch(r"(VECMEM|OPENAI)_[A-Z_]+", name) for name in variables), variables
    assert len(set(variables)) == len(variables), "two fields share a variable"
    for path, declaration in declared.items():  # from_env reads exactly this variable for this field
        owner, _, name = path.rpartition(".")
        default = getattr(getattr(Settings(), owner) if owner else Settings(), name)
        changed = Settings.from_env({declaration.env: "   "})
        assert getattr(getattr(changed, owner) if owner else changed, name) == default, "blank must mean unset"


def test_configuration_page_lists_every_variable():
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = page.split("\n## Every variable\n", 1)[1].split("\n## ", 1)[0]
    first_cells = [line.split("|")[1] for line in section.splitlines() if line.startswith("| `")]
    listed = {name for cell in first_cells for name in re.findall(r"`((?:VECMEM|OPENAI)_[A-Z_]+)`", cell)}
    variables = {declaration.env for declaration in declared_settings().values()}
    assert variables - listed == set(), "variables missing from docs/configuration.md's tables"
    assert listed - variables == set(), "docs/configuration.md lists variables that nothing reads"


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"VECMEM_CAP_PER_USER": "-1"}, "VECMEM_CAP_PER_USER"),
        ({"VECMEM_PRUNE_THRESHOLD": "1.5"}, "VECMEM_PRUNE_THRESHOLD"),
        ({"VECMEM_REVIEW_CONFIDENCE": "2"}, "VECMEM_REVIEW_CONFIDENCE"),
        ({"VECMEM_LLM_TIMEOUT": "0"}, "VECMEM_LLM_TIMEOUT"),
        ({"VECMEM_TYPE_ROUTING": "maybe"}, "VECMEM_TYPE_ROUTING"),
        ({"VECMEM_USER": "x", "VECMEM_SUMMARY_EVERY": "0"}, "VECMEM_SUMMARY_EVERY"),
        ({"OPENAI_BASE_URL": "localhost:11434"}, "OPENAI_BASE_URL"),
        ({"VECMEM_WEIGHT_RECENCY": "inf"}, "VECMEM_WEIGHT_RECENCY"),
        ({"VECMEM_RELEVANCE_FLOOR": "1.2"}, "VECMEM_RELEVANCE_FLOOR"),
        ({"VECMEM_RELEVANCE_FLOOR": "some"}, "VECMEM_RELEVANCE_FLOOR"),
    ],
)
def test_more_bad_values_name_the_variable(env, named):
    with pytest.raises(ConfigError, match=named):
        Settings.from_env(env)


def test_settings_in_code_are_checked_and_name_the_variable():
    with pytest.raises(ConfigError, match=r"embed_batch_size \(VECMEM_EMBED_BATCH_SIZE\)"):
        Settings(embed_batch_size=0)
    with pytest.raises(ConfigError, match="VECMEM_TOKENIZER"):
        Settings().with_changes(tokenizer=" ")
    assert Settings(home="~/memories").home == Path.home() / "memories"  # type: ignore[arg-type]
    assert Settings.from_env({"VECMEM_SEARCH_MODE": " Keyword ", "VECMEM_COLD_START": "off"}).search_mode == "keyword"


def test_allowed_hosts_are_a_comma_separated_list_of_names():
    settings = Settings.from_env({"VECMEM_ALLOWED_HOSTS": " Memory.Example.com, api.internal ,,"})
    assert settings.allowed_hosts == ("memory.example.com", "api.internal")
    assert Settings.from_env({}).allowed_hosts == ()
