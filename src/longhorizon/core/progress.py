"""When to draw a progress bar: for a person at a terminal, never into a pipe, a log file or CI."""

from __future__ import annotations

import sys


def show_progress(quiet: bool = False) -> bool:
    """True when bars are wanted (not ``--quiet``) and stderr, where they go, is a terminal."""
    return not quiet and sys.stderr.isatty()


def no_library_bars() -> None:
    """The libraries underneath draw bars of their own (transformers loading and saving weights,
    datasets per ``map``, the hub per file): off, so a command's output is its own lines and
    its own bar. Those not installed are skipped (the core needs none of them)."""
    import importlib

    for module, off in (("transformers.utils.logging", "disable_progress_bar"),
                        ("datasets", "disable_progress_bars"),
                        ("huggingface_hub.utils", "disable_progress_bars")):
        try:
            getattr(importlib.import_module(module), off)()
        except (ImportError, AttributeError):
            pass
