"""The `sql` app: a read-only analytics database (SQLite) the agent explores and queries."""
