"""The calendar app."""
