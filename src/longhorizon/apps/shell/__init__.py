"""The shell app."""
