"""Checkpoint provenance: what a trained model saw and what chose it, and the firewall check on it."""

import asyncio
import json

import pytest

pytest.importorskip("datasets")

from longhorizon.evaluate.runs import run_episodes  # noqa: E402
from longhorizon.policies.render import read_provenance  # noqa: E402
from longhorizon.rollout.runner import RunSpec  # noqa: E402
from longhorizon.tasks.registry import tasks_for  # noqa: E402
from longhorizon.train.config import RLConfig, SFTConfig  # noqa: E402
from longhorizon.train.data import build_sft_dataset  # noqa: E402
from longhorizon.train.provenance import firewall_problems  # noqa: E402
from longhorizon.train.stage import carry_provenance, training_record  # noqa: E402

FAMILY = "downloads_cleanup"


@pytest.fixture(scope="module")
def sft_data(tmp_path_factory):
    from longhorizon.policies.factory import make_policy

    base = tmp_path_factory.mktemp("prov")
    p = make_policy("oracle")
    asyncio.run(run_episodes(tasks_for("train", 1, [FAMILY]), p,
                             RunSpec(policy=p.describe(), split="train", seeds=1, families=[FAMILY]),
                             base / "teacher", progress=False))
    build_sft_dataset([base / "teacher"], base / "data", min_reward=0.9)
    return base


def test_sft_then_rl_checkpoints_record_their_runs_splits_and_choice(sft_data, tmp_path):
    sft, rl = tmp_path / "sft", tmp_path / "rl"
    sft.mkdir(), rl.mkdir()
    carry_provenance(None, sft, "sft", training_record(SFTConfig(data=str(sft_data / "data")), "sft"))
    carry_provenance(str(sft), rl, "rl", training_record(RLConfig(split="train", seeds=2, families=[FAMILY]), "rl"))
    chain = read_provenance(rl)["training"]
    assert [r["stage"] for r in chain] == ["sft", "rl"]
    run = chain[0]["inputs"][0]["runs"][0]
    assert run["path"] == str(sft_data / "teacher") and run["split"] == "train" and run["source"] == "suite"
    assert run["policy"]["policy"] == "oracle"
    assert chain[1]["inputs"] == [{"kind": "rl_tasks", "split": "train", "seeds": 2, "seed_offset": 50_000,
                                   "families": [FAMILY], "levels": None, "source": "suite"}]
    assert all(r["chosen_by"] == {"signal": "final step", "source": "internal"} for r in chain)
    assert firewall_problems(read_provenance(rl)) == []


def test_sft_data_from_a_run_of_an_external_benchmark_breaks_the_firewall(sft_data, tmp_path):
    ext_run = tmp_path / "bfcl-run"
    ext_run.mkdir()
    (ext_run / "run.json").write_text(json.dumps({"split": "bfcl:simple_python", "source": "external:bfcl"}))
    data = tmp_path / "data"
    data.mkdir()
    (data / "summary.json").write_text(json.dumps({"runs": [str(sft_data / "teacher"), str(ext_run)], "kept": 2}))
    model = tmp_path / "sft"
    model.mkdir()
    carry_provenance(None, model, "sft", training_record(SFTConfig(data=str(data)), "sft"))
    problems = firewall_problems(read_provenance(model))
    assert len(problems) == 1 and str(ext_run) in problems[0] and "external:bfcl" in problems[0]


def test_a_checkpoint_chosen_by_an_external_score_or_without_provenance_is_not_clean(tmp_path):
    from longhorizon.train.provenance import rl_input, stage_record

    chosen = {"training": [stage_record("rl", [rl_input("train", 1, None)], chosen_by="bfcl accuracy")]}
    assert firewall_problems(chosen) == ["rl: checkpoint chosen by 'bfcl accuracy', not an internal signal"]
    assert firewall_problems(None) == ["no provenance file: what the model was trained on is unknown"]
