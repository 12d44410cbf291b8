"""The fast start of the ONNX backend: an exported sentence-transformers model run with ONNX Runtime and the Rust
``tokenizers`` library alone, without importing torch, transformers or sentence_transformers (seconds of a new
process's first search).

It reproduces what sentence-transformers does for a plain pipeline (Transformer, mean Pooling, optionally
Normalize) as the export's own files say: tokenize with truncation at the model's maximum sequence length and
padding to the longest text of a batch, run the model, average the token vectors under the attention mask, then
L2-normalise. ``load_plain_pipeline`` answers ``None`` for anything else in the folder (another pooling, a prompt,
a lower-casing step, an extra module): the caller then loads the model through sentence-transformers, which
understands every pipeline.

Threads: one ``OnnxSentenceEncoder`` is shared by the query-embedding thread and the ingest thread.
``InferenceSession.run`` is thread-safe, and the tokenizer is only read after loading: its truncation and padding
are set once here and never changed (changing them during another thread's ``encode_batch`` is what raises
"Already borrowed" in tokenizers).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["OnnxSentenceEncoder", "PipelineSpec", "load_plain_pipeline", "read_plain_pipeline", "session_options"]

# Module types sentence-transformers writes into modules.json, by their last dotted part (the package path
# changed between versions: sentence_transformers.models.Pooling, ...sentence_transformer.modules.pooling.Pooling).
_TRANSFORMER, _POOLING, _NORMALIZE = "Transformer", "Pooling", "Normalize"
# sentence_bert_config.json keys, each with the only values this pipeline reproduces (None: any value).
_KNOWN_TRANSFORMER_CONFIG: dict[str, object] = {
    "max_seq_length": None,
    "do_lower_case": False,
    "transformer_task": "feature-extraction",
    "modality_config": {"text": {"method": "forward", "method_output_name": "last_hidden_state"}},
    "module_output_name": "token_embeddings",
}
_MODEL_INPUTS = {"input_ids", "attention_mask", "token_type_ids"}
_HIDDEN_STATES = "last_hidden_state"
_NO_LIMIT = 1_000_000  # transformers' "no maximum" is 1e30; a model with no real limit is not a plain one


@dataclass(frozen=True)
class PipelineSpec:
    """What an export folder says about its pipeline, read without loading anything heavy."""

    folder: Path
    max_seq_length: int
    normalize: bool
    pad_token: str
    padding_side: str
    truncation_side: str


def session_options() -> Any:
    """ONNX Runtime without spin-waiting: by default its threads keep spinning after each run, taking the
    cores that Chroma's search and write threads need next (at 100,000 memories a search with its query
    embedding took longer than the two parts apart, and ingest ran slower). The intra-op thread
    count stays ONNX Runtime's default (one per physical core), on this path and through sentence-transformers."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return options


def read_plain_pipeline(folder: Path) -> PipelineSpec | None:
    """The pipeline of an export folder when this module can reproduce it exactly, else ``None``."""
    if not (folder / "onnx" / "model.onnx").is_file() or not (folder / "tokenizer.json").is_file():
        return None
    modules = _read_json(folder / "modules.json")
    if not isinstance(modules, list):
        return None
    kinds = [str(module.get("type", "")).rsplit(".", 1)[-1] for module in modules if isinstance(module, dict)]
    if kinds not in ([_TRANSFORMER, _POOLING], [_TRANSFORMER, _POOLING, _NORMALIZE]) or modules[0].get("path"):
        return None
    if not _is_mean_pooling(_read_json(folder / str(modules[1].get("path", "")) / "config.json")):
        return None
    transformer_config = _read_json(folder / "sentence_bert_config.json") or {}
    if not isinstance(transformer_config, dict) or not _only_known_values(transformer_config):
        return None
    if _has_prompts(_read_json(folder / "config_sentence_transformers.json") or {}):
        return None
    tokenizer_config = _read_json(folder / "tokenizer_config.json") or {}
    max_seq_length = _max_seq_length(transformer_config, tokenizer_config, _read_json(folder / "config.json") or {})
    if max_seq_length is None or not isinstance(tokenizer_config.get("pad_token"), str):
        return None
    return PipelineSpec(
        folder=folder,
        max_seq_length=max_seq_length,
        normalize=kinds[-1] == _NORMALIZE,
        pad_token=tokenizer_config["pad_token"],
        padding_side=str(tokenizer_config.get("padding_side", "right")),
        truncation_side=str(tokenizer_config.get("truncation_side", "right")),
    )


def load_plain_pipeline(folder: Path) -> OnnxSentenceEncoder | None:
    """The encoder for an export folder with a plain pipeline, or ``None`` when sentence-transformers is needed."""
    spec = read_plain_pipeline(folder)
    return None if spec is None else OnnxSentenceEncoder.load(spec)


class OnnxSentenceEncoder:
    """Sentence vectors from an exported model: the tokenizer and the ONNX session, both loaded once."""

    def __init__(self, spec: PipelineSpec, tokenizer: Any, session: Any, dimension: int) -> None:
        self.spec = spec
        self._tokenizer = tokenizer
        self._session = session
        self._inputs = [node.name for node in session.get_inputs()]
        self.dimension = dimension

    @classmethod
    def load(cls, spec: PipelineSpec) -> OnnxSentenceEncoder | None:
        """The encoder, or ``None`` when the ONNX graph is not the plain one (other inputs, no hidden states)."""
        import onnxruntime
        from tokenizers import Tokenizer  # type: ignore[import-untyped]  # ships no type information

        session = onnxruntime.InferenceSession(str(spec.folder / "onnx" / "model.onnx"),
                                               sess_options=session_options(), providers=["CPUExecutionProvider"])
        inputs = {node.name for node in session.get_inputs()}
        outputs = {node.name: node.shape for node in session.get_outputs()}
        hidden = outputs.get(_HIDDEN_STATES)
        if not {"input_ids", "attention_mask"} <= inputs <= _MODEL_INPUTS or not hidden or not isinstance(hidden[-1], int):
            return None
        tokenizer = Tokenizer.from_file(str(spec.folder / "tokenizer.json"))
        pad_id = tokenizer.token_to_id(spec.pad_token)
        if pad_id is None:
            return None
        # What transformers sets for sentence-transformers' call (padding=True, truncation="longest_first").
        tokenizer.enable_truncation(max_length=spec.max_seq_length, stride=0, strategy="longest_first",
                                    direction=spec.truncation_side)
        tokenizer.enable_padding(direction=spec.padding_side, pad_id=pad_id, pad_type_id=0, pad_token=spec.pad_token)
        return cls(spec, tokenizer, session, int(hidden[-1]))

    def encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        """One L2-normalised float32 row per text. Texts are batched longest first, as sentence-transformers does,
        so a batch pads little; the rows come back in the order given."""
        order = sorted(range(len(texts)), key=lambda index: -len(texts[index]))
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(order), batch_size):
            chosen = order[start:start + batch_size]
            vectors[chosen] = self._encode_batch([texts[index] for index in chosen])
        return vectors

    def _encode_batch(self, texts: list[str]) -> np.ndarray:
        encodings = self._tokenizer.encode_batch(texts)
        features = {
            "input_ids": np.array([encoding.ids for encoding in encodings], dtype=np.int64),
            "attention_mask": np.array([encoding.attention_mask for encoding in encodings], dtype=np.int64),
            "token_type_ids": np.array([encoding.type_ids for encoding in encodings], dtype=np.int64),
        }
        (hidden,) = self._session.run([_HIDDEN_STATES], {name: features[name] for name in self._inputs})
        mask = features["attention_mask"].astype(np.float32)[:, :, None]
        pooled = (hidden * mask).sum(axis=1) / np.clip(mask.sum(axis=1), 1e-9, None)
        # Normalised even without a Normalize module: vecmem always asks sentence-transformers for unit vectors.
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return np.asarray(pooled / np.maximum(norms, 1e-12), dtype=np.float32)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _is_mean_pooling(config: Any) -> bool:
    """Mean over the attention mask, in the new (``pooling_mode``) or the old (``pooling_mode_*_tokens``) form."""
    if not isinstance(config, dict):
        return False
    if "pooling_mode" in config:
        mode = config["pooling_mode"]
        return bool(mode == "mean" or mode == ["mean"])
    flags = {key for key, value in config.items() if key.startswith("pooling_mode_") and value}
    return flags == {"pooling_mode_mean_tokens"}


def _only_known_values(config: dict[str, Any]) -> bool:
    for key, value in config.items():
        if key not in _KNOWN_TRANSFORMER_CONFIG:
            return False
        expected = _KNOWN_TRANSFORMER_CONFIG[key]
        if expected is not None and value != expected and not (key == "max_seq_length" and value is None):
            return False
    return True


def _has_prompts(config: Any) -> bool:
    """A prompt is prepended to texts (and may be left out of the pooling): that is sentence-transformers' work."""
    if not isinstance(config, dict):
        return True
    prompts = config.get("prompts") or {}
    return not isinstance(prompts, dict) or any(prompts.values()) or bool(config.get("default_prompt_name"))


def _max_seq_length(transformer_config: dict[str, Any], tokenizer_config: dict[str, Any],
                    model_config: dict[str, Any]) -> int | None:
    """sentence-transformers' rule: the configured max_seq_length, else the tokenizer's model_max_length capped
    at the model's max_position_embeddings."""
    explicit = transformer_config.get("max_seq_length")
    if isinstance(explicit, int):
        return explicit if 0 < explicit < _NO_LIMIT else None
    length = tokenizer_config.get("model_max_length", _NO_LIMIT)
    positions = model_config.get("max_position_embeddings")
    if isinstance(positions, int) and positions != -1:
        length = min(length, positions) if isinstance(length, (int, float)) else positions
    return int(length) if isinstance(length, (int, float)) and 0 < length < _NO_LIMIT else None
