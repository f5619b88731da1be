"""Each file parsed once per grade.

A Task's criteria are checked one after another over the same outputs, and each check reads
the files it needs (one slides family parsed its deck 42 times per grade). While
``Task.grade`` runs (``per_grade``), readers that go through ``parse_once`` share one parse
per (reader, file): the key is the file's identity and stat (device, inode, size, mtime,
ctime), so a file that changed is parsed again, and nothing outlives the grade. Outside a
grade (app tools, scripts) ``parse_once`` just parses.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_CACHE: ContextVar[dict | None] = ContextVar("longhorizon_parse_cache", default=None)

ENABLED = True
"""Benchmarks switch this off to measure grading as it was (every reader parses again)."""


@contextmanager
def per_grade() -> Iterator[None]:
    """Share parses between the readers called inside (one grade: one thread, one context)."""
    token = _CACHE.set({} if ENABLED else None)
    try:
        yield
    finally:
        _CACHE.reset(token)


def parse_once(kind: str, path, load: Callable[[Any], Any], *, copy_result: bool = True) -> Any:
    """``load(path)``, or within a grade the result of the first such load of this file.

    ``copy_result``: hand each caller its own deep copy (plain data a check may change);
    False shares one object (a parsed workbook the checks only read). A load that raises is
    not kept: the next caller gets the same error the same way.
    """
    cache = _CACHE.get()
    if cache is None:
        return load(path)
    try:
        st = os.stat(path)
    except (OSError, TypeError, ValueError):
        return load(path)
    key = (kind, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in cache:
        cache[key] = load(path)
    return copy.deepcopy(cache[key]) if copy_result else cache[key]
