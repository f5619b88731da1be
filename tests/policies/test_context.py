"""The elide-oldest context policy: what it keeps, what it elides, and that training and acting
(local and served policies) see one view of the same conversation."""

import pytest

pytest.importorskip("transformers")

from transformers import AutoTokenizer  # noqa: E402

from longhorizon.core.chat_api import api_messages  # noqa: E402
from longhorizon.env.episode import SYSTEM_PROMPT  # noqa: E402
from longhorizon.policies.context import ARGUMENTS_ELIDED, ELIDED, ContextPolicy, elide  # noqa: E402
from longhorizon.policies.local_model import LocalModelPolicy  # noqa: E402
from longhorizon.policies.openai_client import OpenAIPolicy  # noqa: E402
from longhorizon.policies.render import ChatRenderer  # noqa: E402
from longhorizon.testing import ScriptedBrain, StandinLLM  # noqa: E402
from longhorizon.train.tiny import build_tiny_model, default_corpus  # noqa: E402

TOOLS = [{
    "type": "function",
    "function": {
        "name": "files__read_file",
        "description": "Read a text file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}]


def read(i):
    return {"role": "assistant", "content": f"Reading part {i}.",
            "tool_calls": [{"id": f"c{i}", "type": "function",
                            "function": {"name": "files__read_file", "arguments": f'{{"path": "part{i}.txt"}}'}}]}


def result(i):
    return {"role": "tool", "tool_call_id": f"c{i}", "content": f"part {i}: " + " ".join(f"row{i}-{k}" for k in range(40))}


EPISODE = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "Summarise the five parts."}]
for _i in range(5):
    EPISODE += [read(_i), result(_i)]
EPISODE += [{"role": "assistant", "content": "The five parts list rows 0 to 39 each."}]
TURNS = [i for i, m in enumerate(EPISODE) if m["role"] == "assistant"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), default_corpus(families=[]))


@pytest.fixture(scope="module")
def tok(tiny):
    return AutoTokenizer.from_pretrained(tiny, local_files_only=True)


@pytest.fixture(scope="module")
def budget(tok):
    """A prompt budget the last turns outgrow: two or more results must go by the end."""
    whole = ContextPolicy(tok, 10**9).prompt_length(EPISODE[:TURNS[-1]], TOOLS)
    one = ContextPolicy(tok, 10**9).prompt_length(EPISODE[:TURNS[1]], TOOLS)
    return (whole + one) // 2


def test_a_conversation_that_fits_is_left_whole(tok):
    view, elided = ContextPolicy(tok, 10**9).view(EPISODE[:TURNS[-1]], TOOLS)
    assert view == EPISODE[:TURNS[-1]] and elided == 0


def test_the_oldest_results_go_first_and_the_system_turn_task_and_turns_stay(tok, budget):
    policy = ContextPolicy(tok, budget)
    messages = EPISODE[:TURNS[-1]]
    view, elided = policy.view(messages, TOOLS)
    assert elided >= 1 and view[:2] == messages[:2]  # the system turn and the task, untouched
    tools = [i for i, m in enumerate(messages) if m["role"] == "tool"]
    assert [view[i]["content"] for i in tools[:elided]] == [ELIDED] * elided
    assert [view[i] for i in tools[elided:]] == [messages[i] for i in tools[elided:]]
    assert [m for m in view if m["role"] == "assistant"] == [m for m in messages if m["role"] == "assistant"]
    assert policy.prompt_length(view, TOOLS) <= budget


def test_when_it_must_elide_it_goes_down_to_the_low_water_mark(tok, budget):
    """So the view holds for a few turns instead of changing at every one."""
    policy = ContextPolicy(tok, budget)
    changed = next(i for i in TURNS + [TURNS[-1] + 2] if policy.view(EPISODE[:i], TOOLS)[1])
    view, elided = policy.view(EPISODE[:changed], TOOLS)
    assert policy.prompt_length(view, TOOLS) <= policy.low_water < budget
    tools = [i for i, m in enumerate(EPISODE[:changed]) if m["role"] == "tool"]
    one_fewer = elide(EPISODE[:changed], tools[:elided - 1])
    assert policy.prompt_length(one_fewer, TOOLS) > policy.low_water


def test_long_call_arguments_are_elided_after_the_results(tok):
    write = {"role": "assistant", "content": "Writing the report.", "tool_calls": [{
        "id": "w", "type": "function",
        "function": {"name": "files__read_file", "arguments": '{"path": "' + "report " * 200 + '"}'}}]}
    messages = EPISODE[:TURNS[2]] + [write, {"role": "tool", "tool_call_id": "w", "content": "done"}] \
        + EPISODE[TURNS[2]:TURNS[4]]
    size = ContextPolicy(tok, 10**9).prompt_length(messages, TOOLS)
    view, elided = ContextPolicy(tok, size // 2).view(messages, TOOLS)
    assert view[TURNS[2]]["tool_calls"][0]["function"]["arguments"] == ARGUMENTS_ELIDED
    assert view[TURNS[2]]["content"] == "Writing the report."  # its note and tool name stay
    assert all(m["content"] == ELIDED for m in view[:TURNS[2]] if m["role"] == "tool")  # the results went first
    assert view[-2:] == messages[-2:]


def test_the_latest_results_stay_even_when_nothing_else_fits(tok):
    messages = EPISODE[:TURNS[-1]]
    view, elided = ContextPolicy(tok, 1).view(messages, TOOLS)
    assert elided == 4 and view[-1] == messages[-1] and view[-1]["content"] != ELIDED


def test_the_prompt_length_is_the_rendered_prompt(tok):
    messages = EPISODE[:TURNS[3]]
    assert ContextPolicy(tok, 10**9).prompt_length(messages, TOOLS) == len(ChatRenderer(tok).prompt_ids(messages, TOOLS))


def _trained_prefixes(examples):
    """For each trained assistant turn, in order: the ids before it in its example."""
    out = []
    for ids, mask in examples:
        for k in range(len(mask)):
            if mask[k] and (k == 0 or not mask[k - 1]):
                out.append(ids[:k])
    return out


def test_sft_trains_each_turn_once_in_the_view_the_policies_act_in(tiny, tok, budget):
    context = ContextPolicy(tok, budget)
    examples = context.sft_examples(EPISODE, TOOLS)
    assert len(examples) > 1  # the elisions changed along the way
    renderer = ChatRenderer(tok)
    acting = [renderer.prompt_ids(context.view(EPISODE[:i], TOOLS)[0], TOOLS) for i in TURNS]
    assert _trained_prefixes(examples) == acting
    whole_ids, whole_mask = renderer.episode(EPISODE, TOOLS)
    assert sum(sum(mask) for _, mask in examples) == sum(whole_mask)  # each assistant token once
    local = LocalModelPolicy(tiny, max_new_tokens=1, context_policy="elide-oldest", context_limit=budget)
    assert [local._next_prompt(EPISODE[:i], TOOLS, None)[0] for i in TURNS] == acting


async def test_the_served_policy_sends_the_same_view_and_records_the_elisions(tok, budget):
    context = ContextPolicy(tok, budget)
    messages = EPISODE[:TURNS[-1]]
    view, elided = context.view(messages, TOOLS)
    with StandinLLM(ScriptedBrain(["ok"])) as srv:
        async with OpenAIPolicy(srv.base_url, srv.model, api_key="", context=context) as pol:
            msg = await pol.act(messages, TOOLS, None)
            assert pol.describe()["context_policy"] == {"policy": "elide-oldest", "max_context": budget}
    assert srv.requests[0]["messages"] == api_messages(view)
    assert ELIDED in srv.requests[0]["messages"][3]["content"]
    assert msg["elided"] == elided >= 1


async def test_the_local_policy_records_the_elisions_in_its_reply(tiny, budget):
    local = LocalModelPolicy(tiny, max_new_tokens=1, context_policy="elide-oldest", context_limit=budget)
    msg = await local.act(EPISODE[:TURNS[-1]], TOOLS, None)
    assert msg["elided"] >= 1 and local.describe()["context_policy"]["max_context"] == budget


def test_context_flags_that_cannot_work_are_usage_errors(tmp_path):
    from longhorizon.core.errors import UsageError
    from longhorizon.policies.factory import make_policy

    with pytest.raises(UsageError, match="openai and local"):
        make_policy("oracle", context_policy="elide-oldest", max_context=512)
    with pytest.raises(UsageError, match="--context-policy"):
        make_policy("openai", base_url="http://127.0.0.1:9/v1", model="m", max_context=512)
    with pytest.raises(UsageError, match="--tokenizer"):
        make_policy("openai", base_url="http://127.0.0.1:9/v1", model="served-name", context_policy="elide-oldest",
                    max_context=512)


def test_the_served_policy_counts_with_the_tokenizer_folder_it_is_given(tiny):
    from longhorizon.policies.factory import make_policy

    pol = make_policy("openai", base_url="http://127.0.0.1:9/v1", model="served-name", context_policy="elide-oldest",
                      max_context=512, tokenizer=str(tiny))
    assert pol.context.max_context == 512 and "max_tokens" not in pol.sampling  # none sent unless told
