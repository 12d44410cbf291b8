"""``vecmem serve``: the HTTP API (app, schemas, responses), its security and API keys, and the panel."""
