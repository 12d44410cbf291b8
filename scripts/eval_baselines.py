"""``eval_hit_rate.py --baselines``: plain BM25 and plain cosine on the same corpus and queries, outside vecmem.

vecmem's modes are measured against what the textbook retrievers score on exactly the same data, in the same run:

* **plain cosine**: the configured embedding model's exact cosine top k over the user's memory texts (their
  ``content``, as vecmem embeds it), the whole query embedded once with ``embed_query``. No approximate index,
  no recency or importance, no keyword side, no dialogue split of the query.
* **plain BM25**: ``bm25s`` with Lucene's defaults k1 = 1.2, b = 0.75 (vecmem's own keyword side uses b = 0.5)
  over the user's memory texts, only memories sharing a term with the query returned, as a BM25 engine does.
  Tokens are vecmem's own ``vecmem.retrieval.query.tokenize.tokenize`` (stemmed English without stopwords, jieba
  words and character bigrams for Chinese): a whitespace tokenizer would make Chinese BM25 a straw man, and
  the same tokens make the difference between the two keyword rows vecmem's scoring, not its tokenizer. The
  retrieval ``context`` (LoCoMo's neighbouring turns) and tags are left out: the baseline indexes what the
  benchmark's protocol gives.

Both see each user's memories only (a query never competes with another user's), and all of them: no session
or type filter, no hiding of superseded or expired memories, so a native set's leak in these rows is what
vecmem's scoping prevents. The memory vectors come from the run itself: ``RecordingEmbedder`` keeps what the
bank embedded, so the baseline re-embeds nothing the index already holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vecmem import Embedder, MemoryRecord
from vecmem.retrieval.query.tokenize import tokenize

__all__ = ["BASELINES", "BM25_B", "BM25_K1", "RecordingEmbedder", "rank", "rank_bm25", "rank_cosine"]

BASELINES = {"plain-bm25": "plain BM25", "plain-cosine": "plain cosine"}  # mode name -> table label
BM25_K1, BM25_B = 1.2, 0.75  # Lucene's (and Robertson's usual) defaults: a baseline nobody tuned


class RecordingEmbedder:
    """The configured embedder, keeping every vector it made by its text, so the baselines reuse them."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.documents: dict[str, np.ndarray] = {}
        self.queries: dict[str, np.ndarray] = {}

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed_query(self, text: str) -> np.ndarray:
        if text not in self.queries:
            self.queries[text] = np.asarray(self.inner.embed_query(text), dtype=np.float32)
        return self.queries[text]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self.inner.embed_queries(texts)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        missing = list(dict.fromkeys(t for t in texts if t not in self.documents))
        if missing:
            vectors = np.asarray(self.inner.embed_documents(missing), dtype=np.float32)
            self.documents.update(zip(missing, vectors, strict=True))
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.stack([self.documents[t] for t in texts])


@dataclass
class _Corpus:
    """One user's memories, in the order they were given."""

    ids: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)


def _corpora(records: Iterable[MemoryRecord]) -> dict[str, _Corpus]:
    corpora: dict[str, _Corpus] = {}
    for record in records:
        corpus = corpora.setdefault(record.user_id, _Corpus())
        corpus.ids.append(record.id)
        corpus.texts.append(record.content)
    return corpora


def _top(scores: np.ndarray, ids: list[str], depth: int, *, positive_only: bool) -> list[str]:
    """The ``depth`` best ids, ties in corpus order (a stable sort), so a run is reproducible."""
    order = np.argsort(-scores, kind="stable")[:depth]
    return [ids[i] for i in order if not positive_only or scores[i] > 0]


def rank_cosine(records: Sequence[MemoryRecord], queries: Sequence[Any], depth: int,
                embedder: RecordingEmbedder) -> list[list[str]]:
    """Per query (eval_hit_rate.Query), its user's memory ids by exact cosine, best first, at most ``depth``."""
    matrices = {user: (corpus, np.asarray(embedder.embed_documents(corpus.texts), dtype=np.float32))
                for user, corpus in _corpora(records).items()}
    ranked: list[list[str]] = []
    for query in queries:
        if query.user_id not in matrices:
            ranked.append([])
            continue
        corpus, matrix = matrices[query.user_id]
        scores = matrix @ np.asarray(embedder.embed_query(query.text), dtype=np.float32)  # both normalised
        ranked.append(_top(scores, corpus.ids, depth, positive_only=False))
    return ranked


def rank_bm25(records: Sequence[MemoryRecord], queries: Sequence[Any], depth: int) -> list[list[str]]:
    """Per query, its user's memory ids sharing a token with it by BM25, best first, at most ``depth``."""
    import bm25s

    models: dict[str, tuple[_Corpus, Any]] = {}
    for user, corpus in _corpora(records).items():
        tokens = [tokenize(text) for text in corpus.texts]
        model = None
        if any(tokens):  # bm25s cannot index a corpus without a single token
            model = bm25s.BM25(k1=BM25_K1, b=BM25_B)
            model.index(tokens, show_progress=False)
        models[user] = (corpus, model)
    ranked: list[list[str]] = []
    for query in queries:
        corpus, model = models.get(query.user_id, (_Corpus(), None))
        if model is None:
            ranked.append([])
            continue
        scores = np.asarray(model.get_scores(tokenize(query.text)), dtype=np.float64)
        ranked.append(_top(scores, corpus.ids, depth, positive_only=True))
    return ranked


def rank(name: str, records: Sequence[MemoryRecord], queries: Sequence[Any], depth: int,
         embedder: RecordingEmbedder) -> list[list[str]]:
    """The ranking of every query by the baseline ``name`` (a key of ``BASELINES``)."""
    if name == "plain-bm25":
        return rank_bm25(records, queries, depth)
    if name == "plain-cosine":
        return rank_cosine(records, queries, depth, embedder)
    raise ValueError(f"no baseline {name!r}: {', '.join(BASELINES)}")
