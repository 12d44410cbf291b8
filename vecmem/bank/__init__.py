"""The bank: the facade every surface goes through (``MemoryBank``), the one declaration of its API
(``MemoryApi``), and the service layer under it: the one write path, opening a store, intake,
edits and supersession chains, listing, erasure, review and learning from messages."""
