"""longhorizon: post-training and evaluation of long-horizon, multi-tool LLM agents."""

__version__ = "0.1.0"
