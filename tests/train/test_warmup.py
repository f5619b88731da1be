"""The learning-rate warm-up starts above 0: the first optimizer step of a run with warm-up learns."""

import asyncio
import json

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from longhorizon.core.errors import UsageError  # noqa: E402
from longhorizon.env.episode import play_task  # noqa: E402
from longhorizon.policies.scripted import OraclePolicy  # noqa: E402
from longhorizon.train.config import SFTConfig  # noqa: E402


@pytest.fixture(scope="module")
def teacher_data(make_copy_task, files_tools):
    from datasets import Dataset

    from longhorizon.train.data import clean_message

    traj = asyncio.run(play_task(make_copy_task(), OraclePolicy()))
    return Dataset.from_list([{"messages": [clean_message(m) for m in traj.messages], "tools": json.dumps(files_tools)}])


def _trainer(small_model, teacher_data, tmp_path, **cfg):
    from longhorizon.train.sft import build_trainer

    model = AutoModelForCausalLM.from_pretrained(small_model)
    config = SFTConfig(out=str(tmp_path / "sft"), max_length=None, learning_rate=1e-3, **cfg)
    return build_trainer(config, model=model, tokenizer=AutoTokenizer.from_pretrained(small_model),
                         dataset=teacher_data, progress=False)


def test_the_first_step_of_a_warm_up_changes_the_weights(small_model, teacher_data, tmp_path):
    trainer = _trainer(small_model, teacher_data, tmp_path, max_steps=1, warmup_ratio=0.5)  # 1 warm-up step
    before = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    trainer.train()
    after = trainer.model.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)


def test_the_warm_up_rises_from_above_zero_to_the_peak_then_follows_the_schedule(small_model, teacher_data, tmp_path):
    trainer = _trainer(small_model, teacher_data, tmp_path, max_steps=8, warmup_ratio=0.25, lr_scheduler="cosine")
    trainer.create_optimizer_and_scheduler(num_training_steps=8)  # warm-up: ceil(0.25 x 8) = 2 steps
    factor = trainer.lr_scheduler.lr_lambdas[0]
    rates = [factor(step) for step in range(8)]
    assert rates[:3] == pytest.approx([1 / 3, 2 / 3, 1.0])
    assert all(a > b for a, b in zip(rates[2:], rates[3:])) and rates[-1] > 0  # cosine decay, as transformers'
    assert trainer.optimizer.param_groups[0]["lr"] == pytest.approx(1e-3 / 3)  # what step 1 runs at


def test_a_warm_up_ratio_outside_0_to_1_is_a_usage_error():
    with pytest.raises(UsageError, match="warmup_ratio"):
        SFTConfig(warmup_ratio=5).validate()
