"""Retrieval: the ``Retriever`` (retriever.py) that fuses the dense and keyword sides (fusion.py), reads what a
similarity means (relevance.py) and reranks by the blend (rank.py); the token budgeter (budget.py, tiktoken).
Beside them: ``query/`` reads a query once, ``embedding/`` holds the models and their calibration, and
``index/`` what a process holds to search a user's memories fast."""
