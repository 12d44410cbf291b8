"""Storage: where memories and their bookkeeping live.

The ``MemoryStore`` protocol (``base.py``) is everything the layers above ask of a store; ``InMemoryStore``
(``memory.py``) is its reference implementation and ``ChromaStore`` (``chroma.py``, the only chromadb
importer) the real one, embedded or on a server. Beside them: the row layout in Chroma (``rows.py``), the
change feed (``changes.py``), the one-process lock (``lock.py``), access statistics (``access.py``) and chat
sessions (``sessions.py``), all SQLite through one helper (``sqlite.py``).
"""
