"""LocalModelPolicy within an episode: each turn's prompt extends the previous prompt and the ids
it sampled (never a re-rendering), the KV cache carries over, and the renderer's pieces add up
to the template's own rendering."""

import json

import pytest

torch = pytest.importorskip("torch")

from transformers import AutoTokenizer  # noqa: E402

from longhorizon.env.episode import SYSTEM_PROMPT  # noqa: E402
from longhorizon.policies.local_model import LocalModelPolicy  # noqa: E402
from longhorizon.policies.render import ChatRenderer  # noqa: E402

MESSAGES = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "Copy in.txt to out.txt."}]


def _turn(policy, messages, tools, state):
    msg = policy.complete(messages, tools, 0, state)
    return msg, {k: v for k, v in msg.items() if k not in ("token_ids", "prompt_ids", "logprobs")}


def test_each_turn_extends_the_ids_sampled_before_it(small_model, files_tools):
    policy = LocalModelPolicy(small_model, temperature=1.0, max_new_tokens=12, seed=3)
    state: dict = {}
    msg1, clean1 = _turn(policy, MESSAGES, files_tools, state)
    assert msg1["prompt_ids"] == policy.renderer.prompt_ids(MESSAGES, files_tools)
    tool_msg = {"role": "tool", "tool_call_id": "call_0", "content": "42"}
    history = MESSAGES + [clean1, tool_msg]
    msg2, _ = _turn(policy, history, files_tools, state)
    sampled = msg1["prompt_ids"] + msg1["token_ids"]
    cut = [] if msg1["token_ids"][-1] in policy.eos_ids else [policy.renderer.eos_id]  # end-of-turn added if cut
    assert msg2["prompt_ids"] == sampled + cut + policy.renderer.continuation_ids([tool_msg])
    assert policy.tokenizer.decode(policy.renderer.continuation_ids([tool_msg])) == (
        "\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n<|im_start|>assistant\n")


def test_kv_cache_reuse_gives_the_logprobs_of_a_full_forward_pass(small_model, files_tools):
    policy = LocalModelPolicy(small_model, temperature=1.0, max_new_tokens=8, seed=5)
    state: dict = {}
    _, clean1 = _turn(policy, MESSAGES, files_tools, state)
    history = MESSAGES + [clean1, {"role": "tool", "tool_call_id": "call_0", "content": "result text"}]
    msg2, _ = _turn(policy, history, files_tools, state)
    assert len(state["cache_ids"]) >= len(msg2["prompt_ids"])  # the second turn ran on the kept cache
    full = torch.tensor([msg2["prompt_ids"] + msg2["token_ids"]])
    with torch.no_grad():
        logits = policy.model(input_ids=full).logits[0, len(msg2["prompt_ids"]) - 1:-1]
    expected = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(msg2["token_ids"])[:, None])[:, 0]
    assert torch.allclose(torch.tensor(msg2["logprobs"]), expected, atol=1e-4)


def test_a_new_episode_starts_from_a_fresh_rendering(small_model, files_tools):
    policy = LocalModelPolicy(small_model, max_new_tokens=4)
    a, b = {}, {}
    first = policy.complete(MESSAGES, files_tools, 0, a)
    again = policy.complete(MESSAGES, files_tools, 0, b)
    assert first == again  # greedy, and nothing leaks between episodes' states


def test_renderer_pieces_add_up_to_the_whole_template(small_model, files_tools):
    tok = AutoTokenizer.from_pretrained(small_model)
    r = ChatRenderer(tok)
    call = {"id": "c1", "type": "function", "function": {"name": "files__read_file", "arguments": '{"path": "a"}'}}
    messages = MESSAGES + [
        {"role": "assistant", "content": "Reading.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "one"},
        {"role": "assistant", "content": "", "tool_calls": [call, {**call, "id": "c2"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "two"},
        {"role": "tool", "tool_call_id": "c2", "content": "three"},
        {"role": "assistant", "content": "Done."},
    ]
    ids, mask = r.episode(messages, files_tools)
    whole = r.render(messages, files_tools)
    assert whole[:len(ids)] == ids and tok.decode(whole[len(ids):]) == "\n"
    assert ids[:len(r.prompt_ids(MESSAGES, files_tools))] == r.prompt_ids(MESSAGES, files_tools)
    assert sum(mask) == sum(len(r.assistant_ids(m)) for m in messages if m["role"] == "assistant")
    assert json.loads(json.dumps(mask)) == mask and set(mask) == {0, 1}


def test_a_tool_call_written_without_tags_is_still_a_tool_call():
    from longhorizon.policies.local_model import parse_completion

    text = ('First, see which log files there are.\n{"name": "shell__run", "arguments": {"command":"ls -laR logs"}}\n'
            '</tool_call>')
    msg = parse_completion(text)
    assert msg["content"] == "First, see which log files there are."
    assert msg["tool_calls"][0]["function"] == {"name": "shell__run", "arguments": '{"command":"ls -laR logs"}'}
    # broken JSON before a closing tag: still a call (the episode answers it with a JSON error)
    broken = 'Note.\n{"name": "shell__run", "arguments": "arguments":"ls"}}\n</tool_call>'
    msg = parse_completion(broken)
    assert msg["content"] == "Note."
    (call,) = msg["tool_calls"]
    assert call["function"]["name"] == "shell__run"
    with pytest.raises(json.JSONDecodeError):
        json.loads(call["function"]["arguments"])
    prose = 'The config is {"name": "x", "arguments": {}} inline.'  # not on its own line: prose
    assert "tool_calls" not in parse_completion(prose)
