"""Serving models (vLLM in its own venv) and running external benchmarks against them."""
