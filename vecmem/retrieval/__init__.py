"""Retrieval: embedders (the only sentence-transformers importer), the keyword index and tokenizer, the
per-process replica of a user's memories, fusion and the reranker, and the token budgeter (tiktoken)."""
