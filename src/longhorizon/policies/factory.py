"""Builds a Policy from its name and the CLI's options (lazy imports keep the core light)."""

from __future__ import annotations

import importlib
import inspect
import os
import re
import sys
import traceback
from pathlib import Path

from longhorizon.core.errors import UsageError

BUILT_IN = ("oracle", "hasty", "null", "openai", "served", "local")
"""Policies named by a word; ``adversary:NAME`` is one of the suite's junk policies
(policies/adversaries.py); anything else is a ``module:factory`` spec (``load_policy``)."""
ADVERSARY = "adversary:"
FACTORY_OPTIONS = ("model", "base_url", "api_key", "temperature", "top_p", "max_tokens", "seed", "extra_body")
"""Keyword arguments a ``module:factory`` is called with (None where the run was not given them)."""
_SPEC = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")

LONGEST_ORACLE_REPLY = 12_289
"""Tokens of the suite's longest legitimate reply: the oracle's export in timesheet_json_export
(27,443 characters of JSON), under SmolLM2's tokenizer (benchmarks/longest_oracle_reply.py)."""
DEFAULT_MAX_TOKENS = 16_384
"""Tokens per reply of the local policy unless told: above ``LONGEST_ORACLE_REPLY`` with a
third to spare (and within the model's context, whatever is left of it). The openai policy
sends no ``max_tokens`` unless told, so a server allows what its context leaves (vLLM refuses a
``max_tokens`` that does not fit beside the prompt, so no fixed default fits every server)."""


def make_policy(name: str, *, model=None, base_url=None, temperature=0.0, top_p=1.0,
                max_tokens=None, seed=0, api_key=None, extra_body=None, token_data=False,
                context_policy=None, max_context=None, tokenizer=None, server_context=None):
    """``max_tokens``: tokens per reply (None: none sent to a served model; ``DEFAULT_MAX_TOKENS``
    for the local one). A reply cut there is answered as a cut (env/episode.py).
    ``context_policy`` ("elide-oldest", with ``max_context`` prompt tokens; policies/context.py)
    applies to the model policies; the openai policy counts tokens with ``tokenizer`` (a folder),
    by default ``model`` when that is a folder. ``served`` (token in / token out over
    /v1/completions) renders with ``tokenizer`` and keeps prompts within ``server_context``."""
    context = context_policy not in (None, "none")
    if name.startswith(ADVERSARY):
        if context:
            raise UsageError(f"--context-policy applies to the openai and local policies, not {name!r}")
        from longhorizon.policies.adversaries import ADVERSARIES

        cls = ADVERSARIES[check_spec(name).removeprefix(ADVERSARY)]
        return cls(seed=seed) if "seed" in inspect.signature(cls).parameters else cls()
    if name not in BUILT_IN:
        if context:
            raise UsageError(f"--context-policy applies to the openai and local policies, not {name!r}")
        return load_policy(name, model=model, base_url=base_url, api_key=api_key, temperature=temperature,
                           top_p=top_p, max_tokens=max_tokens, seed=seed, extra_body=extra_body)
    if not context and max_context:
        raise UsageError("--max-context is the context policy's budget: give --context-policy elide-oldest too")
    if context and name not in ("openai", "local"):
        raise UsageError(f"--context-policy applies to the openai and local policies, not {name!r}")
    if name == "oracle":
        from longhorizon.policies.scripted import OraclePolicy

        return OraclePolicy()
    if name == "hasty":
        from longhorizon.policies.scripted import HastyOraclePolicy

        return HastyOraclePolicy()
    if name == "null":
        from longhorizon.policies.scripted import NullPolicy

        return NullPolicy()
    if name == "openai":
        if not base_url or not model:
            raise UsageError("--policy openai needs --base-url and --model")
        from longhorizon.policies.openai_client import OpenAIPolicy

        return OpenAIPolicy(base_url=base_url, model=model, temperature=temperature, top_p=top_p,
                            max_tokens=max_tokens, seed=seed, api_key=api_key, extra_body=extra_body,
                            logprobs=token_data, return_token_ids=token_data,
                            context=_served_context(context_policy, max_context, tokenizer or model) if context else None)
    if name == "served":
        if not base_url or not model or not tokenizer:
            raise UsageError("--policy served needs --base-url, the served model's name and its tokenizer folder")
        from longhorizon.policies.served_tokens import ServedTokensPolicy

        return ServedTokensPolicy(base_url, model, tokenizer, temperature=temperature, top_p=top_p,
                                  max_new_tokens=max_tokens or DEFAULT_MAX_TOKENS, seed=seed,
                                  max_context=server_context, api_key=api_key, extra_body=extra_body)
    if name == "local":
        if not model:
            raise UsageError("--policy local needs --model (a transformers model folder or name)")
        try:
            from longhorizon.policies.local_model import LocalModelPolicy
        except ImportError as exc:
            raise UsageError(f"--policy local needs the model extra (pip install 'longhorizon[model]'): {exc}") from None
        from longhorizon.core.progress import no_library_bars

        no_library_bars()  # transformers' weight-loading bar: the run's own bar is the one to watch
        try:
            return LocalModelPolicy(model, temperature=temperature, top_p=top_p,
                                    max_new_tokens=max_tokens or DEFAULT_MAX_TOKENS, seed=seed,
                                    context_policy=context_policy, context_limit=max_context)
        except ValueError as exc:
            if context:
                raise UsageError(str(exc)) from None
            raise
    raise UsageError(f"unknown policy {name!r}")  # unreachable: BUILT_IN names are all handled above


def check_spec(name: str) -> str:
    """``name`` if it is a built-in policy, ``adversary:NAME`` or has the shape ``package.module:factory``."""
    if name.startswith(ADVERSARY):
        from longhorizon.policies.adversaries import ADVERSARIES

        if name.removeprefix(ADVERSARY) in ADVERSARIES:
            return name
        raise UsageError(f"unknown adversary {name.removeprefix(ADVERSARY)!r}: one of {', '.join(ADVERSARIES)}")
    if name in BUILT_IN or _SPEC.match(name):
        return name
    raise UsageError(f"unknown policy {name!r}: one of {', '.join(BUILT_IN)}, adversary:NAME, or MODULE:FACTORY "
                     "(e.g. examples.first_agent:make) for your own")


def load_policy(spec: str, **options):
    """Your own Policy, like tau2's agent registry: imports MODULE (from the current folder or
    PYTHONPATH), calls ``FACTORY(**options)`` (``FACTORY_OPTIONS``, from the run's flags) and
    checks that what comes back follows core/policy.py. Every failure is one UsageError line."""
    module_name, _, attr = check_spec(spec).partition(":")
    here = os.getcwd()
    added = here not in sys.path
    if added:  # as `python -m` would: the user's agent usually sits in the folder they run from
        sys.path.insert(0, here)
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name) and module_name[len(exc.name):][:1] in ("", "."):
            raise UsageError(f"--policy {spec}: no module named {exc.name!r} in the current folder or on "
                             "PYTHONPATH") from None
        raise UsageError(f"--policy {spec}: importing {module_name} failed: {_where(exc)}") from None
    except Exception as exc:  # the user's module is broken: say where, in one line
        raise UsageError(f"--policy {spec}: importing {module_name} failed: {_where(exc)}") from None
    finally:
        if added:
            sys.path.remove(here)
    factory = module
    for part in attr.split("."):
        if not hasattr(factory, part):
            raise UsageError(f"--policy {spec}: module {module_name} has no {attr!r}")
        factory = getattr(factory, part)
    if not callable(factory):
        raise UsageError(f"--policy {spec}: {attr} = {factory!r:.40} is not a callable factory")
    options = {k: options.get(k) for k in FACTORY_OPTIONS}
    try:
        inspect.signature(factory).bind(**options)
    except TypeError:
        raise UsageError(f"--policy {spec}: {attr} must accept the keyword arguments {', '.join(FACTORY_OPTIONS)} "
                         "(e.g. `def make(**options)`)") from None
    except ValueError:  # no signature to read (some builtins): let the call say
        pass
    try:
        policy = factory(**options)
    except Exception as exc:
        raise UsageError(f"--policy {spec}: {attr}(...) failed: {_where(exc)}") from None
    if not inspect.iscoroutinefunction(getattr(policy, "act", None)) or not callable(getattr(policy, "describe", None)):
        raise UsageError(f"--policy {spec}: {attr}(...) returned {type(policy).__name__}, not a Policy "
                         "(needs `async def act(self, messages, tools, ctx)` and `describe()`; core/policy.py)")
    described = policy.describe()
    if not isinstance(described, dict):
        raise UsageError(f"--policy {spec}: describe() returned {type(described).__name__}, not a dict "
                         "(it is recorded in every trajectory)")
    return policy


def _where(exc: BaseException) -> str:
    """``Type: message (file:line)`` of the innermost frame, one line."""
    frames = traceback.extract_tb(exc.__traceback__)
    at = f" ({frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}{at}"


def _served_context(kind: str, max_context: int | None, tokenizer: str):
    """The served policy's context policy, counting with the tokenizer in folder ``tokenizer``."""
    from longhorizon.policies.context import make_context_policy

    if not Path(str(tokenizer)).is_dir():
        raise UsageError(f"--context-policy with --policy openai counts tokens with the served model's tokenizer: "
                         f"give --tokenizer FOLDER (tokenizer files and a chat template); {tokenizer!r} is not a folder")
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise UsageError(f"--context-policy needs the model extra (pip install 'longhorizon[model]'): {exc}") from None
    try:
        return make_context_policy(kind, max_context, AutoTokenizer.from_pretrained(str(tokenizer), local_files_only=True))
    except (ValueError, OSError) as exc:
        raise UsageError(f"--context-policy: {exc}") from None
