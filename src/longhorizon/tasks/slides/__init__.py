"""Slide-deck task families ("slide decks"); grading helpers are shared with the document
families in ``longhorizon.tasks.documents``."""
