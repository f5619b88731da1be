"""The files app."""
