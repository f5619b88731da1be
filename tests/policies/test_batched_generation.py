"""LocalModelPolicy decoding concurrent episodes together: the same tokens, prompts and log-probs
as one request at a time, each request's failure its own, ``max_batch`` respected."""

import asyncio
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from longhorizon.core.policy import EpisodeContext  # noqa: E402
from longhorizon.env.episode import SYSTEM_PROMPT  # noqa: E402
from longhorizon.policies.local_model import ContextLengthExceeded, LocalModelPolicy  # noqa: E402
from longhorizon.train.tiny import build_tiny_model, default_corpus  # noqa: E402

QUESTIONS = ["Hi.", "What is in a.txt? Read it and tell me all of it.", "x " * 30, "Sum the numbers in data.csv."]
"""Prompts of different lengths: rows are padded differently."""


def messages(question):
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}]


def ctx(sample):
    return EpisodeContext(task=SimpleNamespace(id="task-a"), sample=sample)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """The tiny model with large random weights: at its init scale greedy repeats one token, and a
    test of padding needs outputs that depend on the context."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = build_tiny_model(tmp_path_factory.mktemp("tiny"), default_corpus(families=[]), num_layers=2)
    model, tok = AutoModelForCausalLM.from_pretrained(path), AutoTokenizer.from_pretrained(path)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for w in model.parameters():
            if w.dim() == 2:
                w.normal_(0, 0.5, generator=gen)
    return model, tok


def policies(tiny, **kw):
    """(one at a time, batched) over one model."""
    one = LocalModelPolicy(*tiny, max_batch=1, **kw)
    many = LocalModelPolicy(*tiny, max_batch=8, **kw)
    return one, many


async def two_turns(policy, contexts, together):
    """Each episode's two turns (the second on the episode's kept KV cache); episodes concurrent or not."""
    async def episode(q, c):
        first = await policy.act(messages(q), [], c)
        clean = {k: v for k, v in first.items() if k not in ("token_ids", "prompt_ids", "logprobs")}
        history = messages(q) + [clean, {"role": "user", "content": "And then?" * (c.sample + 1)}]
        return first, await policy.act(history, [], c)

    if together:
        return await asyncio.gather(*(episode(q, c) for q, c in zip(QUESTIONS, contexts)))
    return [await episode(q, c) for q, c in zip(QUESTIONS, contexts)]


def assert_same(a, b):
    assert a["token_ids"] == b["token_ids"] and a["prompt_ids"] == b["prompt_ids"]
    assert torch.allclose(torch.tensor(a["logprobs"]), torch.tensor(b["logprobs"]), atol=1e-4)
    assert {k: v for k, v in a.items() if k != "logprobs"} == {k: v for k, v in b.items() if k != "logprobs"}


def stop_early(one, many):
    """An extra end token that one row samples early makes rows stop at different steps."""
    probe = asyncio.run(one.act(messages(QUESTIONS[1]), [], None))
    one.eos_ids = many.eos_ids = one.eos_ids | {probe["token_ids"][2]}


def test_batched_greedy_gives_the_tokens_and_logprobs_of_one_at_a_time(tiny):
    one, many = policies(tiny, max_new_tokens=16)
    stop_early(one, many)
    alone = asyncio.run(two_turns(one, [ctx(s) for s in range(4)], together=False))
    together = asyncio.run(two_turns(many, [ctx(s) for s in range(4)], together=True))
    assert max(many.batch_sizes) > 1 and not one.batch_sizes  # really batched, and really not
    assert len({len(t["token_ids"]) for pair in alone for t in pair}) > 1  # rows stopped at different steps
    for a, b in zip(alone, together):
        assert_same(a[0], b[0])
        assert_same(a[1], b[1])


def test_prompts_fed_in_slices_give_the_tokens_and_logprobs_of_one_forward(tiny, monkeypatch):
    """Long prompts are prefilled PREFILL_TOKENS at a time (summed over a batch's rows), so a batch
    of long prompts costs its KV cache in memory, not one giant forward; the output is the same."""
    from longhorizon.policies import local_model

    one, _ = policies(tiny, max_new_tokens=12)
    whole = asyncio.run(two_turns(one, [ctx(s) for s in range(4)], together=False))
    monkeypatch.setattr(local_model, "PREFILL_TOKENS", 6)
    widths = []
    hook = tiny[0].register_forward_pre_hook(
        lambda mod, args, kw: widths.append(kw["input_ids"].numel()), with_kwargs=True)
    try:
        one, many = policies(tiny, max_new_tokens=12)
        sliced = asyncio.run(two_turns(one, [ctx(s) for s in range(4)], together=False))
        batched = asyncio.run(two_turns(many, [ctx(s) for s in range(4)], together=True))
    finally:
        hook.remove()
    assert max(many.batch_sizes) > 1 and max(widths) <= 6  # really batched, and really sliced
    for a, b, c in zip(whole, sliced, batched):
        for turn in range(2):
            assert_same(a[turn], b[turn])
            assert_same(a[turn], c[turn])


def test_batched_logprobs_are_the_models_own_under_a_full_forward_pass(tiny):
    _, many = policies(tiny, max_new_tokens=12)
    together = asyncio.run(two_turns(many, [ctx(s) for s in range(4)], together=True))
    for _, second in together:  # the second turn ran on caches merged into one padded batch
        prompt, ids = second["prompt_ids"], second["token_ids"]
        with torch.no_grad():
            logits = many.model(input_ids=torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1]
        expected = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(ids)[:, None])[:, 0]
        assert torch.allclose(torch.tensor(second["logprobs"]), expected, atol=1e-4)
        assert torch.equal(logits.argmax(-1), torch.tensor(ids))


def test_sampling_depends_on_the_episode_not_on_the_batch(tiny):
    one, many = policies(tiny, max_new_tokens=12, temperature=1.0, top_p=0.9, seed=3)
    alone = asyncio.run(two_turns(one, [ctx(s) for s in range(4)], together=False))
    together = asyncio.run(two_turns(many, [ctx(s) for s in range(4)], together=True))
    for a, b in zip(alone, together):
        assert_same(a[0], b[0])
        assert_same(a[1], b[1])
    assert len({tuple(a[0]["token_ids"]) for a in alone}) > 1  # each episode its own draws


def test_a_request_that_overflows_the_context_fails_alone(tiny):
    one, many = policies(tiny, max_new_tokens=8)
    limit = len(one.prompt_ids(messages(QUESTIONS[2]), [])) - 1  # only the long prompt does not fit
    one.max_context = many.max_context = limit

    async def run():
        return await asyncio.gather(*(many.act(messages(q), [], ctx(s)) for s, q in enumerate(QUESTIONS)),
                                    return_exceptions=True)

    out = asyncio.run(run())
    assert isinstance(out[2], ContextLengthExceeded)
    # the long prompt never enters a batch; the other three are decoded (together, unless a loaded
    # machine lets the first one start before the others arrive)
    assert sum(many.batch_sizes) == 3
    for s, q in enumerate(QUESTIONS):
        if s != 2:
            assert_same(asyncio.run(one.act(messages(q), [], ctx(s))), out[s])


def test_a_failing_batch_is_served_one_request_at_a_time(tiny, monkeypatch):
    one, many = policies(tiny, max_new_tokens=6)

    def broken(*a, **kw):
        raise RuntimeError("batched pass failed")

    monkeypatch.setattr(many, "_decode_batch", broken)

    async def run():
        return await asyncio.gather(*(many.act(messages(q), [], ctx(s)) for s, q in enumerate(QUESTIONS)))

    for s, (q, got) in enumerate(zip(QUESTIONS, asyncio.run(run()))):
        assert_same(asyncio.run(one.act(messages(q), [], ctx(s))), got)


def test_max_batch_is_respected(tiny):
    policy = LocalModelPolicy(*tiny, max_new_tokens=4, max_batch=2)

    async def run():
        return await asyncio.gather(*(policy.act(messages(f"question {i}"), [], ctx(i)) for i in range(5)))

    assert len(asyncio.run(run())) == 5
    assert max(policy.batch_sizes) == 2 and sum(policy.batch_sizes) == 5
    assert policy.describe()["max_batch"] == 2
    with pytest.raises(ValueError, match="max_batch"):
        LocalModelPolicy(policy.model, policy.tokenizer, max_batch=0)
