"""``VecmemRetriever``: a LangChain retriever over a vecmem bank, for chains and agents that take one.

    from vecmem import MemoryBank, VecmemRetriever

    retriever = VecmemRetriever(bank=MemoryBank(), k=3, user_id="alice")
    retriever.invoke("what does alice drink?")          # -> [Document(page_content=..., metadata={"score": ...})]
    retriever.invoke("what does alice drink?", k=1, session_id="trip")   # per call: k, user_id, session_id, types

The only module that imports LangChain (``langchain_core``). Each document is one hit of ``MemoryBank.search``
(vecmem's ranking, scope and isolation: the user's global memories and the session's, never a superseded one),
best first: ``page_content`` the memory, ``id`` its id, ``metadata`` the score and its parts (``score``,
``similarity``, ``recency``, ``importance``, ``dense``, ``keyword``) and the memory's ``type``, ``tags``,
``session_id`` (None: global), ``source``, ``confidence`` and ``created_at`` (ISO 8601). ``ainvoke`` runs the
search in a worker thread, so the event loop never waits on the bank. Returned memories count as used (recency),
as a search does, unless ``record_access=False``. The arguments are checked when the retriever is made, with
vecmem's errors (``InvalidInputError`` naming the field).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from vecmem.bank.api import MemoryApi
from vecmem.models import MEMORY_TYPES, Hit
from vecmem.retrieval.query.parsed import searchable
from vecmem.validation import check_choice, require_positive_int, validate_identifier, validate_session_id

try:
    from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.retrievers import BaseRetriever
    from pydantic import SkipValidation
except ImportError as missing:  # pragma: no cover - the extra is installed wherever the tests run
    raise ImportError("VecmemRetriever needs LangChain: pip install 'vecmem[langchain]'") from missing

__all__ = ["VecmemRetriever"]


class VecmemRetriever(BaseRetriever):
    """The ``k`` memories of ``user_id`` (default: the bank's default user) that ``MemoryBank.search`` ranks first
    for a query, as LangChain documents; ``session_id`` adds that session's memories to the global ones, ``types``
    keeps only those types. Any of them may be given again per call (``invoke(query, k=1)``)."""

    bank: SkipValidation[MemoryApi]
    k: int = 4
    user_id: str | None = None
    session_id: str | None = None
    types: list[str] | None = None
    record_access: bool = True

    def __init__(self, **fields: Any) -> None:
        """Checks ``k``, ``user_id``, ``session_id`` and ``types`` as given, before pydantic would coerce them (it
        would take ``k=True`` for 1) or wrap vecmem's error in its own."""
        self._arguments(fields.get("k", 4), fields.get("user_id"), fields.get("session_id"), fields.get("types"))
        super().__init__(**fields)

    @staticmethod
    def _arguments(k: int, user_id: str | None, session_id: str | None,
                   types: Sequence[str] | None) -> dict[str, Any]:
        """The search's arguments, checked: vecmem's errors here, not a pydantic ValidationError later."""
        if isinstance(types, str):
            types = [types]
        return {"k": require_positive_int("k", k),
                "user_id": None if user_id is None else validate_identifier("user_id", user_id),
                "session_id": None if session_id is None else validate_session_id(session_id),
                "types": None if types is None else [check_choice("types", t, MEMORY_TYPES) for t in types]}

    def _search(self, query: str, k: int | None, user_id: str | None, session_id: str | None,
                types: Sequence[str] | None) -> list[Document]:
        arguments = self._arguments(self.k if k is None else k, self.user_id if user_id is None else user_id,
                                    self.session_id if session_id is None else session_id,
                                    self.types if types is None else types)
        count = arguments.pop("k")
        hits = self.bank.search(searchable(query), count, record_access=self.record_access, **arguments)
        return [_document(hit) for hit in hits]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: int | None = None, user_id: str | None = None, session_id: str | None = None,
                                types: Sequence[str] | None = None) -> list[Document]:
        return self._search(query, k, user_id, session_id, types)

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       k: int | None = None, user_id: str | None = None,
                                       session_id: str | None = None,
                                       types: Sequence[str] | None = None) -> list[Document]:
        return await asyncio.to_thread(self._search, query, k, user_id, session_id, types)


def _document(hit: Hit) -> Document:
    record = hit.record
    return Document(id=hit.id, page_content=hit.content, metadata={
        "id": hit.id, "type": hit.type, "score": hit.score, "similarity": hit.similarity, "recency": hit.recency,
        "importance": hit.importance, "dense": hit.dense, "keyword": hit.keyword, "tags": list(record.tags),
        "session_id": record.session_id, "source": record.source, "confidence": record.confidence,
        "created_at": record.created_at.isoformat(),
    })
