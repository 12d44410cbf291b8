"""Storage: where memories and their bookkeeping live.

The ``MemoryStore`` protocol (``base.py``) is everything the layers above ask of a store; ``InMemoryStore``
(``memory.py``, with what its clients share in ``memory_state.py``) is its reference implementation, which a
conformance suite (tests/conformance/) holds to the same behaviour as ``ChromaStore`` (``chroma/``: the real one,
embedded or on a server). ``state/`` is what processes share beside the memories: SQLite files or PostgreSQL, the
change feed, access statistics, chat sessions and the one-process lock. ``files.py`` keeps a store's files private.
"""
