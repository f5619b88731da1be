"""Training and generation speed of the embedded SmolLM2-135M-Instruct, against the tiny test model.

    .venv/bin/python benchmarks/model_speed.py [--model DIR] [--steps 2] [--threads N]

Measured in one process, for each model (the tiny random Qwen3 is the baseline, measured in the
same run so the ratios mean something on shared cores):

* training: tokens per second of one optimizer step (forward, backward, AdamW) on one sequence
  of 2,048 and of 4,096 tokens, loss on every token; full fine-tune, and LoRA r32/a32 on the
  attention and MLP projections (what ``lora: auto`` picks for the 135M model);
* generation: greedy new tokens per second after a 256-token prompt, 64 new tokens per
  sequence: batch 1 through ``LocalModelPolicy.generate`` (the token-by-token loop the local
  policy, evaluation and RL rollouts use), and batch 1 and 8 through ``model.generate``
  (aggregate over the batch: what batching the decode would give).

Each figure is the median of ``--steps`` timed repeats after one warm-up. Random token ids: speed
does not depend on the text. Other processes on the cores slow torch a lot: the load average
before and after is printed with the tables.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import torch


def median_s(fn, steps: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(steps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def train_step_fn(model, length: int, lora: bool):
    from peft import LoraConfig, get_peft_model

    from longhorizon.train.config import LORA_TARGETS

    if lora:
        model = get_peft_model(model, LoraConfig(r=32, lora_alpha=32, target_modules=list(LORA_TARGETS),
                                                 task_type="CAUSAL_LM"))
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5)
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(3, model.config.vocab_size, (1, length), generator=gen)

    def step():
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    return step, sum(p.numel() for p in params)


def training(path: str, steps: int) -> dict:
    from transformers import AutoModelForCausalLM

    out = {}
    for lora in (False, True):
        for length in (2048, 4096):
            model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
            step, trained = train_step_fn(model, length, lora)
            out[("LoRA r32" if lora else "full", length)] = (length / median_s(step, steps), trained)
            del model, step
    return out


def generation(path: str, steps: int, prompt_len: int = 256, new: int = 64) -> dict:
    from transformers import AutoModelForCausalLM

    from longhorizon.policies.local_model import LocalModelPolicy

    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    gen = torch.Generator().manual_seed(0)
    out = {}
    policy = LocalModelPolicy(model, max_new_tokens=new)
    policy.eos_ids = frozenset()  # run all `new` tokens
    prompt = torch.randint(3, model.config.vocab_size, (prompt_len,), generator=gen).tolist()
    out["LocalModelPolicy, batch 1"] = new / median_s(lambda: policy.generate(prompt), steps)
    for batch in (1, 8):
        ids = torch.randint(3, model.config.vocab_size, (batch, prompt_len), generator=gen)

        def run():
            with torch.inference_mode():
                model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=False,
                               max_new_tokens=new, min_new_tokens=new, pad_token_id=0)

        out[f"model.generate, batch {batch}"] = batch * new / median_s(run, steps)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="model folder (default: the embedded SmolLM2, converted on first use)")
    ap.add_argument("--steps", type=int, default=2, help="timed repeats per figure, after one warm-up (2)")
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from transformers.utils import logging as hf_logging

    from longhorizon.train.pretrained import resolve
    from longhorizon.train.tiny import build_tiny_model, default_corpus

    hf_logging.disable_progress_bar()
    smol = resolve(args.model)
    load0 = os.getloadavg()
    t0 = time.time()
    with tempfile.TemporaryDirectory(prefix="lh-speed-") as tmp:
        tiny = str(build_tiny_model(f"{tmp}/tiny", default_corpus()))
        models = {"tiny (4M)": tiny, "SmolLM2-135M": smol}
        results = {name: (training(path, args.steps), generation(path, args.steps)) for name, path in models.items()}
    load1 = os.getloadavg()

    print(f"\nmodel speed on {os.cpu_count()} cores, {torch.get_num_threads()} torch threads, torch {torch.__version__}; "
          f"load average {load0[0]:.1f} before, {load1[0]:.1f} after; {time.time() - t0:.0f} s")
    print(f"SmolLM2: {smol}")
    (tiny_train, tiny_gen), (smol_train, smol_gen) = results["tiny (4M)"], results["SmolLM2-135M"]
    print(f"\nTraining: tokens/s of one optimizer step on one sequence (median of {args.steps})")
    print(f"{'':<20} {'tokens':>6} {'SmolLM2 trained':>15} {'tiny tok/s':>11} {'SmolLM2 tok/s':>14} {'tiny/SmolLM2':>13}")
    for key, (rate, trained) in smol_train.items():
        base = tiny_train[key][0]
        print(f"{key[0]:<20} {key[1]:>6} {trained:>15,} {base:>11,.0f} {rate:>14,.0f} {base / rate:>12.1f}x")
    print("\nGreedy generation: new tokens/s after a 256-token prompt, 64 new per sequence (aggregate)")
    print(f"{'':<28} {'tiny tok/s':>11} {'SmolLM2 tok/s':>14} {'tiny/SmolLM2':>13} {'vs batch 1':>11}")
    for key, rate in smol_gen.items():
        base = tiny_gen[key]
        vs = rate / smol_gen["model.generate, batch 1"]
        print(f"{key:<28} {base:>11,.0f} {rate:>14,.1f} {base / rate:>12.1f}x {vs:>10.1f}x")


if __name__ == "__main__":
    main()
