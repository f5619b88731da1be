"""Off-policy arithmetic: the sampler/trainer importance correction against hand computation, the
mismatch it logs, the log-probs of the local policy's own sampler at T = 0.7, and an optimizer
step without gradient that must leave the weights alone."""

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from longhorizon.policies.local_model import LocalModelPolicy  # noqa: E402
from longhorizon.train.config import RLConfig  # noqa: E402
from longhorizon.train.gspo import importance_weights, policy_loss, sampler_mismatch  # noqa: E402

# Two episodes, three completion slots; episode 1's last slot is not sampled (mask 0).
TRAINER = [[-1.0, -2.0, -0.5], [-0.3, -0.3, -9.0]]
SAMPLER = [[-1.5, -1.0, -0.5], [-0.2, -1.8, -1.0]]
MASK = [[1, 1, 1], [1, 1, 0]]
# log π_trainer - log π_sampler on the sampled tokens: [0.5, -1.0, 0.0] and [-0.1, 1.5]
DIFFS = [0.5, -1.0, 0.0, -0.1, 1.5]


def _w(mode, cap=2.0):
    return importance_weights(torch.tensor(TRAINER), torch.tensor(SAMPLER), torch.tensor(MASK), mode=mode, cap=cap)


def test_importance_weights_match_a_hand_computation():
    # TIS: min(exp(diff), 2) per sampled token; an unsampled slot is 1 (it carries no loss anyway)
    tis = [[math.exp(0.5), math.exp(-1.0), 1.0], [math.exp(-0.1), 2.0, 1.0]]
    assert torch.allclose(_w("token_truncate"), torch.tensor(tis), rtol=1e-6)
    # token mask: ratio in [1/2, 2]: e^-1 = 0.37 and e^1.5 = 4.5 are out
    assert _w("token_mask").tolist() == [[1.0, 0.0, 1.0], [1.0, 0.0, 1.0]]
    # sequence mask on the geometric mean: episode 0 exp(-0.5/3) = 0.85 is in, episode 1 exp(1.4/2) = 2.01 is out
    assert _w("sequence_mask").tolist() == [[1.0], [0.0]]
    assert _w("sequence_mask", cap=2.1).tolist() == [[1.0], [1.0]]


def test_the_mismatch_is_the_mean_absolute_log_ratio_and_a_kl_estimate():
    got = sampler_mismatch(torch.tensor(TRAINER), torch.tensor(SAMPLER), torch.tensor(MASK))
    assert got["logp_diff"] == pytest.approx(sum(abs(d) for d in DIFFS) / 5)
    assert got["logp_diff_max"] == pytest.approx(1.5)
    # k3: E_sampler[r - 1 - log r], r = π_trainer / π_sampler
    assert got["kl"] == pytest.approx(sum(math.exp(d) - 1 - d for d in DIFFS) / 5)
    same = sampler_mismatch(torch.tensor(TRAINER), torch.tensor(TRAINER), torch.tensor(MASK))
    assert same == {"logp_diff": 0.0, "logp_diff_max": 0.0, "kl": 0.0}


def hand_corrected_gspo(new, old, adv, mask, weights, eps_low, eps_high):
    """-mean_i (1/|y_i|) Σ_t w_i,t min(s_i A_i, clip(s_i) A_i): GSPO with each token's term weighted."""
    terms = []
    for n, o, a, m, w in zip(new, old, adv, mask, weights):
        toks = [t for t in range(len(m)) if m[t]]
        s = math.exp(sum(n[t] - o[t] for t in toks) / len(toks))
        term = min(s * a, min(max(s, 1 - eps_low), 1 + eps_high) * a)
        terms.append(sum(w[t] * term for t in toks) / len(toks))
    return -sum(terms) / len(terms)


@pytest.fixture(scope="module")
def rl_trainer(tmp_path_factory):
    from datasets import Dataset
    from trl import GRPOConfig

    from longhorizon.train.gspo import trl_settings
    from longhorizon.train.rl_trainer import RLTrainer
    from longhorizon.train.tiny import build_tiny_model, default_corpus

    path = build_tiny_model(tmp_path_factory.mktemp("m"), default_corpus(families=[]), hidden_size=32, num_layers=1,
                            num_heads=2, num_kv_heads=1, intermediate_size=64)
    args = GRPOConfig(output_dir=str(tmp_path_factory.mktemp("out")), num_generations=2,
                      per_device_train_batch_size=2, report_to="none", use_cpu=True,
                      **trl_settings("gspo", 0.2, 0.28))
    trainer = RLTrainer(model=AutoModelForCausalLM.from_pretrained(path), reward_funcs=[lambda **kw: [0.0]],
                        args=args, train_dataset=Dataset.from_dict({"prompt": ["a", "b"]}),
                        processing_class=AutoTokenizer.from_pretrained(path))
    trainer.current_gradient_accumulation_steps = 1
    return trainer


def test_trls_loss_with_the_correction_is_the_weighted_gspo_objective(rl_trainer, monkeypatch):
    new = [[o + d for o, d in zip(row, drow)] for row, drow in zip(TRAINER, [[0.1, 0.3, 0.0], [-0.2, 0.0, 0.0]])]
    adv = [0.8, -0.8]
    weights = _w("token_truncate")
    hand = hand_corrected_gspo(new, TRAINER, adv, MASK, weights.tolist(), 0.2, 0.28)
    spec, _ = policy_loss(torch.tensor(new), torch.tensor(TRAINER), torch.tensor(adv), torch.tensor(MASK),
                          epsilon_low=0.2, epsilon_high=0.28, is_weights=weights)
    assert spec.item() == pytest.approx(hand, rel=1e-6)

    logps = torch.tensor(new, requires_grad=True)
    monkeypatch.setattr(rl_trainer, "_get_per_token_logps_and_entropies",
                        lambda *a, **k: (logps, torch.zeros_like(logps), None))
    mask = torch.tensor(MASK)
    inputs = {
        "prompt_ids": torch.ones(2, 1, dtype=torch.long), "prompt_mask": torch.ones(2, 1, dtype=torch.long),
        "completion_ids": torch.ones(2, 3, dtype=torch.long), "completion_mask": torch.ones(2, 3, dtype=torch.long),
        "tool_mask": mask, "advantages": torch.tensor(adv), "old_per_token_logps": torch.tensor(TRAINER),
        "num_items_in_batch": mask.sum(), "is_weights": weights,
    }
    rl_trainer.model.train()
    assert rl_trainer._compute_loss(rl_trainer.model, inputs).item() == pytest.approx(hand, rel=1e-5)
    del inputs["is_weights"]  # uncorrected: a different number (the weights are not all 1)
    assert rl_trainer._compute_loss(rl_trainer.model, inputs).item() != pytest.approx(hand, rel=1e-3)


def test_on_policy_the_correction_comes_from_the_training_forward_without_another_pass(rl_trainer, monkeypatch):
    """One update per rollout: TRL has no old log-probs, so the weights come from the loss's own
    forward (detached), and equal the hand computation with the trainer's log-probs as π_old."""
    from trl import GRPOTrainer

    adv = [0.8, -0.8]
    logps = torch.tensor(TRAINER, requires_grad=True)
    calls = []

    def forward(self, *a, **k):
        calls.append(1)
        return logps, torch.zeros_like(logps), None

    monkeypatch.setattr(GRPOTrainer, "_get_per_token_logps_and_entropies", forward)
    mask = torch.tensor(MASK)
    inputs = {
        "prompt_ids": torch.ones(2, 1, dtype=torch.long), "prompt_mask": torch.ones(2, 1, dtype=torch.long),
        "completion_ids": torch.ones(2, 3, dtype=torch.long), "completion_mask": torch.ones(2, 3, dtype=torch.long),
        "tool_mask": mask, "advantages": torch.tensor(adv), "sampling_per_token_logps": torch.tensor(SAMPLER),
        "num_items_in_batch": mask.sum(),
    }
    rl_trainer.model.train()
    rl_trainer._metrics["train"].clear()
    out = dict(inputs)
    rl_trainer._correct_for_the_sampler(out, "train")
    assert "is_weights" not in out and not calls  # nothing computed at rollout time
    hand = hand_corrected_gspo(TRAINER, TRAINER, adv, MASK, _w("token_truncate").tolist(), 0.2, 0.28)
    assert rl_trainer._compute_loss(rl_trainer.model, inputs).item() == pytest.approx(hand, rel=1e-5)
    assert len(calls) == 1  # one forward: the training one
    assert inputs["advantages"].tolist() == pytest.approx(adv)  # the caller's batch is left as it was
    assert rl_trainer._metrics["train"]["sampler/logp_diff"][-1] == pytest.approx(sum(abs(d) for d in DIFFS) / 5)
    uncorrected = hand_corrected_gspo(TRAINER, TRAINER, adv, MASK, [[1.0] * 3] * 2, 0.2, 0.28)
    assert hand != pytest.approx(uncorrected, rel=1e-3)  # the weights changed the loss
    rl_trainer.is_correction = "off"
    try:
        assert rl_trainer._compute_loss(rl_trainer.model, inputs).item() == pytest.approx(uncorrected, rel=1e-5)
    finally:
        rl_trainer.is_correction = "token_truncate"


def test_a_micro_batch_is_cut_to_its_own_length_with_the_same_loss_and_gradient(rl_trainer):
    """An episode padded to the rollout's longest (left in the prompt, right in the completion)
    trains exactly as it does at its own length."""
    from longhorizon.train.rl_trainer import trim_padding

    pad = rl_trainer.processing_class.pad_token_id or 0
    ids = lambda *t: torch.tensor([list(t)])  # noqa: E731
    batch = {
        "prompt_ids": ids(pad, pad, 5, 6, 7), "prompt_mask": ids(0, 0, 1, 1, 1),
        "completion_ids": ids(8, 9, 10, 11, pad, pad, pad), "completion_mask": ids(1, 1, 1, 1, 0, 0, 0),
        "tool_mask": ids(1, 0, 1, 1, 1, 1, 1), "sampling_per_token_logps": torch.tensor([[-1.0, -2, -3, -4, 0, 0, 0]]),
        "advantages": torch.tensor([0.7]), "num_items_in_batch": torch.tensor(3),
    }
    cut = trim_padding(batch)
    assert cut["prompt_ids"].tolist() == [[5, 6, 7]] and cut["prompt_mask"].tolist() == [[1, 1, 1]]
    assert cut["completion_ids"].tolist() == [[8, 9, 10, 11]] and cut["tool_mask"].tolist() == [[1, 0, 1, 1]]
    assert cut["sampling_per_token_logps"].tolist() == [[-1.0, -2, -3, -4]]
    assert cut["advantages"] is batch["advantages"] and trim_padding(cut) is cut

    old = {"old_per_token_logps": torch.tensor([[-1.2, -2.2, -2.9, -3.5, 0, 0, 0]])}
    rl_trainer.model.train()
    grads = []
    for inputs in (batch | old, cut | {"old_per_token_logps": old["old_per_token_logps"][:, :4]}):
        rl_trainer.model.zero_grad()
        loss = rl_trainer._compute_loss(rl_trainer.model, inputs)
        loss.backward()
        grads.append((loss.item(), [p.grad.clone() for p in rl_trainer.model.parameters() if p.grad is not None]))
    (padded, g_padded), (own, g_own) = grads
    assert own == pytest.approx(padded, rel=1e-4) and own != 0  # float rounding only
    # the tiny model is bfloat16: equal to its rounding (~1% of each tensor's largest entry)
    assert len(g_own) == len(g_padded) and all((a - b).abs().max() <= 0.02 * b.abs().max() for a, b in zip(g_own, g_padded))
    rl_trainer.model.zero_grad()


class Scripted(LocalModelPolicy):
    """Copies in.txt to out.txt in three turns, written as ordinary tokens; the value written is
    ``value(seed, sample)``; log-probs are the model's own (at temperature 1), as a sampler's would be."""

    value = staticmethod(lambda seed, sample: "42")

    async def act(self, messages, tools, ctx=None):
        ctx.scratch.setdefault("local_model", {})["sample"] = ctx.sample
        return await super().act(messages, tools, ctx)

    def generate(self, prompt_ids, state=None):
        n = state.setdefault("turn", 0)
        state["turn"] = n + 1
        call = '<tool_call>\n{{"name": "{}", "arguments": {}}}\n</tool_call>'
        text = [call.format("files__read_file", '{"path": "in.txt"}'),
                call.format("files__write_file",
                            '{"path": "out.txt", "content": "%s"}' % self.value(self.seed, state["sample"])),
                "Done."][min(n, 2)]
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"] + [self.tokenizer.eos_token_id]
        with torch.no_grad():
            logits = self.model(input_ids=torch.tensor([prompt_ids + ids])).logits[0, len(prompt_ids) - 1:-1]
        return ids, torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(ids)[:, None])[:, 0].tolist()


def test_a_step_without_gradient_leaves_the_weights_bitwise_unchanged(small_model, make_copy_task, tmp_path):
    """Step 1's group is mixed (one copy right, one wrong): it trains. Step 2's group is flat (both
    right): zero gradient, and AdamW's momentum from step 1 must not move the weights anyway."""
    from transformers import TrainerCallback

    from longhorizon.train.rl import build_trainer, rollout_seed

    first_step = rollout_seed(0, 0)

    class ScriptedSteps(Scripted):
        value = staticmethod(lambda seed, sample: "41" if seed == first_step and sample == 1 else "42")

    class Snapshots(TrainerCallback):
        def __init__(self):
            self.weights = []

        def on_step_end(self, args, state, control, model=None, **kw):
            self.weights.append({k: v.detach().clone() for k, v in model.state_dict().items()})

    tok = AutoTokenizer.from_pretrained(small_model)
    model = AutoModelForCausalLM.from_pretrained(small_model)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    cfg = RLConfig(out=str(tmp_path / "rl"), group_size=2, micro_batch_size=2, max_steps=2, max_turns=4,
                   max_new_tokens=200, max_context=None, concurrency=2, learning_rate=1e-3, logging_steps=1)
    snaps = Snapshots()
    trainer, rollout = build_trainer(cfg, model=model, tokenizer=tok, tasks=[make_copy_task("zg", "42")],
                                     progress=False, callbacks=[snaps],
                                     policy_factory=lambda m: ScriptedSteps(m, tok, temperature=1.0))
    try:
        trainer.train()
    finally:
        rollout.close()
    logs = [row for row in trainer.state.log_history if "optimizer/stepped" in row]
    assert [row["sampling/reward_played"] for row in logs] == [0.75, 1.0]  # step 2's group is flat
    assert [row["optimizer/stepped"] for row in logs] == [1.0, 0.0]
    assert logs[0]["optimizer/weight_change"] > 0 and logs[1]["optimizer/weight_change"] == 0.0
    after_1, after_2 = snaps.weights
    assert any(not torch.equal(start[k], after_1[k]) for k in start)  # step 1 trained
    assert all(torch.equal(after_1[k], after_2[k]) for k in after_1)  # step 2 left every weight as it was
    assert logs[0]["sampler/logp_diff"] < 1e-4  # the scripted sampler's log-probs are the trainer's own


def test_sampled_logprobs_at_temperature_0_7_equal_the_trainers_recomputation(small_model, make_copy_task,
                                                                              tmp_path):
    """The local policy's own sampler (batched, KV cache) at T = 0.7, against TRL's forward pass
    over the trained sequence at the same temperature."""
    from longhorizon.train.rl import build_trainer

    tok = AutoTokenizer.from_pretrained(small_model)
    task = make_copy_task("t07", "7")
    cfg = RLConfig(out=str(tmp_path / "rl"), group_size=3, micro_batch_size=3, max_steps=1, max_turns=2,
                   max_new_tokens=24, max_context=None, concurrency=3, temperature=0.7)
    trainer, rollout = build_trainer(cfg, model=AutoModelForCausalLM.from_pretrained(small_model), tokenizer=tok,
                                     tasks=[task], progress=False)
    try:
        trainer.model.train()  # as in training (the step's metrics are the train ones)
        out = trainer._generate_and_score_completions([{"prompt": task.id}] * 3)
        policy = rollout.policy(trainer.model)
        assert isinstance(policy, LocalModelPolicy) and policy.temperature == 0.7 == trainer.temperature
        mask = (out["completion_mask"] * out["tool_mask"]).bool()
        assert mask.sum() >= 3 * 24 // 2  # tokens were sampled
        sampled = out["sampling_per_token_logps"][mask]
        ids = torch.cat([out["prompt_ids"], out["completion_ids"]], 1)
        attention = torch.cat([out["prompt_mask"], out["completion_mask"]], 1)
        with torch.no_grad():
            recomputed, _, _ = trainer._get_per_token_logps_and_entropies(trainer.model, ids, attention,
                                                                          out["completion_ids"].size(1))
        assert torch.allclose(recomputed[mask], sampled, atol=1e-4)
        trainer.current_gradient_accumulation_steps = 1
        trainer._compute_loss(trainer.model, out)  # on-policy: the mismatch is measured in the loss's forward
        assert trainer._metrics["train"]["sampler/logp_diff"][-1] < 1e-4
        # the temperature matters: at T = 1 the same tokens have other log-probs
        with torch.no_grad():
            logits = trainer.model(input_ids=ids, attention_mask=attention).logits
        t1 = torch.log_softmax(logits[:, -out["completion_ids"].size(1) - 1:-1].float(), -1).gather(
            -1, out["completion_ids"][..., None])[..., 0]
        assert not torch.allclose(t1[mask], sampled, atol=1e-2)
    finally:
        rollout.close()
