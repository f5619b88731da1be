"""The tiny local model and LocalModelPolicy: real tokenizer, real transformers model, offline."""

import asyncio
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from longhorizon.core.grade import Criterion  # noqa: E402
from longhorizon.core.task import Task, ToolCall  # noqa: E402
from longhorizon.env.episode import SYSTEM_PROMPT, play_task  # noqa: E402
from longhorizon.policies.local_model import ContextLengthExceeded, LocalModelPolicy, parse_completion  # noqa: E402
from longhorizon.policies.scripted import OraclePolicy  # noqa: E402
from longhorizon.train.tiny import build_tiny_model, default_corpus  # noqa: E402

TOOLS = [{
    "type": "function",
    "function": {
        "name": "files__read_file",
        "description": "Read a text file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    },
}]
MESSAGES = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "What is in a.txt?"}]


def call(call_id, name, args):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": args}}


EPISODE = MESSAGES + [
    {"role": "assistant", "content": "Let me read it.", "tool_calls": [call("c1", "files__read_file", '{"path": "a.txt"}')]},
    {"role": "tool", "tool_call_id": "c1", "content": "hello world"},
    {"role": "assistant", "content": "", "tool_calls": [call("c2", "files__read_file", '{"path": "b.txt"}'),
                                                         call("c3", "files__read_file", '{"path": "c.txt"}')]},
    {"role": "tool", "tool_call_id": "c2", "content": "bee"},
    {"role": "tool", "tool_call_id": "c3", "content": "sea"},
    {"role": "assistant", "content": "a.txt says hello world."},
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), default_corpus(families=[]))


@pytest.fixture(scope="module")
def tok(tiny):
    return AutoTokenizer.from_pretrained(tiny, local_files_only=True)


@pytest.fixture(scope="module")
def greedy(tiny):
    return LocalModelPolicy(tiny, max_new_tokens=24)


def test_tiny_model_loads_back_offline_as_a_small_qwen3(tiny, tok):
    model = AutoModelForCausalLM.from_pretrained(tiny, local_files_only=True)
    cfg = model.config
    assert cfg.model_type == "qwen3"
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads,
            cfg.intermediate_size) == (256, 4, 4, 2, 1024)
    assert cfg.vocab_size == len(tok) and tok.eos_token == "<|im_end|>"
    assert sum(p.numel() for p in model.parameters()) < 6_000_000


def test_build_is_deterministic_in_the_seed(tmp_path, tiny):
    again = build_tiny_model(tmp_path / "again", default_corpus(families=[]))
    assert (again / "tokenizer.json").read_bytes() == (Path(tiny) / "tokenizer.json").read_bytes()
    a = AutoModelForCausalLM.from_pretrained(again).state_dict()
    b = AutoModelForCausalLM.from_pretrained(tiny).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in b)


def test_default_corpus_covers_the_suite_and_the_markup():
    corpus = default_corpus()  # every registered family (zero is fine)
    text = "\n".join(corpus)
    assert corpus[0] == SYSTEM_PROMPT
    assert "<tool_call>" in text and "<tool_response>" in text and '"arguments"' in text


def test_markup_tokens_are_atomic_and_survive_decoding(tok):
    ids = tok("<tool_call>\n{}\n</tool_call>", add_special_tokens=False)["input_ids"]
    assert tok.convert_ids_to_tokens(ids)[0] == "<tool_call>"
    assert tok.decode(ids, skip_special_tokens=True) == "<tool_call>\n{}\n</tool_call>"


def test_chat_template_renders_a_multi_turn_tool_episode(tok):
    text = tok.apply_chat_template(EPISODE, tools=TOOLS, tokenize=False)
    assert SYSTEM_PROMPT in text and json.dumps(TOOLS[0]) in text
    assert '<tool_call>\n{"name": "files__read_file", "arguments": {"path": "a.txt"}}\n</tool_call>' in text
    assert "<tool_response>\nhello world\n</tool_response>" in text
    # two results of one turn come back together in one user turn
    assert "<tool_response>\nbee\n</tool_response>\n<tool_response>\nsea\n</tool_response><|im_end|>" in text
    assert text.count("<|im_start|>assistant\n") == 3


def test_generation_markers_mask_exactly_the_assistant_output(tok):
    out = tok.apply_chat_template(EPISODE, tools=TOOLS, tokenize=True, return_dict=True,
                                  return_assistant_tokens_mask=True)
    ids, mask = out["input_ids"], out["assistant_masks"]
    spans, cur = [], []
    for i, m in zip(ids, mask):
        if m:
            cur.append(i)
        elif cur:
            spans.append(tok.decode(cur))
            cur = []
    assert spans == [
        'Let me read it.\n<tool_call>\n{"name": "files__read_file", "arguments": {"path": "a.txt"}}\n</tool_call><|im_end|>',
        '<tool_call>\n{"name": "files__read_file", "arguments": {"path": "b.txt"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "files__read_file", "arguments": {"path": "c.txt"}}\n</tool_call><|im_end|>',
        "a.txt says hello world.<|im_end|>",
    ]


async def test_policy_returns_exactly_the_sampled_tokens_and_their_logprobs(greedy, tok):
    msg = await greedy.act(MESSAGES, TOOLS, None)
    ids, logprobs = msg.pop("token_ids"), msg.pop("logprobs")
    prompt = msg.pop("prompt_ids")
    assert prompt == tok(tok.apply_chat_template(MESSAGES, tools=TOOLS, add_generation_prompt=True, tokenize=False),
                         add_special_tokens=False)["input_ids"]
    assert 0 < len(ids) <= 24 and len(logprobs) == len(ids) and all(lp <= 0 for lp in logprobs)
    if ids[-1] != tok.eos_token_id:  # cut by max_new_tokens: it says so
        assert (msg.pop("finish_reason"), msg.pop("completion_tokens")) == ("length", len(ids))
    assert msg == parse_completion(tok.decode(ids, skip_special_tokens=True))


async def test_greedy_logprobs_match_a_teacher_forced_forward_pass(greedy):
    msg = await greedy.act(MESSAGES, TOOLS, None)
    full = torch.tensor([msg["prompt_ids"] + msg["token_ids"]])
    with torch.no_grad():
        logits = greedy.model(input_ids=full).logits[0, len(msg["prompt_ids"]) - 1:-1]
    expected = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(msg["token_ids"])[:, None])[:, 0]
    assert torch.allclose(torch.tensor(msg["logprobs"]), expected, atol=1e-4)
    assert torch.equal(logits.argmax(-1), torch.tensor(msg["token_ids"]))


async def test_greedy_is_deterministic_even_when_episodes_run_concurrently(greedy):
    first = await greedy.act(MESSAGES, TOOLS, None)
    again = await asyncio.gather(*(greedy.act(MESSAGES, TOOLS, None) for _ in range(3)))
    # decoded together (batched): the same message and ids; log-probs up to float rounding
    for m in again:
        assert {k: v for k, v in m.items() if k != "logprobs"} == {k: v for k, v in first.items() if k != "logprobs"}
        assert m["logprobs"] == pytest.approx(first["logprobs"], abs=1e-4)


async def test_sampling_is_reproducible_from_the_seed(tiny):
    a = LocalModelPolicy(tiny, temperature=1.0, top_p=0.9, max_new_tokens=12, seed=7)
    b = LocalModelPolicy(tiny, temperature=1.0, top_p=0.9, max_new_tokens=12, seed=7)
    ma, mb = await a.act(MESSAGES, TOOLS, None), await b.act(MESSAGES, TOOLS, None)
    assert ma["token_ids"] == mb["token_ids"] and ma["logprobs"] == mb["logprobs"]
    assert all(lp <= 0 for lp in ma["logprobs"])
    assert a.describe()["sampling"] == {"temperature": 1.0, "top_p": 0.9, "max_new_tokens": 12, "seed": 7}


async def test_a_prompt_longer_than_the_context_raises_context_length_exceeded(tiny):
    small = LocalModelPolicy(tiny, max_context=32)
    with pytest.raises(ContextLengthExceeded, match="context of 32"):
        await small.act(MESSAGES, TOOLS, None)


async def test_a_reply_cut_by_max_new_tokens_says_so_and_ends_the_episode_as_max_tokens(tiny):
    policy = LocalModelPolicy(tiny, max_new_tokens=2)
    msg = await policy.act(MESSAGES, TOOLS, None)
    assert msg["token_ids"][-1] not in policy.eos_ids  # the random model does not stop within 2 tokens
    assert msg["finish_reason"] == "length" and msg["completion_tokens"] == 2
    traj = await play_task(_copy_task(), policy)
    assert traj.status == "max_tokens" and [t["finish_reason"] for t in traj.turns] == ["length"] * 3
    errors = [m["content"] for m in traj.messages if m["role"] in ("user", "tool")][1:]
    assert errors and all("cut at 2 tokens" in e for e in errors)


def test_parser_keeps_malformed_tool_call_arguments_raw():
    text = ('I will read two files.\n<tool_call>\n{"name": "files__read_file", "arguments": {"path": "a.txt"}}\n'
            '</tool_call>\n<tool_call>\n{"name": "files__read_file", "arguments": {"path": "b.txt",}}\n</tool_call>')
    msg = parse_completion(text)
    assert msg["content"] == "I will read two files."
    good, bad = msg["tool_calls"]
    assert good["function"] == {"name": "files__read_file", "arguments": '{"path": "a.txt"}'}
    assert bad["function"]["name"] == "files__read_file"
    assert bad["function"]["arguments"] == '{"path": "b.txt",}'
    with pytest.raises(json.JSONDecodeError):
        json.loads(bad["function"]["arguments"])
    assert [c["id"] for c in msg["tool_calls"]] == ["call_0", "call_1"]


def test_parser_reads_an_unterminated_block_and_never_raises():
    msg = parse_completion('<tool_call>\n{"name": "files__list_dir", "argu')
    assert msg["content"] == ""
    assert msg["tool_calls"][0]["function"] == {"name": "files__list_dir",
                                                "arguments": '{"name": "files__list_dir", "argu'}


def test_a_call_that_lost_its_opening_tag_is_a_malformed_call_not_a_final_answer():
    msg = parse_completion('Look at the day.log"}} </tool_call>')
    assert msg["content"] == 'Look at the day.log"}}'
    (call,) = msg["tool_calls"]
    assert call["function"] == {"name": "", "arguments": ""}
    msg = parse_completion('Reading it. {"name": "files__read_file", "arguments": {"path": "a.txt"}}\n</tool_call>')
    assert msg["content"] == "Reading it."
    assert msg["tool_calls"][0]["function"] == {"name": "files__read_file", "arguments": '{"path": "a.txt"}'}


def test_parser_never_raises_on_garbage():
    import random

    rng = random.Random(0)
    bits = ["<tool_call>", "</tool_call>", "{", "}", '"name"', ":", '"a\\q"', '"arguments"', "[", "]", ",", "\n",
            "null", "text", '"', "\\"]
    for _ in range(500):
        msg = parse_completion("".join(rng.choice(bits) for _ in range(rng.randint(0, 30))))
        for c in msg.get("tool_calls", []):
            assert isinstance(c["function"]["name"], str) and isinstance(c["function"]["arguments"], str)


# -- end to end: rollout -> SFT -> the local model replays the solution through real MCP tools --


def _copy_task() -> Task:
    def build(root: Path) -> None:
        (root / "workspace" / "in.txt").write_text("42\n")

    def oracle():
        text = yield ToolCall("files__read_file", {"path": "in.txt"}, note="Reading the input.")
        yield ToolCall("files__write_file", {"path": "out.txt", "content": text.strip() + "\n"})
        return "Copied."

    return Task(
        id="copy-000000", family="copy", category="test", split="train", seed=0,
        instruction="Copy in.txt to out.txt.", apps=("files",), build=build, oracle=oracle,
        criteria=[Criterion("copied", "out.txt holds 42", "final_state",
                            lambda world, traj: world.file("out.txt").read_text().strip() == "42")],
    )


def _overfit(model, tok, messages, tools, max_steps=400):
    """Train on the assistant tokens until greedy decoding reproduces every one of them."""
    out = tok.apply_chat_template(messages, tools=tools, tokenize=True, return_dict=True,
                                  return_assistant_tokens_mask=True)
    ids = torch.tensor([out["input_ids"]])
    mask = torch.tensor(out["assistant_masks"], dtype=torch.bool)
    labels = torch.where(mask, ids[0], -100)[None]
    torch.manual_seed(0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model.train()
    for _ in range(max_steps):
        res = model(input_ids=ids, labels=labels)
        if torch.equal(res.logits[0, :-1].argmax(-1)[mask[1:]], ids[0, 1:][mask[1:]]):
            break
        opt.zero_grad()
        res.loss.backward()
        opt.step()
    else:
        raise AssertionError("tiny model did not memorise the trajectory")
    return model.eval()


@pytest.fixture
def one_thread():
    """Small CPU training is fastest on one thread, and far less hurt by other busy processes."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


async def test_local_policy_plays_a_real_episode_it_was_trained_on(tmp_path, one_thread):
    from longhorizon.core.world import World
    from longhorizon.env.episode import Episode

    task = _copy_task()
    teacher = await play_task(task, OraclePolicy())
    assert teacher.passed
    async with Episode(task, World.build(tmp_path / "w", task.build)) as ep:
        tools = ep.tools  # exactly the tools the episode will show the model
    corpus = default_corpus(families=[]) + [json.dumps(t) for t in tools] + [m["content"] for m in teacher.messages]
    path = build_tiny_model(tmp_path / "small", corpus, hidden_size=64, num_layers=1, num_heads=2, num_kv_heads=1,
                            intermediate_size=128)
    tok = AutoTokenizer.from_pretrained(path)
    model = _overfit(AutoModelForCausalLM.from_pretrained(path), tok, teacher.messages, tools)

    student = await play_task(task, LocalModelPolicy(model, tok, max_new_tokens=96))
    assert student.passed and student.status == "completed"
    assert [(c.name, c.arguments) for c in student.tool_calls] == [(c.name, c.arguments) for c in teacher.tool_calls]

    def said(traj):  # what the assistant wrote, arguments spelled as sampled
        return [(m["content"], [c["function"]["arguments"] for c in m.get("tool_calls", [])])
                for m in traj.messages if m["role"] == "assistant"]

    assert said(student) == said(teacher)
    assert all(len(t["token_ids"]) == len(t["logprobs"]) > 0 for t in student.turns)
