"""Task families, one package per category, one module per family; each registers itself
with ``tasks.registry`` (which finds them all and holds the suite's size and holdout families)."""
