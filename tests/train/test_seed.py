"""SEED: what the analyzer reads, skills cached, the skill-conditioned scores against a hand
forward pass, the distillation term against hand computation, and a real RL step with it."""

import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from longhorizon.core.errors import UsageError  # noqa: E402
from longhorizon.testing.standin_llm import StandinLLM  # noqa: E402
from longhorizon.train.config import RLConfig, SEEDSettings  # noqa: E402
from longhorizon.train.opd import episode_logps  # noqa: E402
from longhorizon.train.seed import (  # noqa: E402
    RESULT_CHARS, SKILL_HEADER, SkillAnalyzer, condensed, distillation_loss, skill_prefix_ids,
)

SKILL = "Read the input file first, then write exactly its content."


class Brain:
    def __init__(self):
        self.requests = []

    def __call__(self, request):
        self.requests.append(request)
        return {"role": "assistant", "content": SKILL}


def played(make_copy_task, value="42", long_result=False):
    """One oracle episode of the copy task, graded (a real Trajectory)."""
    import asyncio

    from longhorizon.env.episode import play_task
    from longhorizon.policies.scripted import OraclePolicy

    task = make_copy_task("seedcopy", ("x" * (RESULT_CHARS + 50)) if long_result else value)
    return asyncio.run(play_task(task, OraclePolicy()))


def test_the_analyzer_reads_the_task_the_calls_cut_short_and_the_criteria_notes(make_copy_task):
    traj = played(make_copy_task, long_result=True)
    text = condensed([traj, traj])
    assert text.startswith("Task:\n") and "Copy in.txt to out.txt." in text
    assert text.count("Attempt ") == 2 and "files__read_file" in text and "files__write_file" in text
    assert "x" * RESULT_CHARS + " ..." in text and "x" * (RESULT_CHARS + 1) not in text
    assert "[met] copied" in text and "passed" in text


def test_a_served_analyzer_is_asked_once_per_content_and_its_skills_persist(make_copy_task, tmp_path):
    traj = played(make_copy_task)
    brain = Brain()
    with StandinLLM(brain) as srv:
        a = SkillAnalyzer(None, base_url=srv.base_url, model=srv.model, cache_path=tmp_path / "skills.jsonl")
        assert a.skill([traj], step=0) == SKILL
        assert a.skill([traj], step=5) == SKILL  # a server's skill does not depend on the policy's step
        assert len(brain.requests) == 1
        req = brain.requests[0]
        assert req["temperature"] == 0.0 and "Copy in.txt" in req["messages"][-1]["content"]
        again = SkillAnalyzer(None, base_url=srv.base_url, model=srv.model, cache_path=tmp_path / "skills.jsonl")
        assert again.skill([traj]) == SKILL and len(brain.requests) == 1  # read back from the file
    row = json.loads((tmp_path / "skills.jsonl").read_text().splitlines()[0])
    assert row["skill"] == SKILL and row["episodes"] == [traj.episode_id]
    with pytest.raises(UsageError, match="needs an analyzer_model"):
        SkillAnalyzer(None, base_url=srv.base_url)


def test_the_policy_as_analyzer_writes_a_skill_per_step(small_model, make_copy_task):
    tok = AutoTokenizer.from_pretrained(small_model)
    model = AutoModelForCausalLM.from_pretrained(small_model)
    model.train()
    a = SkillAnalyzer(tok, max_new_tokens=8)
    traj = played(make_copy_task)
    first = a.skill([traj], model, step=0)
    assert isinstance(first, str) and model.training  # generation left the model as it was
    assert a.skill([traj], model, step=0) == first and len(a.cache) == 1
    a.skill([traj], model, step=1)
    assert len(a.cache) == 2  # the policy changed: a new skill


def test_skill_conditioned_scores_equal_a_forward_over_skill_prompt_and_completion(small_model):
    tok = AutoTokenizer.from_pretrained(small_model)
    model = AutoModelForCausalLM.from_pretrained(small_model, dtype=torch.float32)
    prefix = skill_prefix_ids(tok, SKILL)
    assert SKILL_HEADER.strip() in tok.decode(prefix)
    pad = tok.pad_token_id or 0
    batch = {"prompt_ids": torch.tensor([[pad, 5, 6]]), "prompt_mask": torch.tensor([[0, 1, 1]]),
             "completion_ids": torch.tensor([[7, 8, pad]]), "completion_mask": torch.tensor([[1, 1, 0]])}
    got = episode_logps(model, batch, [prefix], temperature=0.7)
    ids = prefix + [5, 6, 7, 8]
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float() / 0.7
    want = [torch.log_softmax(logits[len(ids) - 3 + k], -1)[ids[len(ids) - 2 + k]].item() for k in range(2)]
    assert torch.allclose(got, torch.tensor([want + [0.0]]), atol=1e-5)
    plain = episode_logps(model, batch, [[]], temperature=0.7)
    assert not torch.allclose(got, plain, atol=1e-3)  # the skill changes the scores


def test_the_distillation_term_is_the_clipped_shift_times_the_log_probs():
    logps = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -4.0, 0.0]], requires_grad=True)
    teacher = torch.tensor([[-0.5, -2.0, -3.0], [-0.1, -1.0, 0.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]])
    loss, d = distillation_loss(logps, teacher, mask, clip=1.0)
    # d = teacher - logps, clipped to ±1: [0.5, 0, -1] and [0.2, 1]
    assert torch.allclose(d, torch.tensor([[0.5, 0.0, -1.0], [0.2, 1.0, 0.0]]))
    hand = -((0.5 * -1.0 + 0 + -1.0 * -0.5) / 3 + (0.2 * -0.3 + 1.0 * -4.0) / 2) / 2
    assert loss.item() == pytest.approx(hand)
    loss.backward()  # the gradient raises the log-prob of tokens the skill made likelier
    assert torch.allclose(logps.grad, torch.tensor([[-0.5 / 6, 0.0, 1.0 / 6], [-0.2 / 4, -1.0 / 4, 0.0]]))


def test_the_config_refuses_a_useless_seed():
    with pytest.raises(UsageError, match="above 0"):
        RLConfig(seed_skills=SEEDSettings(enabled=True, weight=0)).validate()
    with pytest.raises(UsageError, match="analyzer_model"):
        RLConfig(seed_skills=SEEDSettings(enabled=True, analyzer_base_url="http://x")).validate()


def test_an_rl_step_with_seed_adds_the_term_and_the_rollouts_never_see_the_skill(small_model, make_copy_task,
                                                                                 tmp_path):
    from longhorizon.train.rl import build_trainer

    tok = AutoTokenizer.from_pretrained(small_model)
    brain = Brain()
    with StandinLLM(brain) as srv:
        cfg = RLConfig(out=str(tmp_path / "rl"), group_size=2, micro_batch_size=2, max_steps=1, max_turns=2,
                       max_new_tokens=16, max_context=None, concurrency=2, learning_rate=1e-3, logging_steps=1,
                       seed_skills=SEEDSettings(enabled=True, weight=0.5, analyzer_base_url=srv.base_url,
                                                analyzer_model=srv.model))
        trainer, rollout = build_trainer(cfg, model=AutoModelForCausalLM.from_pretrained(small_model),
                                         tokenizer=tok, tasks=[make_copy_task("seedrl", "42")], progress=False)
        try:
            trainer.train()
            trajs = rollout.last
        finally:
            rollout.close()
    log = next(row for row in trainer.state.log_history if "seed/distill_loss" in row)
    assert log["seed/shift_abs_mean"] > 0  # the skill moved the scores of the sampled tokens
    assert len(brain.requests) == 1  # one group, one skill
    rows = [json.loads(line) for line in (tmp_path / "rl" / "skills.jsonl").read_text().splitlines()]
    assert rows[0]["skill"] == SKILL and sorted(rows[0]["episodes"]) == sorted(t.episode_id for t in trajs)
    assert all(SKILL not in json.dumps(t.messages) for t in trajs)  # skills never reach the acting policy
