"""Builds a Policy from its name and the CLI's options (lazy imports keep the core light)."""

from __future__ import annotations

from pathlib import Path

from longhorizon.core.errors import UsageError

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
        try:
            return LocalModelPolicy(model, temperature=temperature, top_p=top_p,
                                    max_new_tokens=max_tokens or DEFAULT_MAX_TOKENS, seed=seed,
                                    context_policy=context_policy, context_limit=max_context)
        except ValueError as exc:
            if context:
                raise UsageError(str(exc)) from None
            raise
    raise UsageError(f"unknown policy {name!r}")


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
