"""Keyword tokens of Chinese-and-Latin text.

* Latin text: lowercase words, a possessive 's dropped, English stopwords removed, Snowball-stemmed
  (PyStemmer), so "Caroline's paintings" and "Caroline painted" share "carolin" and "paint".
* Chinese: jieba words (stopwords and particles removed) plus character bigrams: every bigram inside a word,
  and the bigram across two neighbouring words when neither is a stopword. Bigrams catch a word jieba segments
  differently in the query and in the memory (杭州市 / 杭州, 西湖区 / 西湖 区) or a name it leaves as single
  characters, and lift Chinese keyword recall well above jieba's words alone. A bigram that reaches into a
  stopword is an accident of adjacency, not a word: 写一 (写|一个) and 我写 (我|写) in "帮我写一个 sleep 函数"
  ranked a memory that says "写一个前端" first. On MADial-Bench zh this rule recalls about as well as bigrams of
  whole runs (the rule before) and as bigrams inside words only, which give the characters of an unknown name no
  bigram (the figures: docs/benchmarks.md, *Why retrieval is built as it is*). A bigram that is itself a
  stopword (一个, 什么, 我们) names no topic and is no token either.

Which characters are Chinese is ``vecmem/text.py``'s one definition, shared with the memory hit rate, the
offline rules and the summaries, so a query, a memory and an answer are split alike.

Each memory is found by its content, tags and ``context`` (text kept only for retrieval: the turns around it,
the message it was extracted from). Its tokens are computed once at write time and stored with the memory, so
an index is rebuilt from the store without re-tokenizing.

**jieba's dictionary.** Before it cuts its first text, jieba builds a prefix dictionary (every word of its word
list and every prefix of one) and caches it with marshal in the system temp folder, which is cleaned from time to
time; reading that cache takes about as long as building it. Text without Chinese never loads it. Once a bank
names a file (``keep_dictionary_in``: ``Settings.segmenter_cache``, in VECMEM_HOME), the dictionary is built once
and kept there as plain arrays (the words as one UTF-8 text, their counts as integers, jieba's version in a
header: an ``.npz`` read with ``allow_pickle=False``, so no code runs from it), which a new process reads in a
fraction of that time (docs/benchmarks.md); a file of another jieba version, or one that does not read, is built
again. jieba's own cache is then neither read nor written.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Iterable
from itertools import pairwise
from pathlib import Path
from typing import Any

import numpy as np

from vecmem.models import MemoryRecord
from vecmem.retrieval.query.speakers import ADDRESS, split_addresses
from vecmem.storage.files import replace_atomically
from vecmem.text import CJK_RUN, char_bigrams, cjk_runs, has_cjk

__all__ = ["keep_dictionary_in", "matched_terms", "memory_tokens", "read_dictionary", "recency_weights",
           "terms", "tokenize", "warm_up", "write_dictionary"]

log = logging.getLogger(__name__)

_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
_ZH_STOPWORDS = frozenset(
    "的 了 是 我 你 他 她 它 在 和 与 也 都 就 有 吗 呢 吧 啊 呀 哦 嗯 这 那 个 一 不 很 会 要 说 对 好 没 着 过 给 让 还 把 被 "
    "到 去 来 上 下 们 自己 什么 怎么 可以 我们 你们 他们 一个 一下 真的 感觉 觉得 非常 真是 哈哈 吗 嘛 啦 而且 但是 因为 所以".split()
)
# Lucene's English stop set, as bm25s ships it (bm25s.stopwords.STOPWORDS_EN; test_lexical checks they agree),
# held here so that the tokenizer does not import the BM25 library
EN_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these "
    "they this to was will with".split()
)
_lock = threading.Lock()  # the tools below load once, whichever thread asks first
_tools: dict[str, object] = {}
_dictionary_file: list[Path] = []  # where jieba's dictionary is kept (keep_dictionary_in): the first bank's choice
_DICTIONARY_FORMAT = 1


def _stemmer() -> object | None:
    with _lock:
        if "stemmer" not in _tools:
            try:
                import Stemmer

                _tools["stemmer"] = Stemmer.Stemmer("english")
            except ImportError:  # stemming is an improvement, not a requirement
                _tools["stemmer"] = None
        return _tools["stemmer"]


def _jieba() -> object:
    with _lock:
        if "jieba" not in _tools:
            import jieba

            jieba.setLogLevel(logging.WARNING)
            if _dictionary_file:
                _load_dictionary(jieba, _dictionary_file[0])
            _tools["jieba"] = jieba
        return _tools["jieba"]


def keep_dictionary_in(path: Path) -> None:
    """Keep jieba's dictionary in the file ``path`` (see the module docstring). The process's first call decides:
    a process loads the dictionary once, whichever store it then opens."""
    with _lock:
        if not _dictionary_file:
            _dictionary_file.append(path)


def _load_dictionary(jieba: Any, path: Path) -> None:
    """Give jieba its prefix dictionary from ``path``, building it (and writing ``path``) when the file is missing,
    of another jieba version or unreadable. Left to jieba when something chose another dictionary already."""
    segmenter = jieba.dt
    if segmenter.initialized or segmenter.dictionary is not None:
        return
    version = str(getattr(jieba, "__version__", "unknown"))
    loaded = read_dictionary(path, version)
    if loaded is None:
        loaded = segmenter.gen_pfdict(segmenter.get_dict_file())  # what jieba.initialize builds: (FREQ, total)
        write_dictionary(path, version, *loaded)
    with segmenter.lock:
        segmenter.FREQ, segmenter.total = loaded
        segmenter.initialized = True


def read_dictionary(path: Path, version: str) -> tuple[dict[str, int], int] | None:
    """jieba's (FREQ, total) as kept in ``path`` for jieba ``version``; None when missing, of another version or
    damaged (the caller builds it again)."""
    try:
        with np.load(path, allow_pickle=False) as arrays:
            header = json.loads(bytes(arrays["header"]).decode("utf-8"))
            total = header.get("total")
            if header.get("format") != _DICTIONARY_FORMAT or header.get("jieba") != version or type(total) is not int:
                return None  # another jieba's words, or another format: built again, silently
            words = bytes(arrays["words"]).decode("utf-8").split("\n")
            counts = arrays["counts"].tolist()
    except FileNotFoundError:
        return None
    except Exception as exc:  # noqa: BLE001  # a damaged file (zip, CRC, JSON, UTF-8 errors): build it again
        log.warning("vecmem: jieba's dictionary in %s does not read (%s); building it again", path, exc)
        return None
    if len(words) != len(counts):
        return None
    return dict(zip(words, counts, strict=True)), total


def write_dictionary(path: Path, version: str, frequencies: dict[str, int], total: int) -> None:
    """Keep jieba's (FREQ, total) in ``path``: written beside it and renamed over it, so a reader sees a whole
    file or none. A folder that cannot be written costs the next process a build, nothing more."""
    header = json.dumps({"format": _DICTIONARY_FORMAT, "jieba": version, "total": total}).encode("utf-8")
    try:
        replace_atomically(path, lambda out: np.savez(
            out, allow_pickle=False, header=np.frombuffer(header, dtype=np.uint8),
            words=np.frombuffer("\n".join(frequencies).encode("utf-8"), dtype=np.uint8),
            counts=np.fromiter(frequencies.values(), dtype=np.int64, count=len(frequencies))))
    except OSError as exc:
        log.debug("could not keep jieba's dictionary in %s: %s", path, exc)


def warm_up() -> None:
    """Load what tokenizing needs (jieba's dictionary takes most of a second) before the first query needs it."""
    _stemmer()
    _jieba().lcut("预热")  # type: ignore[attr-defined]


def tokenize(text: str) -> list[str]:
    """Keyword tokens of any mix of Chinese and Latin text (see the module docstring)."""
    return [token for _, token in terms(text)]


def terms(text: str) -> list[tuple[str, str]]:
    """``tokenize``'s tokens, in the same order, each with the text it was made from: a Latin word as written
    (before stemming, in its own case: "Paintings" for "paint"), a Chinese word or bigram as itself. What a hit's
    matched terms show a person: the words of the query, not their stems."""
    lowered = text.lower()
    latin = CJK_RUN.sub(lambda run: " " * len(run.group()), lowered)  # Chinese out, every word in its place
    words = [(found.start(), word[:-2] if word.endswith("'s") else word) for found in _WORD.finditer(latin)
             if (word := found.group())]
    words = [(start, word) for start, word in words if word and word not in EN_STOPWORDS]
    written = text if len(text) == len(lowered) else lowered  # lower() moves a few letters (İ is two characters)
    stemmer = _stemmer()
    plain = [word for _, word in words]
    stems = stemmer.stemWords(plain) if stemmer is not None else plain  # type: ignore[attr-defined]
    found = [(written[start : start + len(word)], stem) for (start, word), stem in zip(words, stems, strict=True)]
    runs = cjk_runs(lowered)
    if runs:
        jieba = _jieba()
        for run in runs:
            segmented = jieba.lcut(run)  # type: ignore[attr-defined]
            found.extend((w, w) for w in segmented if w not in _ZH_STOPWORDS)
            found.extend((b, b) for b in _bigrams(segmented) if b not in _ZH_STOPWORDS)
    return found


def matched_terms(query: str, asked: Iterable[tuple[str, str]], tokens: Iterable[str]) -> tuple[str, ...]:
    """The terms of ``query`` (``asked``: its ``terms``) whose token a memory's ``tokens`` hold (its content, tags
    and context), as the query wrote them, in its order, each once: why the keyword side found it. Of the Chinese
    ones, only those that show a character of the query no longer one shows already: 西湖区 matched says its
    bigrams 西湖 and 湖区 did, and 杭州 with 西湖区 say the bigram 州西 across them did."""
    held = set(tokens)
    found = list(dict.fromkeys(surface for surface, token in asked if token in held))
    lowered, covered, shown = query.lower(), set[int](), set[str]()
    for term in sorted((term for term in found if has_cjk(term)), key=len, reverse=True):
        spots = {start + i for start in _starts(lowered, term) for i in range(len(term))}
        if not spots <= covered:
            shown.add(term)
            covered |= spots
    return tuple(term for term in found if term in shown or not has_cjk(term))


def _starts(text: str, part: str) -> list[int]:
    """Where ``part`` occurs in ``text``, overlapping occurrences included."""
    found, start = [], text.find(part)
    while start >= 0:
        found.append(start)
        start = text.find(part, start + 1)
    return found


def _bigrams(words: list[str]) -> list[str]:
    """The character bigrams of a run of Chinese segmented into ``words``: those inside each word, and the one
    across two neighbouring words unless either is a stopword (see the module docstring)."""
    found = [bigram for word in words for bigram in char_bigrams(word)]
    found.extend(left[-1] + right[0] for left, right in pairwise(words)
                 if left not in _ZH_STOPWORDS and right not in _ZH_STOPWORDS)
    return found


def memory_tokens(record: MemoryRecord) -> list[str]:
    """What a memory is found by: its content, tags and retrieval context. In a turn of a conversation between
    people (a memory whose provenance names its speaker), a name the turn (or its context) addresses is an
    address token, not the name's (speakers.py)."""
    text = " ".join([record.content, *record.tags, record.context])
    speaker = None if record.provenance is None else record.provenance.speaker
    if speaker is None:
        return tokenize(text)
    plain, addressed = split_addresses(text, speaker)
    return tokenize(plain) + [ADDRESS + token for token in tokenize(" ".join(addressed))]


def recency_weights(count: int, decay: float) -> np.ndarray:
    """Weights of ``count`` utterances, the last weighing 1 and each earlier one ``decay`` times less."""
    return np.array([decay ** (count - 1 - i) for i in range(count)], dtype=np.float64)
