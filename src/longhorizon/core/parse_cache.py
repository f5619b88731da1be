"""Each file parsed once per grade, and the same bytes parsed once per process.

A Task's criteria are checked one after another over the same outputs, and each check reads
the files it needs (one slides family parsed its deck 42 times per grade). While
``Task.grade`` runs (``per_grade``), readers that go through ``parse_once`` share one parse
per (reader, file): the key is the file's identity and stat (device, inode, size, mtime,
ctime), so a file that changed is parsed again, and nothing outlives the grade. Outside a
grade (app tools, scripts) ``parse_once`` just parses.

``shared_parse`` goes further for readers that never change what they parse (the sheets app's
read tools, graders' workbooks): one parse per (reader, bytes), keyed by the bytes' digest, for
the whole process. The 8 episodes of a GSPO group fork the same inputs, and a deterministic
policy writes the same outputs: each is parsed once instead of 8 times. Equal bytes give an
equal parse, so this is a parse of what is on disk.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

_CACHE: ContextVar[dict | None] = ContextVar("longhorizon_parse_cache", default=None)

ENABLED = True
"""Benchmarks switch this off to measure grading as it was (every reader parses again)."""

SHARED = True
"""``shared_parse`` on; benchmarks and tests switch it off to compare with a parse per reader."""
SHARED_SIZE = 32
_SHARED: dict[tuple, Any] = {}
_SHARED_LOCK = threading.Lock()


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

    ``copy_result``: hand each caller its own deep copy (plain data a check may change; copied
    through pickle, ~8x faster than ``copy.deepcopy`` on a long document's blocks); False
    shares one object (a parsed workbook the checks only read). A load that raises is not
    kept: the next caller gets the same error the same way.
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
    return pickle.loads(pickle.dumps(cache[key], pickle.HIGHEST_PROTOCOL)) if copy_result else cache[key]


def shared_parse(kind: str, data: bytes, load: Callable[[Any], Any]) -> Any:
    """``load(BytesIO(data))``, shared by every caller with the same ``kind``, ``load`` and bytes
    (the most recent ``SHARED_SIZE`` kept). Callers only read the result, from any thread."""
    if not SHARED:
        return load(io.BytesIO(data))
    key = (kind, load, hashlib.blake2b(data, digest_size=20).digest())
    with _SHARED_LOCK:
        if key in _SHARED:
            _SHARED[key] = _SHARED.pop(key)  # most recently used last
            return _SHARED[key]
    obj = load(io.BytesIO(data))  # a load that raises is not kept
    with _SHARED_LOCK:
        _SHARED[key] = obj
        while len(_SHARED) > SHARED_SIZE:
            _SHARED.pop(next(iter(_SHARED)))
    return obj
