"""Test helpers shipped with the package, so users and tests can run them without a model.

``standin_llm`` is an OpenAI-compatible chat-completions server on loopback whose replies come
from a Python "brain": the one part of the system (a hosted LLM) this machine cannot have.
"""

from longhorizon.testing.standin_llm import OracleBrain, ScriptedBrain, StandinLLM

__all__ = ["OracleBrain", "ScriptedBrain", "StandinLLM"]
