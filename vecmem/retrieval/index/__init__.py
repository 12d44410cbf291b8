"""What a process holds to search one user's memories fast: the BM25 keyword index and its
catalogue (the replica), the held vectors, and the replica saved beside the store."""
