"""Where does a trained model go wrong when it is given the right history? A diagnostic.

    .venv/bin/python benchmarks/teacher_forced_probe.py MODEL [--family F] [--seeds 100000,100001]

Plays the oracle on each instance, renders its episode with the model's own tokenizer and
chat template (the renderer SFT and RL use), runs one forward pass, and for every assistant
turn prints how many of its tokens the model's greedy prediction gets wrong and the first
one, with the tokens before it. A free-running model derails at its first wrong call; this
says which call that is and why (a value it had to copy, a name, the JSON shape), without
the noise of the episodes that follow. It found that the tiny model's only holdout errors
before the report are values it must copy from context (the day, a service name).
"""

from __future__ import annotations

import argparse
import asyncio
import sys


def probe(model_dir: str, family: str, seeds: list[int]) -> None:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from longhorizon.env.episode import play_task
    from longhorizon.policies.render import ChatRenderer
    from longhorizon.policies.scripted import OraclePolicy
    from longhorizon.tasks.registry import get_family
    from longhorizon.train.data import clean_message, tools_by_task

    tok = AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True).eval()
    renderer = ChatRenderer(tok)
    for seed in seeds:
        task = get_family(family).generate(seed)
        traj = asyncio.run(play_task(task, OraclePolicy()))
        messages = [clean_message(m) for m in traj.messages]  # as `data sft` stores them
        ids, mask = renderer.episode(messages, tools_by_task([task.id])[task.id])
        with torch.no_grad():
            pred = model(torch.tensor([ids])).logits[0].argmax(-1).tolist()
        trained = [i for i in range(1, len(ids)) if mask[i]]
        right = sum(pred[i - 1] == ids[i] for i in trained)
        print(f"{task.id}: {len(ids)} tokens, assistant tokens right {right}/{len(trained)} "
              f"({right / max(len(trained), 1):.3f})")
        turn, i = 0, 0
        while i < len(ids):
            if not mask[i]:
                i += 1
                continue
            j = i
            while j < len(ids) and mask[j]:
                j += 1
            wrong = [k for k in range(max(i, 1), j) if pred[k - 1] != ids[k]]
            head = tok.decode(ids[i:j])[:60].replace("\n", " ")
            where = ""
            if wrong:
                k = wrong[0]
                where = (f"  first: …{tok.decode(ids[max(i, k - 8):k])!r} expected {tok.decode([ids[k]])!r}, "
                         f"predicted {tok.decode([pred[k - 1]])!r}")
            print(f"  turn {turn:>2}: {len(wrong):>3}/{j - i:<4} wrong  {head!r}{where}")
            turn, i = turn + 1, j


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model", help="a model folder (e.g. runs/demo/models/sft)")
    ap.add_argument("--family", default="log_error_summary")
    ap.add_argument("--seeds", default="100000,100001", help="comma-separated instance seeds (holdout: >= 100000)")
    args = ap.parse_args(argv)
    try:
        seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    except ValueError:
        ap.error(f"--seeds must be comma-separated integers, got {args.seeds!r}")
    probe(args.model, args.family, seeds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
