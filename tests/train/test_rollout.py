"""RL rollouts through TRL's GRPOTrainer: what is trained is exactly what the policy sampled.

The policy here writes its turns one character per token: ids the tokenizer would never
produce for that text (it merges characters), so any re-rendering or re-tokenization of the
conversation would train different ids. Episodes run on the real files app, through the real
GRPOTrainer batch preparation.
"""

import asyncio
import contextvars

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from longhorizon.core.world import World  # noqa: E402
from longhorizon.env.episode import play_task  # noqa: E402
from longhorizon.policies.local_model import LocalModelPolicy  # noqa: E402
from longhorizon.policies.render import ChatRenderer  # noqa: E402
from longhorizon.policies.scripted import OraclePolicy  # noqa: E402
from longhorizon.train.config import RLConfig, SFTConfig  # noqa: E402
from longhorizon.train.gspo import group_advantages  # noqa: E402

CALL = '<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call>'


class CharPolicy(LocalModelPolicy):
    """Scripted turns, emitted one character per token; log-probs are the model's own."""

    episodes = 0

    def generate(self, prompt_ids, state=None):
        n = state.setdefault("turn", 0)
        if n == 0:
            state["episode"] = CharPolicy.episodes
            CharPolicy.episodes += 1
        state["turn"] = n + 1
        value = "42" if state["episode"] % 2 == 0 else "41"  # every other episode gets it wrong
        text = [
            "Reading the input first.\n" + CALL.format(name="files__read_file", args='{"path": "in.txt"}'),
            CALL.format(name="files__write_file", args='{"path": "out.txt", "content": "%s\\n"}' % value),
            "Done: out.txt holds the copy.",
        ][min(n, 2)]
        ids = [self._char_id(c) for c in text] + [self.tokenizer.eos_token_id]
        with torch.no_grad():
            logits = self.model(input_ids=torch.tensor([prompt_ids + ids])).logits[0, len(prompt_ids) - 1:-1]
        logprobs = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(ids)[:, None])[:, 0].tolist()
        return ids, logprobs

    def _char_id(self, c):
        ids = self.tokenizer(c, add_special_tokens=False)["input_ids"]
        assert len(ids) == 1
        return ids[0]


@pytest.fixture(scope="module")
def tasks(make_copy_task):
    return [make_copy_task("copya", "42"), make_copy_task("copyb", "42")]


MODELS = ["small_model", "gguf_model", "smol_vocab_model"]
"""The tiny Qwen3 (atomic <tool_call> tokens); a tiny GGUF converted as the embedded SmolLM2 is; and
SmolLM2's own tokenizer (its turn tokens, markup spelled in ordinary tokens) on a tiny model:
one template, every vocabulary."""


@pytest.fixture(scope="module", params=MODELS)
def rollout_batch(request, tasks, tmp_path_factory):
    """One rollout batch (2 tasks x 2 episodes) prepared by GRPOTrainer for the loss."""
    from longhorizon.train.rl import build_trainer

    path = request.getfixturevalue(request.param)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    cfg = RLConfig(out=str(tmp_path_factory.mktemp("rl")), group_size=2, tasks_per_step=2, micro_batch_size=2,
                   max_steps=1, max_turns=5, max_new_tokens=400, max_context=None, concurrency=4,
                   verify_forks="every")
    CharPolicy.episodes = 0
    trainer, rollout = build_trainer(cfg, model=model, tokenizer=tok, tasks=tasks, progress=False,
                                     policy_factory=lambda m: CharPolicy(m, tok, temperature=1.0))
    inputs = [{"prompt": t.id} for t in tasks for _ in range(2)]  # as TRL's sampler repeats them
    out = trainer._generate_and_score_completions(inputs)
    yield trainer, rollout, out, tok
    rollout.close()


def _rows(out, i):
    """(prompt ids, completion ids, loss mask) of row i, padding removed."""
    p = out["prompt_ids"][i][out["prompt_mask"][i].bool()].tolist()
    keep = out["completion_mask"][i].bool()
    c = out["completion_ids"][i][keep].tolist()
    m = (out["completion_mask"][i] * out["tool_mask"][i])[keep].tolist()
    return p, c, m


def _spans(ids, mask, want):
    spans, cur = [], []
    for t, m in zip(ids, mask):
        if m == want:
            cur.append(t)
        elif cur:
            spans.append(cur)
            cur = []
    if cur:
        spans.append(cur)
    return spans


def test_episodes_are_multi_turn_and_graded(rollout_batch):
    _, rollout, _, _ = rollout_batch
    trajs = rollout.last
    assert [len(t.turns) for t in trajs] == [3, 3, 3, 3]
    assert sorted(t.reward for t in trajs) == [0.5, 0.5, 1.0, 1.0]  # the wrong copies meet only "read"


def test_all_episodes_of_a_group_start_from_identical_world_hashes(rollout_batch, tasks, tmp_path):
    _, rollout, out, _ = rollout_batch
    trajs = rollout.last
    hashes = set()
    for k, task in enumerate(tasks):
        group = trajs[2 * k:2 * k + 2]
        assert {t.task_id for t in group} == {task.id}
        fresh = World.build(tmp_path / task.id, task.build).hash()
        hashes.add(fresh)
        # the snapshot's hash and each fork's own hash, taken before the episode touched it
        assert {t.provenance["world_hash"] for t in group} == {fresh}
        assert {t.provenance["fork_hash"] for t in group} == {fresh}
    assert len(hashes) == 2  # two tasks, two different Worlds


def test_the_ids_trained_are_the_ids_the_policy_sampled(rollout_batch, files_tools):
    trainer, rollout, out, tok = rollout_batch
    renderer = ChatRenderer(tok)
    for i, traj in enumerate(rollout.last):
        prompt, completion, mask = _rows(out, i)
        last = traj.turns[-1]
        assert prompt + completion == last["prompt_ids"] + last["token_ids"]
        sampled = [t for turn in traj.turns for t in turn["token_ids"]]
        assert [t for t, m in zip(completion, mask) if m] == sampled
        # one character per token: re-tokenizing the conversation would have trained other ids
        assert renderer.render(traj.messages, files_tools)[:len(prompt + completion)] != prompt + completion
        assert len(sampled) > len(renderer.encode(tok.decode(sampled)))


def test_sampled_logprobs_ride_along_and_match_the_trainer_forward_pass(rollout_batch):
    trainer, rollout, out, _ = rollout_batch
    input_ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
    attention = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
    with torch.no_grad():
        logps, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, input_ids, attention,
                                                                 out["completion_ids"].size(1))
    mask = (out["completion_mask"] * out["tool_mask"]).bool()
    for i, traj in enumerate(rollout.last):
        sampled = torch.tensor([lp for turn in traj.turns for lp in turn["logprobs"]])
        assert torch.allclose(out["sampling_per_token_logps"][i][mask[i]], sampled)
        assert torch.allclose(logps[i][mask[i]], sampled, atol=1e-4)


def test_rl_loss_mask_covers_exactly_the_assistant_tokens(rollout_batch):
    _, rollout, out, tok = rollout_batch
    for i, traj in enumerate(rollout.last):
        _, completion, mask = _rows(out, i)
        trained = [tok.decode(s) for s in _spans(completion, mask, 1)]
        # the first turn's tokens open the completion: every turn is one span of the mask
        assert trained == [tok.decode(turn["token_ids"]) for turn in traj.turns]
        env = [tok.decode(s) for s in _spans(completion, mask, 0)]
        assert len(env) == 2 and all(s.startswith("\n<|im_start|>user\n<tool_response>\n") for s in env)
        assert all(s.endswith("</tool_response><|im_end|>\n<|im_start|>assistant\n") for s in env)
        assert traj.tool_calls[0].result in env[0]  # the read_file result is there, and carries no loss


def test_trl_advantages_are_group_normalised_rewards(rollout_batch):
    _, rollout, out, _ = rollout_batch
    rewards = [t.reward for t in rollout.last]
    assert out["advantages"].tolist() == pytest.approx(group_advantages(rewards, 2).tolist(), abs=1e-5)


@pytest.mark.parametrize("which", MODELS)
def test_sft_labels_cover_exactly_the_assistant_tokens(which, request, files_tools, make_copy_task, tmp_path):
    from datasets import Dataset

    from longhorizon.train.data import clean_message
    from longhorizon.train.sft import build_trainer

    import json

    teacher = asyncio.run(play_task(make_copy_task(), OraclePolicy()))
    assert teacher.passed
    ds = Dataset.from_list([{"messages": [clean_message(m) for m in teacher.messages],
                             "tools": json.dumps(files_tools)}])
    path = request.getfixturevalue(which)
    tok = AutoTokenizer.from_pretrained(path)
    cfg = SFTConfig(out=str(tmp_path / "sft"), max_steps=1, max_length=None)
    trainer = build_trainer(cfg, model=AutoModelForCausalLM.from_pretrained(path), tokenizer=tok, dataset=ds,
                            progress=False)
    row = trainer.train_dataset[0]
    ids, labels = row["input_ids"], row["labels"]
    mask = [int(lab != -100) for lab in labels]
    assert all(lab == i for i, lab in zip(ids, labels) if lab != -100)
    trained = [tok.decode(s) for s in _spans(ids, mask, 1)]
    assert trained == [
        'First, read the input.\n<tool_call>\n{"name": "files__read_file", "arguments": {"path":"in.txt"}}\n'
        '</tool_call><|im_end|>',
        'Now write the copy.\n<tool_call>\n{"name": "files__write_file", "arguments": '
        '{"content":"42\\n","path":"out.txt"}}\n</tool_call><|im_end|>',
        "Copied in.txt to out.txt.<|im_end|>",
    ]
    # the same ids as rendering the whole conversation at once: SFT and RL see one template
    renderer = ChatRenderer(tok)
    messages = [clean_message(m) for m in teacher.messages]
    whole = renderer.render(messages, files_tools)
    assert whole[:len(ids)] == ids and tok.decode(whole[len(ids):]) == "\n"  # the template's closing newline


def test_sft_with_loss_on_all_trains_every_token(small_model, files_tools, make_copy_task, tmp_path):
    """The language-model warm-up: tool results and the request are learned too."""
    from datasets import Dataset

    from longhorizon.core.errors import UsageError
    from longhorizon.train.data import clean_message
    from longhorizon.train.sft import build_trainer

    import json

    teacher = asyncio.run(play_task(make_copy_task(), OraclePolicy()))
    ds = Dataset.from_list([{"messages": [clean_message(m) for m in teacher.messages],
                             "tools": json.dumps(files_tools)}])
    tok = AutoTokenizer.from_pretrained(small_model)
    cfg = SFTConfig(out=str(tmp_path / "sft"), max_steps=1, max_length=None, loss_on="all")
    trainer = build_trainer(cfg, model=AutoModelForCausalLM.from_pretrained(small_model), tokenizer=tok, dataset=ds,
                            progress=False)
    row = trainer.train_dataset[0]
    assert row["labels"] == row["input_ids"]
    assert "42" in tok.decode(row["input_ids"])  # the tool result is in what is trained
    with pytest.raises(UsageError, match="loss_on"):
        build_trainer(SFTConfig(out=str(tmp_path / "x"), loss_on="tools"),
                      model=AutoModelForCausalLM.from_pretrained(small_model), tokenizer=tok, dataset=ds,
                      progress=False)


SAMPLE = contextvars.ContextVar("sample")


class FailingCharPolicy(CharPolicy):
    """CharPolicy whose answer depends on the sample (odd samples copy it wrong), and which
    raises (a bug in our code) inside the episodes named in ``fail``, every attempt."""

    fail: set = set()

    async def act(self, messages, tools, ctx=None):
        if (ctx.task.id, ctx.sample) in self.fail:
            raise RuntimeError(f"policy bug in {ctx.task.id}#{ctx.sample}")
        SAMPLE.set(ctx.sample)  # the worker thread that generates sees this episode's context
        return await super().act(messages, tools, ctx)

    def generate(self, prompt_ids, state=None):
        if not state.get("turn"):
            CharPolicy.episodes = SAMPLE.get()  # CharPolicy: even episodes copy "42", odd ones "41"
        return super().generate(prompt_ids, state)


def test_a_failed_episode_does_not_abort_the_rl_step(small_model, tasks, tmp_path):
    """copya loses one of its 3 episodes (kept: the two survivors are normalised against each
    other), copyb loses two (dropped whole: one survivor has no baseline); the step trains."""
    import json

    from longhorizon.core.errors import InfraError
    from longhorizon.train.rl import build_trainer, dropped_episodes

    tok = AutoTokenizer.from_pretrained(small_model)
    cfg = RLConfig(out=str(tmp_path / "rl"), group_size=3, tasks_per_step=2, micro_batch_size=3, max_steps=1,
                   max_turns=5, max_new_tokens=400, max_context=None, concurrency=4, logging_steps=1)
    a, b = (t.id for t in tasks)
    policy = FailingCharPolicy
    policy.fail = {(a, 0), (b, 0), (b, 1)}
    trainer, rollout = build_trainer(cfg, model=AutoModelForCausalLM.from_pretrained(small_model), tokenizer=tok,
                                     tasks=tasks, progress=False,
                                     policy_factory=lambda m: policy(m, tok, temperature=1.0))
    seen = []
    generate = trainer._generate_and_score_completions
    trainer._generate_and_score_completions = lambda inputs: seen.append(generate(inputs)) or seen[-1]
    try:
        trainer.train()  # one whole step: rollout, advantages, loss, optimizer
        assert trainer.state.global_step == 1
        out = seen[0]
        trajs = rollout.last
        by_id = {t.episode_id: k for k, t in enumerate(trajs)}
        assert {t.episode_id for t in trajs if t.status == "infra_error"} == {f"{a}#0", f"{b}#0", f"{b}#1"}
        trained = (out["completion_mask"] * out["tool_mask"]).sum(1).tolist()
        adv = out["advantages"].tolist()
        for eid in (f"{a}#0", f"{b}#0", f"{b}#1", f"{b}#2"):  # left out of the update
            assert trained[by_id[eid]] == 0 and adv[by_id[eid]] == 0.0
        assert trained[by_id[f"{a}#1"]] > 0 and trained[by_id[f"{a}#2"]] > 0
        assert adv[by_id[f"{a}#2"]] > 0 > adv[by_id[f"{a}#1"]]  # 42 (reward 1) beats 41 (reward 0.5)
        errors = [json.loads(x) for x in (tmp_path / "rl" / "rollout_errors.jsonl").read_text().splitlines()]
        assert sorted(e["episode_id"] for e in errors) == sorted([f"{a}#0", f"{b}#0", f"{b}#1"])
        assert all("RuntimeError: policy bug" in e["error"] for e in errors)
        rows = [json.loads(x) for x in (tmp_path / "rl" / "rollouts.jsonl").read_text().splitlines()]
        assert {r["episode_id"]: r["rl_dropped"] for r in rows} == {f"{a}#1": False, f"{a}#2": False, f"{b}#2": True}
        assert trainer.state.log_history[0]["episode/failed"] == 3.0

        policy.fail = {(t.id, s) for t in tasks for s in range(3)}  # nothing left to learn from
        rollout._policy = None
        with pytest.raises(InfraError, match="no group is left"):
            rollout([t.id for t in tasks for _ in range(3)], trainer)
    finally:
        rollout.close()
    assert dropped_episodes([True, False, False, True, True, False], 3) == [True, False, False, True, True, True]
