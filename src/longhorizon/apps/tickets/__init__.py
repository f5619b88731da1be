"""The tickets app: a ticket tracker for support queues and project work, in one SQLite file."""
