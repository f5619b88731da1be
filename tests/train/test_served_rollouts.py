"""RL rollouts sampled by a server, token in / token out, and the trainer's weights pushed to it.

The server is the loopback stand-in answering vLLM's ``/v1/completions`` with token-id prompts
and its dev-mode weight endpoints. Its brain is a real (tiny) transformers model: it writes
scripted turns one character per token (ids the tokenizer would never produce for that text,
so any re-rendering of the conversation would condition on, and train, other ids) and reports
each id's log-probability under its current weights, which ``reload_weights`` replaces. The
same checks against the real vLLM server are in tests/serve/test_vllm_rl.py.
"""

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from longhorizon.core.errors import InfraError  # noqa: E402
from longhorizon.env.episode import Limits, play_task  # noqa: E402
from longhorizon.policies.render import ChatRenderer  # noqa: E402
from longhorizon.policies.served_tokens import ServedTokensPolicy  # noqa: E402
from longhorizon.testing.standin_llm import StandinLLM  # noqa: E402
from longhorizon.train.config import RLConfig  # noqa: E402
from longhorizon.train.rl import episode_sequence  # noqa: E402

CALL = '<tool_call>\n{{"name": "{name}", "arguments": {args}}}\n</tool_call>'


class ModelBrain:
    """The stand-in's completion brain and weight endpoint, on a real model.

    Turns follow the copy task's script (read in.txt, write out.txt, answer); episode k of the
    server's life writes "42" when k is even and "41" when odd, so a group has a reward spread.
    A request continues the episode whose last prompt + sampled ids it extends (checked here,
    on the server side, too); anything else starts a new episode.
    """

    def __init__(self, model_dir):
        self.tok = AutoTokenizer.from_pretrained(model_dir)
        self.model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
        self.seen: list[tuple[list[int], int, int]] = []  # (prompt + sampled ids, episode, turn)
        self.episodes = 0
        self.reloaded: list[str] = []

    def __call__(self, body):
        prompt = body["prompt"]
        before = [(ids, ep, turn) for ids, ep, turn in self.seen if prompt[:len(ids)] == ids and len(ids) < len(prompt)]
        if before:
            _, episode, turn = max(before, key=lambda s: len(s[0]))
            turn += 1
        else:
            episode, turn = self.episodes, 0
            self.episodes += 1
        value = "42" if episode % 2 == 0 else "41"
        intro = "Reading the input first." if episode % 2 == 0 else "First, read in.txt."  # tells episodes apart
        text = [intro + "\n" + CALL.format(name="files__read_file", args='{"path": "in.txt"}'),
                CALL.format(name="files__write_file", args='{"path": "out.txt", "content": "%s\\n"}' % value),
                "Done: out.txt holds the copy."][min(turn, 2)]
        ids = [self.tok(c, add_special_tokens=False)["input_ids"][0] for c in text] + [self.tok.eos_token_id]
        self.seen.append((prompt + ids, episode, turn))
        return {"token_ids": ids, "logprobs": self.logprobs(prompt, ids, body.get("temperature") or 1.0)}

    def logprobs(self, prompt, ids, temperature=1.0):
        with torch.no_grad():
            logits = self.model(input_ids=torch.tensor([prompt + ids])).logits[0, len(prompt) - 1:-1]
        logp = torch.log_softmax(logits.float() / temperature, -1)
        return logp.gather(-1, torch.tensor(ids)[:, None])[:, 0].tolist()

    def control(self, path, body):
        if path == "/collective_rpc" and body.get("method") == "reload_weights":
            from safetensors.torch import load_file

            folder = body["kwargs"]["weights_path"]
            state = load_file(str(Path(folder) / "model.safetensors"))
            missing, unexpected = self.model.load_state_dict(state, strict=False)
            assert not unexpected and not [k for k in missing if "lm_head" not in k]
            self.reloaded.append(folder)
            return {"results": [None]}
        return {}


@pytest.fixture
def served(small_model):
    brain = ModelBrain(small_model)
    with StandinLLM(completion_brain=brain, control=brain.control, model="policy",
                    model_card={"root": str(small_model), "max_model_len": 4096}) as server:
        yield server, brain


async def test_each_served_turn_sends_the_previous_prompt_plus_the_sampled_ids(served, small_model, make_copy_task):
    server, _ = served
    policy = ServedTokensPolicy(server.base_url, "policy", small_model, max_new_tokens=400, max_context=4096)
    traj = await play_task(make_copy_task(), policy, limits=Limits(max_turns=5))
    assert traj.passed and len(traj.turns) == 3
    renderer = ChatRenderer(AutoTokenizer.from_pretrained(small_model))
    for k, (before, turn) in enumerate(zip(traj.turns, traj.turns[1:])):
        results = [m for m in traj.messages if m["role"] == "tool"][k:k + 1]
        assert turn["prompt_ids"] == before["prompt_ids"] + before["token_ids"] + renderer.continuation_ids(results)
    sent = [r["prompt"] for r in server.completion_requests]
    assert sent == [t["prompt_ids"] for t in traj.turns]  # exactly these ids went over the wire
    seq = episode_sequence(traj, renderer.eos_id)
    last = traj.turns[-1]
    assert seq["prompt_ids"] + seq["completion_ids"] == last["prompt_ids"] + last["token_ids"]
    # one character per token: a re-rendering of the conversation would be other ids
    assert renderer.render(traj.messages, traj.tools)[:len(last["prompt_ids"])] != last["prompt_ids"]


async def test_tool_calls_are_parsed_from_the_sampled_ids_and_their_logprobs_recorded(served, small_model,
                                                                                     make_copy_task):
    server, brain = served
    policy = ServedTokensPolicy(server.base_url, "policy", small_model, max_new_tokens=400, temperature=0.7)
    traj = await play_task(make_copy_task(), policy, limits=Limits(max_turns=5))
    assert [c.name for c in traj.tool_calls] == ["files__read_file", "files__write_file"]
    first = traj.turns[0]
    assert first["logprobs"] == pytest.approx(brain.logprobs(first["prompt_ids"], first["token_ids"], 0.7))
    body = server.completion_requests[0]
    assert body["temperature"] == 0.7 and body["logprobs"] == 0 and body["return_token_ids"] is True


async def test_a_reply_cut_by_the_budget_gets_the_end_of_turn_token_as_an_env_token(served, small_model):
    server, _ = served
    policy = ServedTokensPolicy(server.base_url, "policy", small_model, max_new_tokens=5)
    state: dict = {}
    messages = [{"role": "user", "content": "Copy in.txt to out.txt."}]
    msg = await policy.complete_turn(messages, [], state)
    assert len(msg["token_ids"]) == 5 and msg["token_ids"][-1] != policy.renderer.eos_id
    assert state["ids"] == msg["prompt_ids"] + msg["token_ids"] + [policy.renderer.eos_id]


def test_a_server_that_conditions_on_other_ids_breaks_the_turn_as_an_infra_error():
    reply = {"choices": [{"token_ids": [5, 6], "prompt_token_ids": [1, 2, 4],
                          "logprobs": {"token_logprobs": [-0.1, -0.2], "tokens": ["token_id:5", "token_id:6"]}}]}
    assert ServedTokensPolicy.sampled(reply, [1, 2, 4]) == ([5, 6], [-0.1, -0.2])
    with pytest.raises(InfraError, match="token-in/token-out is broken"):
        ServedTokensPolicy.sampled(reply, [1, 2, 3])
    with pytest.raises(InfraError, match="no sampled token ids or log-probs"):
        ServedTokensPolicy.sampled({"choices": [{"text": "hi"}]}, [1])


def _cfg(tmp_path, server, **kw):
    return RLConfig(out=str(tmp_path / "rl"), sampler="vllm", sampler_url=server.base_url, group_size=2,
                    tasks_per_step=1, micro_batch_size=2, max_turns=5, max_new_tokens=400, max_context=4096,
                    concurrency=2, logging_steps=1, sampler_dtype="float32", **kw)


def test_a_sync_makes_the_server_sample_from_the_trainers_current_weights(served, small_model, tmp_path):
    from longhorizon.train.served_sampler import ServedSampler

    server, brain = served
    model = AutoModelForCausalLM.from_pretrained(small_model)
    sampler = ServedSampler(_cfg(tmp_path, server), AutoTokenizer.from_pretrained(small_model)).start(model)
    try:
        prompt, ids = [1, 2, 3, 4], [5, 6, 7]
        before = brain.logprobs(prompt, ids)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.05 * torch.randn_like(p))
        sampler.sync(model)
        after = brain.logprobs(prompt, ids)
        assert after != pytest.approx(before, abs=1e-3)
        with torch.no_grad():
            local = torch.log_softmax(model(input_ids=torch.tensor([prompt + ids])).logits[0, 3:-1], -1)
        assert after == pytest.approx(local.gather(-1, torch.tensor(ids)[:, None])[:, 0].tolist(), abs=1e-4)
        assert len(brain.reloaded) == 2 and len(sampler.sync_seconds) == 2  # at start, then after the change
    finally:
        sampler.close()
    assert not sampler.work.exists()


def test_after_an_optimizer_step_the_next_rollout_samples_from_the_new_weights(served, small_model, make_copy_task,
                                                                             tmp_path):
    """Two GSPO steps on one task: both rollouts start from the same prompt and write the same
    ids, so their first turns' log-probs differ only if the step's weights reached the server."""
    from longhorizon.train.rl import build_trainer

    server, brain = served
    tok = AutoTokenizer.from_pretrained(small_model)
    cfg = _cfg(tmp_path, server, max_steps=2, learning_rate=1e-2, temperature=1.0)
    from transformers import TrainerCallback

    logged = []

    class Logs(TrainerCallback):  # what a run's log.jsonl receives
        def on_log(self, args, state, control, logs=None, **kw):
            logged.append(dict(logs))

    trainer, rollout = build_trainer(cfg, model=AutoModelForCausalLM.from_pretrained(small_model), tokenizer=tok,
                                     tasks=[make_copy_task()], progress=False, callbacks=[Logs()])
    firsts = []

    def record(prompts, trainer):
        out = rollout(prompts, trainer)
        firsts.append([t.turns[0] for t in rollout.last])
        return out

    trainer.rollout_func = record
    try:
        trainer.train()
    finally:
        rollout.close()
    assert trainer.state.global_step == 2 and len(firsts) == 2
    first, second = ({tuple(t["token_ids"]): t for t in turns} for turns in firsts)
    assert first.keys() == second.keys()  # the same first turns (one per variant of the script)...
    for ids, a in first.items():
        b = second[ids]
        assert a["prompt_ids"] == b["prompt_ids"]
        assert a["logprobs"] != pytest.approx(b["logprobs"], abs=1e-4)  # ...scored by the new weights
    assert len(brain.reloaded) == 2  # when the run attached to the server, and after step 1 (not after the last)
    synced = [row["sampler/sync_s"] for row in logged if "sampler/sync_s" in row]
    assert len(synced) == 1 and synced[0] > 0  # step 1's sync, in step 1's log line
    assert all(t.provenance.get("world_hash") for t in rollout.last)
    assert {t.provenance["policy"]["policy"] for t in rollout.last} == {"served_tokens"}


def test_push_weights_to_a_server_without_dev_mode_says_how_to_start_it(tmp_path):
    from longhorizon.serve.weight_sync import push_weights

    with StandinLLM() as server:
        with pytest.raises(InfraError, match="--weight-sync"):
            push_weights(server.base_url, tmp_path)


def test_run_with_the_served_policy_records_token_data_from_the_server(served, small_model, tmp_path):
    from longhorizon.cli import main

    server, _ = served
    out = tmp_path / "run"
    assert main(["run", "--policy", "served", "--base-url", server.base_url, "--split", "train",
                 "--family", "log_first_error", "--seeds", "1", "--max-turns", "2", "--max-tokens", "400",
                 "--out", str(out), "--quiet"]) in (0, 1)
    [traj] = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    policy = traj["provenance"]["policy"]
    assert policy["policy"] == "served_tokens" and policy["tokenizer"] == str(small_model)
    assert traj["turns"] and all(len(t["logprobs"]) == len(t["token_ids"]) > 0 for t in traj["turns"])
    sent = [r["prompt"] for r in server.completion_requests]
    assert sent == [t["prompt_ids"] for t in traj["turns"]]


def test_lora_weights_reach_the_server_merged_and_the_trained_model_is_left_as_it_is(small_model, tmp_path):
    from peft import LoraConfig, get_peft_model
    from safetensors.torch import load_file

    from longhorizon.serve.weight_sync import write_weights

    model = get_peft_model(AutoModelForCausalLM.from_pretrained(small_model),
                           LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "down_proj"]))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_()  # a trained adapter (B starts at 0)
    trained = {k: v.clone() for k, v in model.state_dict().items()}
    written = load_file(str(write_weights(model, tmp_path)))
    assert {k: v.tolist() for k, v in model.state_dict().items()} == {k: v.tolist() for k, v in trained.items()}
    merged = model.merge_and_unload().state_dict()
    assert set(written) == set(merged) | {"lm_head.weight"}
    for k, v in merged.items():
        assert torch.allclose(written[k], v, atol=1e-6), k


def test_a_tied_model_is_served_from_an_untied_copy_with_the_same_outputs(small_model, tmp_path):
    from longhorizon.serve.weight_sync import is_tied, untied_copy

    assert is_tied(small_model)
    copy = untied_copy(small_model, tmp_path / "served")
    assert not is_tied(copy) and untied_copy(copy, tmp_path / "again") == copy  # untied: served as it is
    a, b = AutoModelForCausalLM.from_pretrained(small_model), AutoModelForCausalLM.from_pretrained(copy)
    assert b.lm_head.weight.data_ptr() != b.get_input_embeddings().weight.data_ptr()
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        assert torch.equal(a(input_ids=ids).logits, b(input_ids=ids).logits)
    assert AutoTokenizer.from_pretrained(copy).chat_template == AutoTokenizer.from_pretrained(small_model).chat_template


def test_weight_sync_serving_listens_on_this_machine_only(capsys):
    from longhorizon.cli import main

    assert main(["serve", "--weight-sync", "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--weight-sync" in err and "127.0.0.1" in err and "\n" not in err


def test_train_rl_with_the_vllm_sampler_plays_its_rollouts_on_the_server(served, small_model, tmp_path):
    from longhorizon.cli import main

    server, brain = served
    out = tmp_path / "rl"
    assert main(["train", "rl", "--model", str(small_model), "--out", str(out), "--family", "log_first_error",
                 "--seeds", "1", "--group-size", "2", "--micro-batch-size", "2", "--max-turns", "2",
                 "--max-new-tokens", "400", "--max-context", "4096", "--max-steps", "1", "--sampler", "vllm",
                 "--sampler-url", server.base_url, "--sampler-dtype", "float32", "--quiet"]) == 0
    assert len(server.completion_requests) >= 2  # every turn of both episodes came from the server
    assert len(brain.reloaded) == 1  # the run's starting weights, pushed when it attached
    rows = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    assert {r["provenance"]["policy"]["policy"] for r in rows} == {"served_tokens"}
    assert json.loads((out / "rl_config.json").read_text())["sampler"] == "vllm"


def test_a_resumed_run_pushes_the_checkpoints_weights_when_training_begins(small_model, tmp_path):
    """The server starts on the model the run was built on; a resumed trainer loads the
    checkpoint's weights afterwards, so they go to the server when training begins (a fresh run
    pushes nothing extra)."""
    from longhorizon.train.served_sampler import ServedSampler

    sampler = ServedSampler(RLConfig(out=str(tmp_path), sampler="vllm", sampler_url="http://127.0.0.1:1/v1"),
                            AutoTokenizer.from_pretrained(small_model))
    pushed = []
    sampler.sync = lambda model: pushed.append(model) or 0.1
    callback = sampler.callback()
    callback.on_train_begin(None, None, None, model="fresh")
    sampler.resuming = True
    callback.on_train_begin(None, None, None, model="resumed")
    assert pushed == ["resumed"]
