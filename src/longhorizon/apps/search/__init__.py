"""The search app: a read-only full-text search engine over a document archive."""
