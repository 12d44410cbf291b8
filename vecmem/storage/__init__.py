"""Storage: where memories and their bookkeeping live.

The ``MemoryStore`` protocol (``base.py``) is everything the layers above ask of a store; ``InMemoryStore``
(``memory.py``) is its reference implementation and ``ChromaStore`` (``chroma.py``) the real one, embedded or on
a server: ``chroma/client.py`` is the only chromadb importer and maps its errors by type, ``chroma/layout.py``
names collections and migrates layouts, ``chroma/search.py`` plans id-restricted searches. Beside them: the row layout in Chroma (``rows.py``), the
change feed (``changes.py``), the one-process lock (``lock.py``), access statistics (``access.py``) and chat
sessions (``sessions.py``), all SQLite through one helper (``sqlite.py``).
"""
