"""Data conversion families: legacy exports in mixed formats turned into one normalised output."""
