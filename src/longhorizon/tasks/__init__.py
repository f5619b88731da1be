"""Task families, one package per category, one module per family; each registers itself."""
