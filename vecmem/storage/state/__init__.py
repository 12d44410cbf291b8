"""The state beside the memories that processes share: SQLite files or PostgreSQL (database,
backend), the change feed, access statistics, conversation sessions and the store lock."""
