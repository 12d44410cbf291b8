"""``vecmem proxy``: an OpenAI-compatible chat endpoint that adds memory to every request."""
