"""The sheets app."""
