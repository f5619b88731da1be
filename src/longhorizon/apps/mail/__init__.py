"""The mail app."""
