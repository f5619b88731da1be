"""Direct-OPD: the teacher pair's shift as token advantages, against hand computation, the
tokenizer check, the config's refusals, and a real RL step driven by it."""

import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from longhorizon.core.errors import UsageError  # noqa: E402
from longhorizon.train.config import OPDSettings, RLConfig  # noqa: E402
from longhorizon.train.opd import PolicyShift, check_same_tokenizer  # noqa: E402


@pytest.fixture(scope="module")
def post_model(small_model, tmp_path_factory):
    """small_model with every weight nudged: what an RL run on it might have left."""
    model = AutoModelForCausalLM.from_pretrained(small_model, dtype=torch.float32)
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn(p.shape, generator=gen))
    path = tmp_path_factory.mktemp("post")
    model.save_pretrained(path)
    AutoTokenizer.from_pretrained(small_model).save_pretrained(path)
    return path


def logps_by_hand(model, ids: list[int], n: int) -> list[float]:
    """log π of the last n ids, each given all before it, from one plain forward pass."""
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float()
    return [torch.log_softmax(logits[k - 1], -1)[ids[k]].item() for k in range(len(ids) - n, len(ids))]


def test_the_shift_is_the_pairs_log_ratio_on_the_sampled_tokens(small_model, post_model):
    tok = AutoTokenizer.from_pretrained(small_model)
    shift = PolicyShift.load(small_model, post_model, tok)
    pad = tok.pad_token_id or 0
    # episode 0: prompt [5, 6, 7], completion [8, 9, 10] (9 a tool result); episode 1: prompt [11], completion [12]
    batch = {
        "prompt_ids": torch.tensor([[5, 6, 7], [pad, pad, 11]]), "prompt_mask": torch.tensor([[1, 1, 1], [0, 0, 1]]),
        "completion_ids": torch.tensor([[8, 9, 10], [12, pad, pad]]),
        "completion_mask": torch.tensor([[1, 1, 1], [1, 0, 0]]), "tool_mask": torch.tensor([[1, 0, 1], [1, 1, 1]]),
    }
    got = shift.shift(batch)
    pre, post = shift.pre, shift.post
    e0 = [b - a for a, b in zip(logps_by_hand(pre, [5, 6, 7, 8, 9, 10], 3), logps_by_hand(post, [5, 6, 7, 8, 9, 10], 3))]
    e1 = [b - a for a, b in zip(logps_by_hand(pre, [11, 12], 1), logps_by_hand(post, [11, 12], 1))]
    want = [[e0[0], 0.0, e0[2]], [e1[0], 0.0, 0.0]]  # tool results and padding carry no shift
    assert torch.allclose(got, torch.tensor(want), atol=1e-5)
    assert abs(e0[0]) > 1e-3  # the pair really differs


def test_token_advantages_mix_the_clipped_shift_with_the_task_advantage():
    shift = torch.tensor([[0.5, -3.0, 2.0], [1.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 0, 0]])
    task = torch.tensor([1.0, -1.0])
    ps = PolicyShift(torch.nn.Linear(1, 1), torch.nn.Linear(1, 1), scale=2.0, clip=1.5, task_reward_weight=0.25)
    got = ps.advantages(shift, mask, task)
    want = [[2 * 0.5 + 0.25, 2 * -1.5 + 0.25, 2 * 1.5 + 0.25], [2 * 1.0 - 0.25, 0.0, 0.0]]
    assert torch.allclose(got, torch.tensor(want))
    alone = PolicyShift(torch.nn.Linear(1, 1), torch.nn.Linear(1, 1)).advantages(shift, mask, task)
    assert torch.allclose(alone, shift * mask)


def test_a_teacher_with_another_tokenizer_is_refused(small_model, tmp_path):
    from longhorizon.train.tiny import build_tiny_model, default_corpus

    other = build_tiny_model(tmp_path / "other", default_corpus(families=[]), vocab_size=300, hidden_size=16,
                             num_layers=1, num_heads=2, num_kv_heads=1, intermediate_size=32)
    student = AutoTokenizer.from_pretrained(small_model)
    check_same_tokenizer(student, pre=AutoTokenizer.from_pretrained(small_model))  # the same: accepted
    with pytest.raises(UsageError, match="post model's tokenizer differs"):
        PolicyShift.load(small_model, other, student)


def test_the_config_refuses_half_a_pair_and_the_sequence_ratio():
    with pytest.raises(UsageError, match="both pre and post"):
        RLConfig(loss="grpo", opd=OPDSettings(pre="a")).validate()
    with pytest.raises(UsageError, match="use loss grpo"):
        RLConfig(opd=OPDSettings(pre="a", post="b")).validate()
    RLConfig(loss="grpo", opd=OPDSettings(pre="a", post="b")).validate()


def _one_step(small_model, post, make_copy_task, out):
    from longhorizon.train.rl import build_trainer

    tok = AutoTokenizer.from_pretrained(small_model)
    cfg = RLConfig(out=str(out), group_size=2, micro_batch_size=2, max_steps=1, max_turns=2, max_new_tokens=16,
                   max_context=None, concurrency=2, learning_rate=1e-3, logging_steps=1, loss="grpo",
                   opd=OPDSettings(pre=str(small_model), post=str(post)))
    model = AutoModelForCausalLM.from_pretrained(small_model)
    start = {k: v.detach().clone() for k, v in model.state_dict().items()}
    trainer, rollout = build_trainer(cfg, model=model, tokenizer=tok, tasks=[make_copy_task("opd", "42")],
                                     progress=False)
    try:
        trainer.train()
    finally:
        rollout.close()
    log = next(row for row in trainer.state.log_history if "optimizer/stepped" in row)
    moved = any(not torch.equal(start[k], v) for k, v in model.state_dict().items())
    return log, moved


def test_a_step_learns_from_the_pairs_shift_and_an_identical_pair_teaches_nothing(small_model, post_model,
                                                                                  make_copy_task, tmp_path):
    log, moved = _one_step(small_model, post_model, make_copy_task, tmp_path / "shift")
    assert log["optimizer/stepped"] == 1.0 and moved
    assert log["opd/shift_abs_mean"] > 1e-3 and math.isfinite(log["opd/shift_mean"])
    # the same model as pre and post: every token's advantage is 0 (the task reward is not mixed in)
    log, moved = _one_step(small_model, small_model, make_copy_task, tmp_path / "same")
    assert log["opd/shift_abs_mean"] == 0.0
    assert log["optimizer/stepped"] == 0.0 and not moved


def test_train_opd_on_the_command_line_needs_the_pair(tmp_path, capsys):
    from longhorizon.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["train", "opd", "--help"])
    assert exc.value.code == 0 and "log pi_post - log pi_pre" in capsys.readouterr().out
    assert main(["train", "opd", "--student", "x", "--out", str(tmp_path / "o")]) != 0
    assert "needs --pre and --post" in capsys.readouterr().err
