"""File organisation families."""
