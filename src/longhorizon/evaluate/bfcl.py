"""BFCL-V4 against any OpenAI-compatible endpoint, with BFCL's own harness and checker.

BFCL (the ``bfcl-eval`` wheel) pins numpy 1.26 and pulls sentence-transformers, so it lives in
its own venv, ``.venvs/bfcl`` (``serve.venvs``), made on first use and reused: the wheel with ``--no-deps``
plus only what its generation loop and checker import (``REQUIREMENTS``). The work inside that
venv is ``bfcl_driver.py``; this module prepares its config, runs it, and turns BFCL's result
and score files into ``results.json`` (see ``longhorizon.evaluate.results``).

Categories: every scoring category that runs offline. Not ``web_search_*`` (live web search
through SerpAPI) nor ``memory_vector`` (downloads a sentence-transformers model); not
``format_sensitivity`` either (BFCL scores it for prompt-mode models only, and we call the
server in function-calling mode).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from longhorizon.core.errors import InfraError, UsageError
from longhorizon.core.json_files import read_json
from longhorizon.serve import venvs as side_venvs

BFCL_EVAL = "bfcl-eval==2026.3.23"
# What BFCL's generation loop and checker import, pinned as measured; the wheel's own pins kept.
REQUIREMENTS = (
    "numpy==1.26.4", "pandas==3.0.6", "pydantic==2.14.4", "python-dotenv==1.2.4", "requests==2.34.2",
    "tqdm==4.70.1", "openai==3.57.0", "httpx==0.28.1", "overrides==7.7.0", "tenacity==9.2.1",
    "filelock==3.20.0", "mpmath==1.3.0", "rank-bm25==0.2.2",
    "tree-sitter==0.21.3", "tree-sitter-java==0.21.0", "tree-sitter-javascript==0.21.4",
)
OFFLINE_CATEGORIES = (
    "simple_python", "simple_java", "simple_javascript", "multiple", "parallel", "parallel_multiple",
    "irrelevance", "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple",
    "live_irrelevance", "live_relevance", "multi_turn_base", "multi_turn_miss_func",
    "multi_turn_miss_param", "multi_turn_long_context", "memory_kv", "memory_rec_sum",
)
GROUPS = {
    "single_turn": OFFLINE_CATEGORIES[:13], "non_live": OFFLINE_CATEGORIES[:7], "live": OFFLINE_CATEGORIES[7:13],
    "multi_turn": OFFLINE_CATEGORIES[13:17], "memory": OFFLINE_CATEGORIES[17:], "all": OFFLINE_CATEGORIES,
}
DRIVER = Path(__file__).with_name("bfcl_driver.py")


STEPS = [["install", "--no-deps", BFCL_EVAL], ["install", *REQUIREMENTS]]
"""The BFCL venv's pip steps: the wheel without its pins, then only what it imports."""


def ensure_venv(quiet: bool = False) -> Path:
    """The BFCL venv's python, built first if missing or stale (``serve.venvs``: one builder
    and one lock for every side venv)."""
    return side_venvs.ensure_venv("bfcl", STEPS, quiet=quiet)


def parse_categories(names: list[str] | None) -> list[str]:
    """Category names or group names (``single_turn``, ``live``, ``multi_turn``, ``memory``, ``all``)."""
    out: list[str] = []
    for name in names or ["all"]:
        if name in GROUPS:
            out += [c for c in GROUPS[name] if c not in out]
        elif name in OFFLINE_CATEGORIES:
            out += [name] if name not in out else []
        elif name.startswith("web_search") or name in ("memory_vector", "format_sensitivity"):
            raise UsageError(f"BFCL category {name!r} does not run offline here; choose from "
                             f"{', '.join(OFFLINE_CATEGORIES)}")
        else:
            raise UsageError(f"unknown BFCL category {name!r}; choose from {', '.join(OFFLINE_CATEGORIES)} "
                             f"or a group ({', '.join(GROUPS)})")
    return out


def run_driver(cfg: dict, python: Path, quiet: bool = False) -> dict:
    """Run ``bfcl_driver.py`` in the BFCL venv on CFG; its ``entries.json`` as a dict."""
    work = Path(cfg["workdir"])
    work.mkdir(parents=True, exist_ok=True)
    cfg_path = work / "driver_config.json"
    cfg_path.write_text(json.dumps(cfg, indent=1))
    log = work / "bfcl.log"
    with log.open("w") as fh:
        # BFCL prints its own progress bars on stderr; shown live unless quiet, always logged.
        done = subprocess.run([str(python), str(DRIVER), str(cfg_path)], stdout=fh,
                              stderr=fh if quiet else None, env={**os.environ, "PYTHONPATH": ""})
    if done.returncode != 0:
        tail = log.read_text().strip().splitlines()[-3:]
        raise InfraError(f"BFCL's harness failed (exit {done.returncode}; log {log}): {' | '.join(tail)}")
    return read_entries(work / "entries.json")


def read_entries(path: Path) -> dict:
    """The driver's ``entries.json``, each entry checked and each id kept once (the first;
    ``duplicates_dropped`` counts the rest). A file of the wrong shape is an InfraError: the
    harness wrote it."""
    try:
        got = read_json(path)
    except UsageError as exc:
        raise InfraError(f"BFCL's harness wrote an unreadable entries file: {exc}") from None
    if not isinstance(got, dict) or not isinstance(got.get("entries"), list):
        raise InfraError(f"{path} is not the driver's entries file (no 'entries' list)")
    entries, seen = [], set()
    for i, e in enumerate(got["entries"]):
        if not (isinstance(e, dict) and isinstance(e.get("id"), str) and isinstance(e.get("category"), str)
                and (e.get("infra_error") or "passed" in e)):
            raise InfraError(f"{path}: entry {i} is malformed (needs 'id', 'category' and 'passed' or 'infra_error')")
        if e["id"] not in seen:
            seen.add(e["id"])
            entries.append(e)
    return {**got, "entries": entries, "duplicates_dropped": len(got["entries"]) - len(entries)}


def run_bfcl(base_url: str, model: str, categories: list[str], out: Path, limit: int | None = None,
             threads: int = 4, temperature: float = 0.0, api_key: str | None = None,
             quiet: bool = False, seed: int | None = 0, reproducible: bool = False) -> dict:
    """Generate with BFCL's harness against BASE_URL, score with its checker, write
    OUT/results.json and OUT/results.md; the results dict. BFCL's own files stay in OUT/bfcl/
    (rerunning the same command reuses the answers already generated).

    Greedy by default: temperature 0 (vLLM's true greedy; BFCL's own CLI defaults to 0.001,
    at which vLLM samples) and ``seed`` sent with every request. ``reproducible``: one request
    in flight (``threads`` 1), so no request's numerics depend on what else the server batches;
    recorded in the results' meta either way."""
    if reproducible and threads != 1:
        raise UsageError("--reproducible sends one request at a time: drop --threads (or give 1)")
    from longhorizon.evaluate.results import write_results

    python = ensure_venv(quiet=quiet)
    cfg = {"mode": "run", "workdir": str((out / "bfcl").resolve()), "model": model, "base_url": base_url,
           "api_key": api_key or os.environ.get("OPENAI_API_KEY") or "EMPTY", "categories": categories,
           "limit": limit, "threads": threads, "temperature": temperature, "seed": seed}
    got = run_driver(cfg, python, quiet=quiet)
    infra = [e for e in got["entries"] if e.get("infra_error")]
    entries = [{"id": e["id"], "category": e["category"], "passed": bool(e["passed"]),
                "reward": float(bool(e["passed"])), "error_type": e.get("error_type")}
               for e in got["entries"] if not e.get("infra_error")]
    meta = {"base_url": base_url, "categories": categories, "limit": limit, "harness": BFCL_EVAL,
            "mode": "function calling (BFCL's OpenAICompletionsHandler)", "temperature": temperature,
            "seed": seed, "threads": threads, "reproducible": reproducible,
            "infra_errors": len(infra), "complete": not infra,
            **({"duplicates_dropped": got["duplicates_dropped"]} if got.get("duplicates_dropped") else {})}
    res = write_results(out, "bfcl", model, entries, meta)
    if infra:
        raise InfraError(f"{len(infra)} of {len(got['entries'])} BFCL entries never reached the model "
                         f"({infra[0]['infra_error'][:120]}); they are left out of {out / 'results.json'} "
                         "(marked incomplete); rerun the same command to retry them")
    return res
