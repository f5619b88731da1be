"""RL's sampler on the real vLLM server (CPU wheel): token in / token out, and weights pushed to it.

One server for the module, started the way an RL run starts it (``ServedSampler`` without a
URL: the trainer's model written to a servable folder, ``VLLMServer(weight_sync=True)``, float32
so its log-probs can be compared with the trainer's), on a tiny random Qwen3 whose head size
vLLM's CPU attention supports. Starting takes under a minute here (vLLM compiles no kernels for
a model this small; tests/serve/test_vllm.py checks the compile cache on SmolLM2). Skipped, with pip's reason, only when the vLLM venv cannot be built.
The same contracts against the loopback stand-in: tests/train/test_served_rollouts.py.
"""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from longhorizon.policies.served_tokens import ServedTokensPolicy  # noqa: E402

TOOLS = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a text file of the workspace.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
MESSAGES = [{"role": "system", "content": "You are a careful assistant with file tools."},
            {"role": "user", "content": "What does notes.txt say?"}]
CALL_TEXT = '<tool_call>\n{"name": "read_file", "arguments": {"path": "notes.txt"}}\n</tool_call>'


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from longhorizon.train.tiny import build_tiny_model, default_corpus

    return build_tiny_model(tmp_path_factory.mktemp("tiny_vllm"), default_corpus(families=[]), hidden_size=128,
                            num_layers=2, num_heads=2, num_kv_heads=1, intermediate_size=256, max_positions=4096)


@pytest.fixture(scope="module")
def sampler(tiny, tmp_path_factory):
    from longhorizon.serve.venvs import VenvError
    from longhorizon.serve.vllm import ensure_vllm
    from longhorizon.train.config import RLConfig
    from longhorizon.train.served_sampler import ServedSampler

    try:
        ensure_vllm()
    except VenvError as exc:
        print(f"SKIP reason: {exc}")
        pytest.skip(f"vLLM cannot be installed here: {exc}")
    model = AutoModelForCausalLM.from_pretrained(tiny)
    cfg = RLConfig(out=str(tmp_path_factory.mktemp("rl")), sampler="vllm", sampler_dtype="float32",
                   max_context=2048, max_new_tokens=64)
    s = ServedSampler(cfg, AutoTokenizer.from_pretrained(tiny)).start(model)
    s.model = model
    yield s
    s.close()


def _local_logprobs(model, prompt, ids):
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1]
    return torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(ids)[:, None])[:, 0].tolist()


async def test_each_turn_sends_the_previous_prompt_plus_the_ids_vllm_sampled(sampler):
    """The model is made to write a tool call (vLLM's structured output); whatever ids it picks
    for that text, the next turn's prompt is built from them, and vLLM echoes exactly it."""
    policy = ServedTokensPolicy(sampler.base_url, sampler.model_name, sampler.tokenizer, max_new_tokens=64,
                                max_context=2048, extra_body={"structured_outputs": {"regex": re.escape(CALL_TEXT)}})
    state: dict = {}
    first = await policy.complete_turn(MESSAGES, TOOLS, state)
    assert [c["function"]["name"] for c in first["tool_calls"]] == ["read_file"]
    assert first["prompt_ids"] == policy.renderer.prompt_ids(MESSAGES, TOOLS)
    call = {k: v for k, v in first.items() if k not in ("token_ids", "prompt_ids", "logprobs")}
    result = {"role": "tool", "tool_call_id": first["tool_calls"][0]["id"], "content": "buy milk"}
    second = await policy.complete_turn(MESSAGES + [call, result], TOOLS, state)  # vLLM echoed it: checked inside
    cut = [] if first["token_ids"][-1] in policy.eos_ids else [policy.renderer.eos_id]
    assert second["prompt_ids"] == (first["prompt_ids"] + first["token_ids"] + cut
                                    + policy.renderer.continuation_ids([result]))
    assert len(second["logprobs"]) == len(second["token_ids"]) > 0


async def test_vllms_logprobs_of_the_sampled_ids_are_the_trainers(sampler):
    policy = sampler.policy()
    msg = await policy.complete_turn(MESSAGES, TOOLS, {})
    assert msg["logprobs"] == pytest.approx(_local_logprobs(sampler.model, msg["prompt_ids"], msg["token_ids"]),
                                            abs=1e-3)


async def test_a_weight_sync_makes_vllm_sample_from_the_new_weights(sampler):
    policy = sampler.policy()
    prompt = policy.renderer.prompt_ids(MESSAGES, TOOLS)
    old = AutoModelForCausalLM.from_pretrained(sampler.server.model_path)  # the weights it started with
    torch.manual_seed(0)
    with torch.no_grad():
        for p in sampler.model.parameters():
            p.mul_(1 + 0.05 * torch.randn_like(p))
    sampler.sync(sampler.model)
    msg = await policy.complete_turn(MESSAGES, TOOLS, {})
    new = _local_logprobs(sampler.model, prompt, msg["token_ids"])
    assert msg["logprobs"] == pytest.approx(new, abs=1e-3)
    assert msg["logprobs"] != pytest.approx(_local_logprobs(old, prompt, msg["token_ids"]), abs=1e-3)


def test_seeded_sampling_of_long_concurrent_prompts_keeps_the_server_alive(sampler):
    """RL's rollouts sample with a seed per request. With chunked prefill (vLLM's default) a
    seeded request whose prompt was split across steps killed the CPU engine ("CPU Generator does
    not use offset"); the server now runs without it on CPU. 12 concurrent 1,500-token prompts
    exceed one step's token budget, so some must wait or be split."""
    import concurrent.futures

    import httpx2

    def complete(i):
        body = {"model": sampler.model_name, "prompt": [5 + (k * 7 + i) % 500 for k in range(1500)],
                "max_tokens": 4, "temperature": 1.0, "seed": i}
        return httpx2.post(f"{sampler.base_url}/completions", json=body, timeout=300).status_code

    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        assert list(pool.map(complete, range(12))) == [200] * 12
