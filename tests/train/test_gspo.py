"""The GSPO and token-level GRPO losses against numbers worked out by hand, for our readable
specification (train/gspo.py) and for TRL's GRPOTrainer loss, which is what actually trains."""

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from longhorizon.train.gspo import group_advantages, policy_loss, trl_settings  # noqa: E402

# Two groups of two episodes, three completion slots each; mask marks sampled tokens.
REWARDS = [1.0, 0.0, 0.2, 0.6]
MASK = [[1, 1, 0], [1, 1, 1], [1, 0, 0], [1, 1, 1]]
OLD = [[-1.0, -2.0, 0.0], [-0.5, -0.5, -0.5], [-1.0, 0.0, 0.0], [-2.0, -1.0, -1.0]]
# log π_θ - log π_old per token: episode 0 up, episode 1 up, episode 2 down, episode 3 up/down
DELTA = [[0.3, 0.1, 9.0], [0.2, 0.0, 0.1], [-0.5, 9.0, 9.0], [0.4, -0.1, 0.0]]
NEW = [[o + d for o, d in zip(orow, drow)] for orow, drow in zip(OLD, DELTA)]


def hand_advantages():
    # group 1: rewards 1.0, 0.0 -> mean 0.5, sample std sqrt((0.25 + 0.25) / 1) = 0.70711
    s1 = math.sqrt(0.5)
    # group 2: rewards 0.2, 0.6 -> mean 0.4, sample std sqrt((0.04 + 0.04) / 1) = 0.28284
    s2 = math.sqrt(0.08)
    return [0.5 / (s1 + 1e-4), -0.5 / (s1 + 1e-4), -0.2 / (s2 + 1e-4), 0.2 / (s2 + 1e-4)]


def hand_gspo(eps_low, eps_high):
    A = hand_advantages()
    # sequence ratios: exp(mean of the masked log-ratio)
    s = [math.exp((0.3 + 0.1) / 2), math.exp((0.2 + 0.0 + 0.1) / 3), math.exp(-0.5 / 1), math.exp((0.4 - 0.1 + 0.0) / 3)]
    terms = []
    for si, ai in zip(s, A):
        clipped = min(max(si, 1 - eps_low), 1 + eps_high)
        terms.append(min(si * ai, clipped * ai))
    return -sum(terms) / 4


def hand_grpo(eps_low, eps_high):
    A = hand_advantages()
    per_episode = []
    for i in range(4):
        toks = [DELTA[i][t] for t in range(3) if MASK[i][t]]
        vals = []
        for d in toks:
            r = math.exp(d)
            vals.append(min(r * A[i], min(max(r, 1 - eps_low), 1 + eps_high) * A[i]))
        per_episode.append(sum(vals) / len(vals))  # length-normalised within the episode
    return -sum(per_episode) / 4


def test_group_advantages_are_normalised_within_each_group():
    assert group_advantages(REWARDS, 2).tolist() == pytest.approx(hand_advantages(), rel=1e-6)
    flat = group_advantages([0.5, 0.5, 0.0, 0.0], 2)
    assert flat.tolist() == [0.0, 0.0, 0.0, 0.0]  # a zero-variance group carries no signal


def test_hand_values_exercise_clipping_at_both_ends():
    # GSPO with the paper's range: episode 0 (A>0, s=1.22) and 3 (A>0, s=1.11) are clipped high,
    # episode 2 (A<0, s=0.61) is clipped low, episode 1 (A<0, s=1.11) is not clipped.
    A = hand_advantages()
    _, clipped = policy_loss(torch.tensor(NEW), torch.tensor(OLD), torch.tensor(A), torch.tensor(MASK),
                             level="sequence", epsilon_low=3e-4, epsilon_high=4e-4)
    assert clipped.squeeze(-1).tolist() == [True, False, True, True]
    _, clipped_tok = policy_loss(torch.tensor(NEW), torch.tensor(OLD), torch.tensor(A), torch.tensor(MASK),
                                 level="token", epsilon_low=0.2, epsilon_high=0.2)
    # token level: 0.3 -> r=1.35 > 1.2 with A>0 (high clip); -0.5 -> r=0.61 < 0.8 with A<0 (low clip);
    # 0.4 -> r=1.49 > 1.2 with A>0 (high clip)
    masked = [[bool(c) for c, m in zip(row, mrow) if m] for row, mrow in zip(clipped_tok.tolist(), MASK)]
    assert masked == [[True, False], [False, False, False], [True], [True, False, False]]


@pytest.mark.parametrize("level,eps,hand", [
    ("sequence", (3e-4, 4e-4), hand_gspo),
    ("sequence", (0.2, 0.28), hand_gspo),
    ("token", (0.2, 0.2), hand_grpo),
    ("token", (3e-4, 4e-4), hand_grpo),
])
def test_policy_loss_matches_the_hand_computation(level, eps, hand):
    loss, _ = policy_loss(torch.tensor(NEW), torch.tensor(OLD), group_advantages(REWARDS, 2), torch.tensor(MASK),
                          level=level, epsilon_low=eps[0], epsilon_high=eps[1])
    assert loss.item() == pytest.approx(hand(*eps), rel=1e-5)


@pytest.fixture(scope="module")
def trl_trainer(tmp_path_factory):
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from longhorizon.train.tiny import build_tiny_model, default_corpus

    path = build_tiny_model(tmp_path_factory.mktemp("m"), default_corpus(families=[]), hidden_size=32, num_layers=1,
                            num_heads=2, num_kv_heads=1, intermediate_size=64)

    def make(loss, eps_low, eps_high):
        args = GRPOConfig(output_dir=str(tmp_path_factory.mktemp("out")), num_generations=2,
                          per_device_train_batch_size=4, report_to="none", use_cpu=True,
                          **trl_settings(loss, eps_low, eps_high))
        trainer = GRPOTrainer(model=AutoModelForCausalLM.from_pretrained(path), reward_funcs=[lambda **kw: [0.0]],
                              args=args, train_dataset=Dataset.from_dict({"prompt": ["a", "b"]}),
                              processing_class=AutoTokenizer.from_pretrained(path))
        trainer.current_gradient_accumulation_steps = 1
        return trainer

    return make


@pytest.mark.parametrize("loss,eps,hand", [
    ("gspo", (3e-4, 4e-4), hand_gspo),
    ("gspo", (0.2, 0.28), hand_gspo),
    ("grpo", (0.2, 0.2), hand_grpo),
])
def test_trl_loss_under_our_settings_is_the_same_objective(trl_trainer, loss, eps, hand):
    trainer = trl_trainer(loss, *eps)
    new = torch.tensor(NEW, requires_grad=True)
    trainer._get_per_token_logps_and_entropies = lambda *a, **k: (new, torch.zeros_like(new), None)
    mask = torch.tensor(MASK)
    inputs = {
        "prompt_ids": torch.ones(4, 1, dtype=torch.long), "prompt_mask": torch.ones(4, 1, dtype=torch.long),
        "completion_ids": torch.ones(4, 3, dtype=torch.long), "completion_mask": torch.ones(4, 3, dtype=torch.long),
        "tool_mask": mask,  # the env mask: positions not sampled by the policy carry no loss
        "advantages": group_advantages(REWARDS, 2), "old_per_token_logps": torch.tensor(OLD),
        "num_items_in_batch": mask.sum(),
    }
    trainer.model.train()
    value = trainer._compute_loss(trainer.model, inputs)
    assert value.item() == pytest.approx(hand(*eps), rel=1e-5)
    value.backward()  # differentiable through the sampled tokens only
    assert new.grad is not None and torch.all(new.grad[mask == 0] == 0)
