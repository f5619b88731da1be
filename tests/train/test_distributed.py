"""The distributed training path: the accelerate configs in configs/accelerate load as FSDP and
DeepSpeed ZeRO-3, and a 2-process CPU `accelerate launch` of `train sft` on the tiny model takes
a step (every process trains, one writes the log, the summary and the model)."""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl")
yaml = pytest.importorskip("yaml")

from accelerate.commands.config.config_args import load_config_from_file  # noqa: E402
from accelerate.utils import DistributedType  # noqa: E402

from longhorizon.cli import main  # noqa: E402

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "accelerate"
FAMILY = "downloads_cleanup"


def test_fsdp_and_zero3_configs_load_as_accelerate_reads_them():
    fsdp = load_config_from_file(str(CONFIGS / "fsdp.yaml"))
    assert fsdp.distributed_type == DistributedType.FSDP and fsdp.fsdp_config["fsdp_version"] == 2
    assert fsdp.fsdp_config["fsdp_state_dict_type"] == "FULL_STATE_DICT"  # the saved model is one plain folder
    zero3 = load_config_from_file(str(CONFIGS / "deepspeed_zero3.yaml"))
    assert zero3.distributed_type == DistributedType.DEEPSPEED and zero3.deepspeed_config["zero_stage"] == 3
    assert zero3.deepspeed_config["zero3_save_16bit_model"] is True


def test_two_process_cpu_launch_of_train_sft_takes_a_step(tmp_path):
    model, teacher, data, out = tmp_path / "tiny", tmp_path / "teacher", tmp_path / "data", tmp_path / "sft"
    assert main(["model", "init", "--tiny", "--out", str(model), "--family", FAMILY]) == 0
    assert main(["run", "--policy", "oracle", "--family", FAMILY, "--seeds", "2", "--out", str(teacher),
                 "--quiet"]) == 0
    assert main(["data", "sft", str(teacher), "--out", str(data)]) == 0
    # the FSDP config as it is, on this machine's CPUs: two processes, no bf16
    cfg = yaml.safe_load((CONFIGS / "fsdp.yaml").read_text())
    # a free port, not torchrun's default 29500: another launch on the machine (a parallel test
    # run) may hold that one
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    cfg.update(use_cpu=True, mixed_precision="no", num_processes=2, main_process_port=port)
    cpu_cfg = tmp_path / "fsdp_cpu.yaml"
    cpu_cfg.write_text(yaml.safe_dump(cfg))
    done = subprocess.run(
        [sys.executable, "-m", "accelerate.commands.accelerate_cli", "launch", "--config_file", str(cpu_cfg),
         "-m", "longhorizon.cli", "train", "sft", "--data", str(data), "--model", str(model), "--out", str(out),
         "--max-steps", "1", "--max-length", "2048", "--batch-size", "1", "--threads", "1", "--quiet"],
        capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)
    rank0 = "\n".join(line for line in done.stderr.splitlines() if "[rank0]" in line)
    assert done.returncode == 0, f"rank 0:\n{rank0[-4000:]}\n\nlast lines:\n{done.stderr[-3000:]}"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["processes"] == 2 and summary["steps"] == 1
    assert summary["distributed"] == "MULTI_CPU", "accelerate runs FSDP configs as plain data parallel on CPU"
    assert len((out / "log.jsonl").read_text().splitlines()) == 1, "one process writes the log"
    assert done.stdout.count('"processes": 2') == 1, "one process prints the summary"

    from safetensors.torch import load_file

    before, after = load_file(model / "model.safetensors"), load_file(out / "model.safetensors")
    assert before.keys() == after.keys() and any((before[k] != after[k]).any() for k in before)
