"""The Chroma store: the client and its errors, the rows, collection layouts and moves between
them, batched writes and searches."""
