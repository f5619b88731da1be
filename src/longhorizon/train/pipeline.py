"""``longhorizon demo``: the whole recipe on the embedded defaults, end to end on a CPU.

    1 model     a tokenizer trained on the suite's text + a tiny random Qwen3    OUT/models/base
                (``--model smollm2-135m-instruct``: the embedded SmolLM2, from the cache folder;
                ``--model DIR``: any transformers model folder, used as it is)
    2 teacher   the oracle plays the train split (at ``teacher.level``)          OUT/teacher
    3 data      rejection sampling (reward >= 0.9) into a chat dataset           OUT/sft_data
    4 sft       TRL SFTTrainer, assistant tokens only                            OUT/models/sft
    5 start     the SFT model RL starts from: the final one, or (``start:        OUT/start.json
                headroom``) the earliest checkpoint whose greedy pass on a       OUT/dev/step-N
                train-split dev set leaves RL room to learn (train.headroom)
    6 rl        a few GSPO steps on TRL GRPOTrainer, 8 episodes per task         OUT/models/rl
    7 eval      greedy pass@1 of base, SFT (and RL's start) and RL on holdout    OUT/eval/{base,sft,start,rl}
                (served: the base twice, for the noise floor)                    OUT/eval/base-repeat
                never-trained families (``eval.transfer_families``)               OUT/eval/NAME-transfer
                longer horizons than trained (``eval.longer_levels``)             OUT/eval/NAME-levelN
    8 report    Markdown + HTML + learning curves                                OUT/report.{md,html}

Every stage resumes: a finished stage is skipped, runs pick up where they stopped. The demo's
settings (which families, how many seeds and steps) are ``demo_config()``; ``configs/demo.yaml``
holds the same values for editing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import time
from pathlib import Path
from typing import Any

from longhorizon.core.errors import UsageError
from longhorizon.train.config import (
    DTYPES, EvalConfig, LoraSettings, ModelConfig, PipelineConfig, RLConfig, SFTConfig, StartConfig, TeacherConfig,
    load_pipeline,
)

DEMO_FAMILIES = ["log_first_error"]
"""A short-horizon log family (4 shell calls, ~1.3k SmolLM2 tokens an episode) whose answer is a
line copied from a tool result: what a pretrained 135M model can learn on a CPU in minutes."""
DEMO_TRANSFER_FAMILIES = ["log_last_warning"]
"""Its never-trained sibling family (the last WARN line instead of the first ERROR): a train-split
family the demo never trains on, evaluated on its held-out seeds (``transfer_eval``)."""


def demo_config() -> PipelineConfig:
    """The demo on the embedded SmolLM2 (configs/demo.yaml documents it; configs/demo_tiny.yaml
    is the random tiny model's). Sized for 2 CPU cores: 16 oracle episodes, 8 full-FT SFT steps
    keeping each step's model, RL's start chosen among them with headroom on 8 train-split dev
    instances, 2 on-policy GSPO steps of one group of 8 at T 0.7 (dynamic sampling: a flat group
    is replaced once), 16 + 16 greedy evaluation episodes per model, in float32."""
    fams = list(DEMO_FAMILIES)
    limits = dict(max_new_tokens=192, max_turns=8, max_tool_calls=10, max_context=4096)
    return PipelineConfig(
        model=ModelConfig(name="smollm2-135m-instruct"),
        teacher=TeacherConfig(policy="oracle", split="train", families=fams, seeds=16, min_reward=0.9,
                              recovery=0.0),
        sft=SFTConfig(epochs=1, learning_rate=2e-4, batch_size=2, grad_accum=1, max_length=4096,
                      warmup_ratio=0.05, lr_scheduler="cosine", lora=LoraSettings(enabled=False)),
        start=StartConfig(checkpoint="headroom", dev_seeds=8),
        rl=RLConfig(split="train", families=fams, seeds=4, group_size=8, tasks_per_step=1,
                    updates_per_rollout=1, micro_batch_size=1, max_steps=2, learning_rate=2e-5, loss="gspo",
                    reward="dense", effort_floor=0.05, resample_flat_groups=1, temperature=0.7, lora=LoraSettings(enabled=False),
                    gradient_checkpointing=True, concurrency=8, max_batch=8, **limits),
        eval=EvalConfig(split="holdout", families=fams, seeds=16, concurrency=16, max_batch=16,
                        transfer_families=list(DEMO_TRANSFER_FAMILIES), transfer_seeds=16, **limits),
    )


class Stages:
    """Prints each stage as it starts and ends, with its wall time (kept in ``times_path`` across resumes)."""

    def __init__(self, names: list[str], times_path: Path):
        self.names, self.times_path = names, times_path
        self.times: dict[str, float] = json.loads(times_path.read_text()) if times_path.exists() else {}
        self.t0 = time.time()

    def run(self, name: str, what: str, fn, done: bool = False):
        i = self.names.index(name) + 1
        if done:
            print(f"[{i}/{len(self.names)}] {name}: {what} (already done, skipped)", flush=True)
            return None
        print(f"[{i}/{len(self.names)}] {name}: {what}", flush=True)
        t = time.time()
        result = fn()
        self.times[name] = round(time.time() - t, 1)
        self.times_path.write_text(json.dumps(self.times, indent=2) + "\n")
        print(f"[{i}/{len(self.names)}] {name} done in {self.times[name]:.0f} s "
              f"(this session {time.time() - self.t0:.0f} s)", flush=True)
        return result


def _run_policy(tasks, policy, out: Path, *, split: str, seeds: int, families, limits, concurrency: int,
                progress: bool, reproducible: bool = False, level: int | None = None,
                list_ids: bool = False) -> dict[str, Any]:
    """``level`` set (or ``list_ids``: tasks that are not the split's first seeds, such as a dev
    set): the run's identity lists its task ids (which name the seed and level,
    ``family-000123@L1``), as ``longhorizon run --level`` does, so a folder of one set never
    resumes as another."""
    from longhorizon.evaluate.runs import run_episodes
    from longhorizon.rollout.runner import RunSpec

    spec = RunSpec(policy=policy.describe(), split=split, seeds=seeds,
                   families=sorted(families) if families else None, samples=1, limits=limits,
                   tasks=[t.id for t in tasks] if level is not None or list_ids else None, reproducible=reproducible)
    return asyncio.run(run_episodes(tasks, policy, spec, out, concurrency=concurrency, progress=progress))


ENGINES = ("local", "vllm")


def evaluate_model(model_path: str | Path, out: str | Path, cfg: EvalConfig, *, progress: bool = True,
                   policy=None, tasks=None) -> dict:
    """Greedy pass@1 of a model folder on ``cfg``'s split: a resumable run folder at ``out``.
    ``policy``: what plays instead of the in-process model (a served one, see ``served_policy``).
    ``cfg.reproducible``: one episode at a time (the in-process model then decodes no batch of
    several episodes either), recorded in run.json. ``tasks``: these instances instead of the
    split's (a dev set; the run records their ids)."""
    from longhorizon.env.episode import Limits
    from longhorizon.tasks.registry import tasks_for

    given = tasks is not None
    if not given:
        tasks = tasks_for(cfg.split, cfg.seeds, cfg.families, cfg.level)
    if policy is None:
        from longhorizon.policies.local_model import LocalModelPolicy

        import torch

        policy = LocalModelPolicy(str(model_path), temperature=0.0, max_new_tokens=cfg.max_new_tokens,
                                  max_context=cfg.max_context, max_batch=cfg.max_batch,
                                  dtype=getattr(torch, cfg.dtype))
    limits = Limits(max_turns=cfg.max_turns, max_tool_calls=cfg.max_tool_calls, max_wall_s=cfg.max_wall_s)
    return _run_policy(tasks, policy, Path(out), split=cfg.split, seeds=cfg.seeds, families=cfg.families,
                       limits=limits, concurrency=1 if cfg.reproducible else cfg.concurrency, progress=progress,
                       reproducible=cfg.reproducible, level=cfg.level, list_ids=given)


def choose_start(cfg: PipelineConfig, sft: Path, dev_dir: Path, *, progress: bool = True) -> dict[str, Any]:
    """The SFT model RL starts from (``StartConfig``; ``train.headroom``): with ``headroom``, SFT's
    models (kept after every step, ``SFTConfig.keep_steps``) are played greedy in-process on the
    dev set (RL's families, else the teacher's, at the teacher's level), each into
    ``dev_dir/step-N``, bisecting for the earliest that reaches the band's low end
    (``headroom.search``); the choice, its reason and every played step's dev pass rate are
    returned (and kept in OUT/start.json by the caller). No checkpoint with headroom: RL starts
    from the final model, and the result says so."""
    import dataclasses

    from longhorizon.train.headroom import choose_checkpoint, dev_tasks, search, step_models

    st = cfg.start
    if st.checkpoint == "final":
        return {"checkpoint": None, "path": str(sft), "why": "start.checkpoint is final", "dev_pass": {}}
    fams = cfg.rl.families or cfg.teacher.families
    if not fams:
        from longhorizon.tasks.registry import instances

        fams = sorted({f.name for f, _, _ in instances("train", 1, level=cfg.teacher.level)})
    tasks = dev_tasks(fams, st.dev_seeds, cfg.teacher.level)
    ec = dataclasses.replace(cfg.eval, split="train", families=fams, seeds=st.dev_seeds, level=cfg.teacher.level,
                             transfer_families=None, longer_levels=None)
    ckpts = step_models(sft)
    if not ckpts:
        raise UsageError(f"start.checkpoint is headroom but {sft} kept no model per step ({sft}/steps/step-N: "
                         "sft.keep_steps, which headroom sets; delete the sft folder to train again)")

    def pass_rate(k: int) -> float:
        summary = evaluate_model(ckpts[k], dev_dir / f"step-{k}", ec, progress=progress, tasks=tasks)
        print(f"  SFT step {k}: dev pass {summary['overall']['pass@1']:.3f} ({summary['overall']['episodes']} "
              "episodes)", flush=True)
        return summary["overall"]["pass@1"]

    rates = search(list(ckpts), pass_rate, st.band)
    k, why = choose_checkpoint(rates, st.band)
    if k is not None:  # the checkpoint carries the final model's records, chosen by the dev pass (the firewall's trail)
        from longhorizon.policies.render import PROVENANCE_FILE, read_provenance
        from longhorizon.train.provenance import chosen_checkpoint

        prov = read_provenance(sft)
        if prov is not None:
            (ckpts[k] / PROVENANCE_FILE).write_text(json.dumps(
                chosen_checkpoint(prov, "train dev pass", step=k, dev_pass=rates[k], dev_tasks=len(tasks)),
                indent=2) + "\n")
    return {"checkpoint": k, "path": str(sft if k is None else ckpts[k]), "why": why,
            "dev_pass": {str(step): r for step, r in rates.items()}, "dev_tasks": len(tasks),
            "band": list(st.band)}


@contextlib.contextmanager
def served_policy(model_path: str | Path, cfg: EvalConfig, log_path: Path):
    """The model behind a vLLM server (in ``cfg.dtype``) for the length of the block, as a greedy
    ``OpenAIPolicy``: temperature 0 and seed 0 in every request (the run records it as
    ``vllm:MODEL_DIR:DTYPE``, not the server's port). ``cfg.reproducible``: the server's
    reproducible settings (``serve.vllm``), recorded in the label too."""
    from longhorizon.policies.openai_client import OpenAIPolicy
    from longhorizon.serve.vllm import VLLMServer, kv_cache_gib_for

    max_len = cfg.max_context or 8192
    kv = kv_cache_gib_for(model_path, cfg.dtype, cfg.concurrency, max_len)  # every episode in flight, no thrashing
    with VLLMServer(str(model_path), max_model_len=max_len, dtype=cfg.dtype, kv_cache_gib=kv,
                    log_path=log_path, reproducible=cfg.reproducible) as server:
        label = f"vllm:{Path(model_path).resolve()}:{cfg.dtype}" + (":reproducible" if cfg.reproducible else "")
        yield OpenAIPolicy(server.base_url, server.model_name, temperature=0.0, seed=0,
                           max_tokens=cfg.max_new_tokens, endpoint_label=label)


def transfer_eval(cfg: PipelineConfig) -> EvalConfig | None:
    """The eval config for ``eval.transfer_families`` (None when there are none): families this
    pipeline never trains on, on instances no run trains on. Holdout families are played on the
    holdout-family split; a train-split family (a sibling the teacher and RL leave out, such as the
    demo's ``log_last_warning``) on its held-out seeds (split holdout). A family the teacher or RL
    plays, or a mix of both kinds, is refused: either would not measure transfer."""
    import dataclasses

    from longhorizon.tasks.registry import get_family

    e = cfg.eval
    if not e.transfer_families:
        return None
    fams = [get_family(n) for n in e.transfer_families]
    trained = [s.families for s in (cfg.teacher, cfg.rl)]
    for f in fams:
        if not f.holdout_family and any(t is None or f.name in t for t in trained):
            raise UsageError(f"eval.transfer_families: {f.name!r} is trained on (teacher.families or rl.families "
                             "include it, or leave families unset: every train family); a transfer family must be "
                             "a holdout family or a train-split family this pipeline leaves out")
    if len({f.holdout_family for f in fams}) > 1:
        raise UsageError("eval.transfer_families mixes holdout families and train-split families: list one kind "
                         "(they are played on different splits, holdout-family and holdout)")
    split = "holdout-family" if fams[0].holdout_family else "holdout"
    return dataclasses.replace(e, split=split, families=[f.name for f in fams], seeds=e.transfer_seeds,
                               level=e.transfer_level, transfer_families=None, longer_levels=None)


def check_levels(cfg: PipelineConfig) -> None:
    """Every level setting is a whole number >= 1 (or unset), refused before any stage runs."""
    def bad(v):
        return isinstance(v, bool) or not isinstance(v, int) or v < 1

    for where, v in (("teacher.level", cfg.teacher.level), ("eval.level", cfg.eval.level),
                     ("eval.transfer_level", cfg.eval.transfer_level)):
        if v is not None and bad(v):
            raise UsageError(f"{where} must be a whole number >= 1 (or unset: each family's default), not {v!r}")
    ls = cfg.eval.longer_levels
    if ls is not None and (not isinstance(ls, list) or not ls or any(bad(v) for v in ls) or len(set(ls)) != len(ls)):
        raise UsageError(f"eval.longer_levels must be a non-empty list of distinct whole numbers >= 1, not {ls!r}")


def longer_evals(cfg: PipelineConfig) -> list[tuple[str, EvalConfig]]:
    """The eval configs for ``eval.longer_levels``, as (folder suffix ``-levelN``, config): the
    evaluated families that have level N, on the eval split's seeds (``longer_seeds``). Each N
    must be above every level the pipeline trains on (``teacher.level``, ``rl.levels``); unset
    ones mean each family's top level, above which nothing is longer, so they are refused."""
    import dataclasses

    from longhorizon.tasks.registry import get_family

    e = cfg.eval
    if not e.longer_levels:
        return []
    trained = [cfg.teacher.level, *(cfg.rl.levels or [None])]
    if None in trained:
        raise UsageError("eval.longer_levels needs teacher.level and rl.levels set: unset, they train each "
                         "family's default (top) level, and no level is longer than that")
    out = []
    for lv in e.longer_levels:
        if lv <= max(trained):
            raise UsageError(f"eval.longer_levels: level {lv} is not longer than the levels trained on "
                             f"(teacher.level {cfg.teacher.level}, rl.levels {cfg.rl.levels})")
        fams = None if e.families is None else [n for n in e.families if get_family(n).levels >= lv]
        if fams == []:
            raise UsageError(f"eval.longer_levels: none of eval.families has level {lv}")
        out.append((f"-level{lv}", dataclasses.replace(e, families=fams, level=lv, seeds=e.longer_seeds or e.seeds,
                                                       transfer_families=None, longer_levels=None)))
    return out


def eval_plan(e, transfer, models: dict[str, Path],
              longer: list[tuple[str, Any]] = ()) -> list[tuple[str, str, Path, Any]]:
    """The eval stage's runs in order, as (folder key, model, path, eval config): every model on
    the holdout, then on the transfer families, then on each longer level (``longer_evals``);
    served (``engine: vllm``), grouped by model so one server answers all of a model's runs.
    With ``repeat_base`` (default: when served) the base model runs twice, ``base-repeat``
    being its rerun for the report's noise floor. ``models`` may hold ``start``, the SFT
    checkpoint RL started from when it is not the final SFT model (``choose_start``)."""
    repeat = e.engine == "vllm" if e.repeat_base is None else e.repeat_base
    keys = [("base", "base"), *([("base-repeat", "base")] if repeat else []), ("sft", "sft"),
            *([("start", "start")] if "start" in models else []), ("rl", "rl")]
    runs = [(key + suffix, name, models[name], ec) for suffix, ec in (("", e), ("-transfer", transfer), *longer)
            if ec is not None for key, name in keys]
    if e.engine == "vllm":
        runs.sort(key=lambda r: list(models).index(r[1]))
    return runs


def _finished(run_dir: Path) -> dict | None:
    """A complete run's summary (None while episodes are missing), read once."""
    path = run_dir / "summary.json"
    summary = json.loads(path.read_text()) if path.exists() else {}
    return summary if summary.get("complete") else None


def run_pipeline(out: str | Path, *, config: str | Path | None = None, fresh: bool = False,
                 progress: bool = True, model: str | None = None) -> dict[str, Any]:
    """Every stage in turn (each skipped when done). ``model`` overrides the config's base model
    (``model.name``: tiny, the embedded smollm2-135m-instruct, or a model folder)."""
    from longhorizon.core.progress import no_library_bars
    from longhorizon.policies.factory import make_policy
    from longhorizon.tasks.registry import tasks_for
    from longhorizon.train.data import build_sft_dataset
    from longhorizon.train.report import write_report
    from longhorizon.train.rl import run_rl
    from longhorizon.train.sft import run_sft
    from longhorizon.train.tiny import init_model

    no_library_bars()
    out = Path(out)
    if fresh and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = load_pipeline(config, base=demo_config())
    if model:
        cfg.model.name = model
    if cfg.rl.split == cfg.teacher.split and cfg.teacher.seeds > cfg.rl.seed_offset:
        raise UsageError(f"the teacher plays seeds 0-{cfg.teacher.seeds - 1} and RL starts at seed_offset "
                         f"{cfg.rl.seed_offset}: RL would replay instances SFT imitated (raise rl.seed_offset or "
                         "lower teacher.seeds)")
    check_levels(cfg)  # these four are checked before any stage runs
    cfg.start.validate()
    transfer = transfer_eval(cfg)
    longer = longer_evals(cfg)
    (out / "pipeline_config.json").write_text(json.dumps(_asdict(cfg), indent=2) + "\n")
    models = out / "models"
    base, sft, rl = models / "base", models / "sft", models / "rl"
    stages = Stages(["model", "teacher", "data", "sft", "start", "rl", "eval", "report"], out / "stage_times.json")

    if cfg.model.name == "tiny":
        stages.run("model", f"tokenizer + tiny Qwen3 -> {base}",
                   lambda: init_model(base, cfg.model), done=(base / "config.json").exists())
    else:  # a pretrained base: the embedded one (converted once into the cache) or a folder, used in place
        from longhorizon.train.pretrained import resolve
        from longhorizon.train.stage import local_path

        base = Path(stages.run("model", f"{cfg.model.name} (used in place, not copied)",
                               lambda: local_path(resolve(cfg.model.name))))

    t = cfg.teacher
    teacher_dir = out / "teacher"

    def teacher():
        from longhorizon.env.episode import Limits

        if t.policy == "oracle" and t.recovery > 0:
            from longhorizon.train.teacher import RecoveringOracle

            policy = RecoveringOracle(t.recovery)
        else:
            policy = make_policy(t.policy, model=t.model, base_url=t.base_url, temperature=t.temperature)
        summary = _run_policy(tasks_for(t.split, t.seeds, t.families, t.level), policy, teacher_dir,
                              split=t.split, seeds=t.seeds, families=t.families, limits=Limits(), concurrency=8,
                              progress=progress, level=t.level)
        o = summary["overall"]
        print(f"  teacher: {o['episodes']} episodes, pass@1 {o['pass@1']:.3f}, reward {o['mean_reward']:.3f}, "
              f"{o['mean_tool_calls']:.1f} tool calls per episode")
        return summary

    stages.run("teacher", f"{t.policy} plays {t.split} ({', '.join(t.families or ['all families'])}, "
               f"{t.seeds} seeds{'' if t.level is None else f', level {t.level}'}) -> {teacher_dir}", teacher)

    data_dir = out / "sft_data"

    def data():
        summary = build_sft_dataset([teacher_dir], data_dir, min_reward=t.min_reward, overwrite=True)
        print(f"  kept {summary['kept']} of {summary['episodes_seen']} episodes at reward >= {t.min_reward}")
        return summary

    stages.run("data", f"rejection sampling (reward >= {t.min_reward}) -> {data_dir}", data,
               done=(data_dir / "summary.json").exists())

    s = cfg.sft
    s.data, s.model, s.out = str(data_dir), str(base), str(sft)
    if cfg.start.checkpoint == "headroom":  # every step's model, for the start stage to choose from
        s.keep_steps = True
    stages.run("sft", f"SFT of {cfg.model.name} ({s.epochs:g} epochs, lr {s.learning_rate:g}) -> {sft}",
               lambda: run_sft(s, resume=any(sft.glob("checkpoint-*")), progress=progress),
               done=(sft / "summary.json").exists())

    start_file = out / "start.json"

    def start():
        chosen = choose_start(cfg, sft, out / "dev", progress=progress)
        start_file.write_text(json.dumps(chosen, indent=2) + "\n")
        print(f"  RL starts from {chosen['path']} ({chosen['why']})", flush=True)
        return chosen

    stages.run("start", f"the model RL starts from (start.checkpoint: {cfg.start.checkpoint})", start,
               done=start_file.exists())
    chosen = json.loads(start_file.read_text())
    r = cfg.rl
    r.model, r.out = chosen["path"], str(rl)
    stages.run("rl", f"{r.loss.upper()} for {r.max_steps} steps, {r.group_size} episodes per task -> {rl}",
               lambda: run_rl(r, resume=any(rl.glob("checkpoint-*")), progress=progress),
               done=(rl / "summary.json").exists())

    e = cfg.eval
    if e.engine not in ENGINES:
        raise UsageError(f"eval.engine must be one of {', '.join(ENGINES)}, not {e.engine!r}")
    if e.dtype not in DTYPES:
        raise UsageError(f"eval.dtype must be one of {', '.join(DTYPES)}, not {e.dtype!r}")

    def evaluate():
        results = {}
        models = {"base": base, "sft": sft,
                  **({"start": Path(chosen["path"])} if chosen["checkpoint"] is not None else {}),
                  "rl": rl}
        runs = eval_plan(e, transfer, models, longer)
        server_of, policy = None, None
        with contextlib.ExitStack() as stack:
            for key, name, path, ec in runs:
                if (done := _finished(out / "eval" / key)) is not None:
                    results[key] = done
                    continue
                if e.engine == "vllm" and server_of != name:
                    stack.close()
                    print(f"  {name}: starting vLLM on {path}", flush=True)
                    policy = stack.enter_context(served_policy(path, e, out / "eval" / f"vllm-{name}.log"))
                    server_of = name
                print(f"  {key}: greedy on {ec.split} ({', '.join(ec.families or ['all families'])}, "
                      f"{ec.seeds} seeds{'' if ec.level is None else f', level {ec.level}'}, {e.engine})", flush=True)
                t0 = time.time()
                results[key] = evaluate_model(path, out / "eval" / key, ec, progress=progress,
                                              policy=policy)  # None for the local engine
                print(f"  {key}: {time.time() - t0:.0f} s", flush=True)
        return results

    splits = e.split + (f" and transfer families on {transfer.split}" if transfer else "") + (
        f" and levels {', '.join(str(c.level) for _, c in longer)}" if longer else "")
    who = "base, SFT, RL's start and RL" if chosen["checkpoint"] is not None else "base, SFT and RL"
    stages.run("eval", f"greedy pass@1 of {who} on {splits} ({e.engine}, {e.dtype})", evaluate)
    report = stages.run("report", f"-> {out / 'report.md'}, {out / 'report.html'}",
                        lambda: write_report(out, stage_times=stages.times))
    print()
    print(report["table"])
    print(f"\nreport: {out / 'report.md'}  {out / 'report.html'}  "
          f"(stages: {sum(stages.times.values()):.0f} s; this session {time.time() - stages.t0:.0f} s)")
    return {"complete": report["complete"], "report": report, "times": stages.times}


def _asdict(cfg) -> dict:
    import dataclasses

    return dataclasses.asdict(cfg)
