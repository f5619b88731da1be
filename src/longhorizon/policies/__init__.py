"""Policies: oracle, null, OpenAI-compatible client, local transformers model."""
