"""Interfaces over the bank: the ``vecmem`` command (cli/), the chat REPL (chat.py), the HTTP API with its panel
(http/), the MCP server (mcp_server.py), the chat proxy (proxy/), the owner of an embedded store that serves the
other processes (owner/) and the framework adapters (integrations/). Nothing here is imported by the layers
below, and each imports its SDK only when it runs; stopping.py says how the programs that stay stop."""
