"""CLI subcommands of the training half (`longhorizon data ...`, `longhorizon train ...`).

Kept here so the training pipeline owns its commands; cli.py only calls ``add_commands``.
Heavy imports (torch, transformers, TRL) happen inside the command functions.
"""

from __future__ import annotations


def add_commands(sub) -> None:
    """Register the training subcommands on the top-level parser's subparsers."""
