"""Runs inside the BFCL venv (``.venvs/bfcl``): BFCL's own generation loop and checker.

Executed as a script by ``longhorizon.evaluate.bfcl`` (``python bfcl_driver.py CONFIG.json``),
never imported by longhorizon: it uses only the standard library and ``bfcl_eval``.

Why a driver and not ``bfcl generate``: BFCL only knows the models in its registry
(``MODEL_CONFIG_MAPPING``). We add one entry, ``REGISTRY_NAME``, that uses BFCL's own
``OpenAICompletionsHandler`` in function-calling mode; that handler reads ``OPENAI_BASE_URL`` and
``OPENAI_API_KEY``, so any OpenAI-compatible server is reachable. Generation and scoring are
then BFCL's ``_llm_response_generation.main`` and ``eval_runner.main``, unchanged. With a
``seed`` in the config the handler is a subclass that adds ``seed`` to every request and
changes nothing else (BFCL's handler sends none; vLLM seeds its per-request sampler with it).

The registry module imports every vendor's handler, and with them SDKs (anthropic, cohere,
qwen-agent, ...) that the OpenAI handler never touches. The venv leaves them out to stay small;
``_placeholder_sdks`` gives those imports empty modules so the registry loads. A handler that
needed one would fail loudly at its first call; ours never calls them.

CONFIG keys: mode ("run" or "score"), workdir (BFCL_PROJECT_ROOT), model (name sent to the
server), base_url, api_key, categories, limit (entries per category or null), temperature,
seed (sent with every request; null: none), threads. Writes WORKDIR/entries.json: [{"id", "category", "passed", "error_type", "infra_error"}].
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import re
import sys
import types
from pathlib import Path

# What BFCL writes as an entry's result when the request itself failed; these are the
# server's failures (unreachable, overloaded, timed out), not the model's, so they are taken
# out of the score and retried by the next run. Other errors (e.g. a 400 for a context
# overflow) are the model's outcome and stay failures, as BFCL counts them.
INFRA_ERROR = re.compile(r"^Error during inference: (Connection error|Request timed out|Error code: (5\d\d|429))")
REGISTRY_NAME = "longhorizon-openai-FC"  # no "_" or "/": BFCL's checker maps "_" back to "/"
VENDOR_SDKS = ("anthropic", "mistralai", "cohere", "google", "writerai", "qwen_agent", "boto3",
               "datamodel_code_generator")


class _PlaceholderType(type):
    """A class whose attributes are more such classes: usable as a class, a base, an error type
    or a namespace (``cohere.types.ToolV2``) in annotations and decorators at import time."""

    def __getattr__(cls, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return _PlaceholderType(name, (Exception,), {})


class _Placeholder(types.ModuleType):
    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _PlaceholderType(name, (Exception,), {"__module__": self.__name__})
        setattr(self, name, value)
        return value


class _PlaceholderFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots: set[str]):
        self.roots = roots

    def find_spec(self, fullname, path, target=None):
        if fullname.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        mod = _Placeholder(spec.name)
        mod.__path__ = []
        return mod

    def exec_module(self, module):
        pass


def _placeholder_sdks() -> list[str]:
    missing = {name for name in VENDOR_SDKS if importlib.util.find_spec(name) is None}
    if missing:
        sys.meta_path.append(_PlaceholderFinder(missing))
    return sorted(missing)


def _register(model: str, seed: int | None = None) -> None:
    from bfcl_eval.constants.model_config import MODEL_CONFIG_MAPPING, ModelConfig
    from bfcl_eval.model_handler.api_inference.openai_completion import OpenAICompletionsHandler

    handler = OpenAICompletionsHandler
    if seed is not None:
        class SeededHandler(OpenAICompletionsHandler):
            """BFCL's OpenAI handler with ``seed`` added to every request (all go through here)."""

            def generate_with_backoff(self, **kwargs):
                return super().generate_with_backoff(**kwargs, seed=seed)

        handler = SeededHandler
    MODEL_CONFIG_MAPPING[REGISTRY_NAME] = ModelConfig(
        model_name=model, display_name=f"{model} (FC, OpenAI-compatible endpoint)", url="", org="",
        license="", model_handler=handler, input_price=None, output_price=None,
        is_fc_model=True, underscore_to_dot=True,
    )


def _select_ids(categories: list[str], limit: int) -> dict[str, list[str]]:
    """The first ``limit`` scored entries of each category, plus the entries they depend on
    (memory categories replay a prerequisite conversation first)."""
    from bfcl_eval.utils import load_dataset_entry

    out = {}
    for cat in categories:
        entries = load_dataset_entry(cat)
        by_id = {e["id"]: e for e in entries}
        chosen = [e["id"] for e in entries if "prereq" not in e["id"]][:limit]
        todo, seen = list(chosen), set(chosen)
        while todo:
            for dep in by_id[todo.pop()].get("depends_on", []):
                if dep not in seen:
                    seen.add(dep)
                    todo.append(dep)
        out[cat] = [e["id"] for e in entries if e["id"] in seen]
    return out


def _drop_infra_errors(result_root: Path) -> int:
    """Remove entries whose request failed from BFCL's result files, so this run retries them
    (BFCL skips every id already in a result file)."""
    dropped = 0
    for path in result_root.rglob("*_result.json"):
        lines = path.read_text().splitlines()
        keep = [line for line in lines if line.strip() and not _infra_error(json.loads(line))]
        if len(keep) != len(lines):
            dropped += len(lines) - len(keep)
            path.write_text("".join(line + "\n" for line in keep))
    return dropped


def _infra_error(result: dict) -> str | None:
    r = result.get("result")
    return r if isinstance(r, str) and INFRA_ERROR.match(r) else None


def _generate(cfg: dict, workdir: Path) -> None:
    from bfcl_eval import _llm_response_generation as gen

    _drop_infra_errors(workdir / "result" / REGISTRY_NAME)
    run_ids = cfg.get("limit") is not None
    if run_ids:
        ids = _select_ids(cfg["categories"], cfg["limit"])
        (workdir / "test_case_ids_to_generate.json").write_text(json.dumps(ids, indent=1))
    args = argparse.Namespace(
        model=[REGISTRY_NAME], test_category=list(cfg["categories"]), temperature=cfg.get("temperature", 0.0),
        include_input_log=False, exclude_state_log=False, num_threads=cfg.get("threads", 1), num_gpus=1,
        backend="vllm", gpu_memory_utilization=0.9, result_dir=None, run_ids=run_ids, allow_overwrite=False,
        skip_server_setup=True, local_model_path=None, lora_modules=None, enable_lora=False, max_lora_rank=None,
    )
    gen.main(args)


def _score(cfg: dict, workdir: Path) -> list[dict]:
    from bfcl_eval.eval_checker import eval_runner
    from bfcl_eval.utils import load_file

    eval_runner.main([REGISTRY_NAME], list(cfg["categories"]), None, None, partial_eval=cfg.get("limit") is not None)
    entries = []
    result_root, score_root = workdir / "result" / REGISTRY_NAME, workdir / "score" / REGISTRY_NAME
    for cat in cfg["categories"]:
        results = sorted(result_root.rglob(f"BFCL_v4_{cat}_result.json"))
        scores = sorted(score_root.rglob(f"BFCL_v4_{cat}_score.json"))
        if not results:
            continue
        if not scores:
            raise SystemExit(f"BFCL wrote no score file for {cat}")
        failed = {e["id"]: e.get("error_type", "") for e in load_file(scores[0])[1:]}
        for r in load_file(results[0]):
            if "prereq" in r["id"]:
                continue
            entries.append({"id": r["id"], "category": cat, "passed": r["id"] not in failed,
                            "error_type": failed.get(r["id"]), "infra_error": _infra_error(r)})
    return entries


def main() -> None:
    cfg = json.loads(Path(sys.argv[1]).read_text())
    workdir = Path(cfg["workdir"]).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    os.environ["BFCL_PROJECT_ROOT"] = str(workdir)  # BFCL writes result/ and score/ here
    os.environ["OPENAI_BASE_URL"] = cfg.get("base_url") or "http://127.0.0.1:9/v1"
    os.environ["OPENAI_API_KEY"] = cfg.get("api_key") or "EMPTY"
    placeheld = _placeholder_sdks()
    _register(cfg.get("model") or "none", cfg.get("seed"))
    if cfg["mode"] == "run":
        _generate(cfg, workdir)
    entries = _score(cfg, workdir)
    (workdir / "entries.json").write_text(json.dumps({"entries": entries, "placeholder_sdks": placeheld}, indent=1))


if __name__ == "__main__":
    main()
