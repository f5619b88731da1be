"""Builds a Policy from its name and the CLI's options (lazy imports keep the core light)."""

from __future__ import annotations

from longhorizon.core.errors import UsageError


def make_policy(name: str, *, model=None, base_url=None, temperature=0.0, top_p=1.0,
                max_tokens=1024, seed=0, api_key=None, extra_body=None, token_data=False, tokenizer=None,
                max_context=None):
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
                            logprobs=token_data, return_token_ids=token_data)
    if name == "served":
        if not base_url or not model or not tokenizer:
            raise UsageError("--policy served needs --base-url, the served model's name and its tokenizer folder")
        from longhorizon.policies.served_tokens import ServedTokensPolicy

        return ServedTokensPolicy(base_url, model, tokenizer, temperature=temperature, top_p=top_p,
                                  max_new_tokens=max_tokens, seed=seed, max_context=max_context, api_key=api_key,
                                  extra_body=extra_body)
    if name == "local":
        if not model:
            raise UsageError("--policy local needs --model (a transformers model folder or name)")
        try:
            from longhorizon.policies.local_model import LocalModelPolicy
        except ImportError as exc:
            raise UsageError(f"--policy local needs the model extra (pip install 'longhorizon[model]'): {exc}") from None
        return LocalModelPolicy(model, temperature=temperature, top_p=top_p, max_new_tokens=max_tokens, seed=seed)
    raise UsageError(f"unknown policy {name!r}")
