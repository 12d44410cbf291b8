"""Interfaces over the facade: the ``vecmem`` command, the chat REPL, the HTTP API with its panel, and the
MCP server. Nothing here is imported by the layers below, and each imports its SDK only when it runs."""
