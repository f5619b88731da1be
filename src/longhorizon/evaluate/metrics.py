"""pass@1, pass@k, pass^k and dense reward with 95% intervals, overall and per category;
paired comparison.

Every rate is averaged over tasks: each task's own rate first (over its samples), then the
mean over tasks. With ``--samples k`` repeats a task contributes k episodes:

    pass@k = mean over tasks of 1 - C(n - c, k) / C(n, k)   (some of k samples passes; Chen et al. 2021)
    pass^k = mean over tasks of C(c, k) / C(n, k)           (all of k samples pass; tau2-bench's reliability)

both unbiased for a task with n >= k samples of which c passed, reported for k = 1 .. the
fewest samples any task has. Intervals: with one sample per task, pass@1 uses the Wilson
score interval (honest at 0 and 1, where a bootstrap collapses to a point); as soon as a task
has more than one sample its episodes are not independent, so every interval is a percentile
bootstrap over tasks (each draw takes whole tasks with all their samples). pass@1 has that one
interval wherever it appears (``pass@1_ci95``, and k = 1 of ``pass@k_ci95`` and ``pass^k_ci95``,
which are the same rate), named by ``ci``. Mean reward always uses the bootstrap over tasks. A group with no episodes has no rates: ``None`` (shown "n/a").
``compare`` pairs runs by task: Δ with a paired bootstrap over tasks, and McNemar's exact
test on the discordant tasks (first sample of each task: the greedy episode).

Endings are counted per status (``max_tokens``: replies kept being cut by the token limit);
replies cut at the token limit are counted apart too (``cut_replies``), since an episode can
recover from one and end otherwise.

An episode logged twice counts once (its first line; ``rollout.store.unique_episodes``) and
the number dropped is reported (``duplicates_dropped``). ``run_status`` says whether a run
has every episode its manifest expects; the CLI's ``compare`` refuses an incomplete run
unless told otherwise, so episodes that keep failing as infrastructure errors cannot quietly
shrink a comparison.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import numpy as np

from longhorizon.core.words import plural
from longhorizon.rollout.store import unique_episodes

Z95 = 1.959963984540054
BOOTSTRAP = 2000
SEED = 0


def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float]:
    if n == 0:
        return (0.0, 0.0)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # at k = 0 (k = n) the bound is exactly 0 (1); the float formula leaves e.g. 3.5e-18
    return (0.0 if k == 0 else max(0.0, centre - half), 1.0 if k == n else min(1.0, centre + half))


def bootstrap_mean(values, n_boot: int = BOOTSTRAP, seed: int = SEED) -> tuple[float, float]:
    x = np.asarray(values, dtype=float)
    if len(x) == 0:
        return (0.0, 0.0)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, len(x), size=(n_boot, len(x)))].mean(axis=1)
    return (float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5)))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value: binomial test of b vs c discordant pairs at p=0.5."""
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one task: the chance that at least one of k of its n samples (c
    passed) passes, drawn without replacement."""
    if not 0 < k <= n:
        raise ValueError(f"pass@k needs 1 <= k <= n, got k={k}, n={n}")
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k of one task (tau2-bench): the chance that all of k of its n samples pass."""
    if not 0 < k <= n:
        raise ValueError(f"pass^k needs 1 <= k <= n, got k={k}, n={n}")
    return math.comb(c, k) / math.comb(n, k)


def bootstrap_tasks(per_task, n_boot: int = BOOTSTRAP, seed: int = SEED) -> tuple[float, float]:
    """95% percentile interval of the mean of per-task values, resampling tasks (clusters)."""
    return bootstrap_mean(per_task, n_boot, seed)


def _task_counts(rows: list[dict]) -> dict[str, tuple[int, int, float]]:
    """Per task: (samples, passed, mean reward)."""
    by_task: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_task[r["task_id"]].append(r)
    return {t: (len(rs), sum(bool(r["grade"]["passed"]) for r in rs),
                float(np.mean([float(r["grade"]["reward"]) for r in rs]))) for t, rs in sorted(by_task.items())}


def paired_bootstrap_ci(diffs, n_boot: int = BOOTSTRAP, seed: int = SEED) -> list[list[float]]:
    """95% percentile interval of the mean of each array of per-task differences (B - A), all
    from the same resampled sets of tasks, so intervals of several measures stay comparable."""
    diffs = [np.asarray(d, dtype=float) for d in diffs]
    n = len(diffs[0]) if diffs else 0
    if n == 0:
        return [[0.0, 0.0] for _ in diffs]
    idx = np.random.default_rng(seed).integers(0, n, size=(n_boot, n))
    means = [d[idx].mean(axis=1) for d in diffs]
    return [[float(np.percentile(m, 2.5)), float(np.percentile(m, 97.5))] for m in means]


def _group_stats(rows: list[dict]) -> dict[str, Any]:
    n = len(rows)
    counts = _task_counts(rows)
    if not n:
        return {"episodes": 0, "tasks": 0, "samples_per_task": None, "ci": None,
                "pass@1": None, "pass@1_ci95": None, "pass@k": {}, "pass@k_ci95": {}, "pass^k": {},
                "pass^k_ci95": {}, "mean_reward": None, "mean_reward_ci95": None, "mean_tool_calls": None}
    sizes = [ni for ni, _, _ in counts.values()]
    clustered = max(sizes) > 1
    at_k, hat_k, at_ci, hat_ci = {}, {}, {}, {}
    for k in range(1, min(sizes) + 1):
        a = [pass_at_k(ni, ci, k) for ni, ci, _ in counts.values()]
        h = [pass_hat_k(ni, ci, k) for ni, ci, _ in counts.values()]
        at_k[str(k)], hat_k[str(k)] = float(np.mean(a)), float(np.mean(h))
        at_ci[str(k)], hat_ci[str(k)] = list(bootstrap_tasks(a)), list(bootstrap_tasks(h))
    rates = [ci / ni for ni, ci, _ in counts.values()]
    rewards = [r for _, _, r in counts.values()]
    passed = sum(ci for _, ci, _ in counts.values())
    pass1_ci = list(bootstrap_tasks(rates)) if clustered else list(wilson(passed, n))
    at_ci["1"] = hat_ci["1"] = pass1_ci  # pass@1 = pass^1: one rate, one interval (module doc)
    return {
        "episodes": n,
        "tasks": len(counts),
        "samples_per_task": [min(sizes), max(sizes)],
        "ci": "bootstrap over tasks" if clustered else "wilson over episodes",
        "pass@1": float(np.mean(rates)),
        "pass@1_ci95": pass1_ci,
        "pass@k": at_k,
        "pass@k_ci95": at_ci,
        "pass^k": hat_k,
        "pass^k_ci95": hat_ci,
        "mean_reward": float(np.mean(rewards)),
        "mean_reward_ci95": list(bootstrap_tasks(rewards)),
        "mean_tool_calls": float(np.mean([len(r.get("tool_calls", [])) for r in rows])),
    }


def run_status(trajectories: list[dict], infra_errors: list[dict] = (), expected: int | None = None) -> dict[str, Any]:
    """How finished a run is: episodes expected (the manifest's count; None if unknown),
    finished (distinct episode ids), missing, and pending infrastructure errors (failed
    episodes with no trajectory yet). ``complete`` only when the expected count is known and met."""
    done = {r["episode_id"] for r in trajectories}
    pending = {e["episode_id"] for e in infra_errors if e["episode_id"] not in done}
    missing = max(0, expected - len(done)) if expected is not None else None
    return {"expected": expected, "finished": len(done), "missing": missing,
            "pending_infra_errors": len(pending), "complete": expected is not None and missing == 0}


def describe_incomplete(name: str, st: dict[str, Any]) -> str:
    """One phrase saying why a run is incomplete, e.g. ``runs/b: 9 of 12 episodes finished, 3
    missing (2 pending infrastructure errors)``."""
    if st["expected"] is None:
        head = (f"{name}: {plural(st['finished'], 'episode')} finished, expected count unknown "
                "(no 'episodes' in run.json)")
    else:
        head = f"{name}: {st['finished']} of {plural(st['expected'], 'episode')} finished, {st['missing']} missing"
    return head + f" ({plural(st['pending_infra_errors'], 'pending infrastructure error')})"


def summarize(trajectories: list[dict], infra_errors: list[dict] = (), expected: int | None = None) -> dict[str, Any]:
    """Metrics of one run: overall, per category, per family, plus episode statuses and
    infrastructure errors (episodes that have no trajectory yet, counted apart). An episode
    logged more than once counts once (first line kept); ``duplicates_dropped`` says how many."""
    trajectories, dups = unique_episodes(list(trajectories))
    status = run_status(trajectories, infra_errors, expected)
    by_cat, by_fam, statuses = defaultdict(list), defaultdict(list), defaultdict(int)
    cut = [cut_replies(r) for r in trajectories]
    for r in trajectories:
        by_cat[r["category"]].append(r)
        by_fam[r["family"]].append(r)
        statuses[r["status"]] += 1
    return {
        "overall": _group_stats(trajectories),
        "categories": {k: _group_stats(v) for k, v in sorted(by_cat.items())},
        "families": {k: _group_stats(v) for k, v in sorted(by_fam.items())},
        "statuses": dict(sorted(statuses.items())),
        "cut_replies": {"replies": sum(cut), "episodes": sum(1 for n in cut if n)},
        "infra_errors": status["pending_infra_errors"],
        "expected_episodes": expected,
        "complete": status["complete"],
        "duplicates_dropped": dups,
    }


def cut_replies(record: dict) -> int:
    """Replies of an episode that its policy's token budget cut (``finish_reason`` "length"):
    answered with an error (env/episode.py), so an episode that recovered still shows them."""
    return sum(1 for t in record.get("turns") or [] if isinstance(t, dict) and t.get("finish_reason") == "length")


def _per_task(rows: list[dict]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in sorted(rows, key=lambda r: (r["task_id"], r["sample"])):
        t = out.setdefault(r["task_id"], {"pass": [], "reward": [], "first_pass": bool(r["grade"]["passed"])})
        t["pass"].append(float(r["grade"]["passed"]))
        t["reward"].append(float(r["grade"]["reward"]))
    return out


def compare(rows_a: list[dict], rows_b: list[dict], n_boot: int = BOOTSTRAP, seed: int = SEED) -> dict[str, Any]:
    """B minus A on the tasks both runs played (each episode counted once; see module doc)."""
    rows_a, dup_a = unique_episodes(list(rows_a))
    rows_b, dup_b = unique_episodes(list(rows_b))
    dups = {"a": dup_a, "b": dup_b}
    ta, tb = _per_task(rows_a), _per_task(rows_b)
    common = sorted(set(ta) & set(tb))
    if not common:  # nothing to pair: every rate and difference is n/a
        return {"paired_tasks": 0, "only_a": len(ta), "only_b": len(tb), "pass@1_a": None, "pass@1_b": None,
                "delta_pass@1": None, "delta_pass@1_ci95": None, "mean_reward_a": None, "mean_reward_b": None,
                "delta_mean_reward": None, "delta_mean_reward_ci95": None, "mcnemar": None,
                "duplicates_dropped": dups}
    pa = np.array([np.mean(ta[t]["pass"]) for t in common])
    pb = np.array([np.mean(tb[t]["pass"]) for t in common])
    ra = np.array([np.mean(ta[t]["reward"]) for t in common])
    rb = np.array([np.mean(tb[t]["reward"]) for t in common])
    ci_pass, ci_reward = paired_bootstrap_ci([pb - pa, rb - ra], n_boot, seed)
    b = sum(ta[t]["first_pass"] and not tb[t]["first_pass"] for t in common)
    c = sum(tb[t]["first_pass"] and not ta[t]["first_pass"] for t in common)
    return {
        "paired_tasks": len(common),
        "only_a": len(ta) - len(common),
        "only_b": len(tb) - len(common),
        "pass@1_a": float(pa.mean()),
        "pass@1_b": float(pb.mean()),
        "delta_pass@1": float((pb - pa).mean()),
        "delta_pass@1_ci95": ci_pass,
        "mean_reward_a": float(ra.mean()),
        "mean_reward_b": float(rb.mean()),
        "delta_mean_reward": float((rb - ra).mean()),
        "delta_mean_reward_ci95": ci_reward,
        "mcnemar": {"a_only_passed": int(b), "b_only_passed": int(c), "p_value": mcnemar_exact(b, c)},
        "duplicates_dropped": dups,
    }


def format_summary(s: dict[str, Any], families: bool = False) -> str:
    """The run's table: overall and per category, and per family when ``families`` (`eval`)."""
    names = ["overall", *(f"  {k}" for k in s["categories"])] + ([f"  {k}" for k in s["families"]] if families else [])
    w = max(28, *map(len, names))

    def row(name: str, g: dict[str, Any]) -> str:
        if not g["episodes"]:
            return f"{name:<{w}} {0:>5} {'n/a':>7} {'':<14} {'n/a':>7} {'':<14} {'n/a':>7}"
        lo, hi = g["pass@1_ci95"]
        rlo, rhi = g["mean_reward_ci95"]
        return (f"{name:<{w}} {g['episodes']:>5} {g['pass@1']:>7.3f} [{lo:.3f}, {hi:.3f}]"
                f" {g['mean_reward']:>7.3f} [{rlo:.3f}, {rhi:.3f}] {g['mean_tool_calls']:>7.1f}")

    o = s["overall"]
    header = f"{'':<{w}} {'eps':>5} {'pass@1':>7} {'95% CI':<14} {'reward':>7} {'95% CI':<14} {'calls':>7}"
    lines = [header, row("overall", o)]
    lines += [row(f"  {k}", g) for k, g in s["categories"].items()]
    if families:
        lines += ["per family"] + [row(f"  {k}", g) for k, g in s["families"].items()]
    if o["episodes"] and len(o["pass@k"]) > 1:
        for key, label in (("pass@k", "pass@k "), ("pass^k", "pass^k ")):
            lines.append(label + "  ".join(f"k={k} {v:.3f} [{o[key + '_ci95'][k][0]:.3f}, {o[key + '_ci95'][k][1]:.3f}]"
                                           for k, v in o[key].items()))
    if o["episodes"] and o["samples_per_task"][1] > 1:
        lo_n, hi_n = o["samples_per_task"]
        shown = str(lo_n) if lo_n == hi_n else f"{lo_n} to {hi_n}"
        lines.append(f"{shown} samples per task: 95% intervals bootstrap over the {plural(o['tasks'], 'task')}")
    st = ", ".join(f"{k} {v}" for k, v in s["statuses"].items()) or "none"
    lines.append(f"episode endings: {st}; infrastructure errors (not graded): {s['infra_errors']}")
    cut = s.get("cut_replies") or {}
    if cut.get("replies"):
        lines.append(f"replies cut at the token limit: {cut['replies']} in {plural(cut['episodes'], 'episode')} "
                     f"(each answered with an error; {s['statuses'].get('max_tokens', 0)} ended as max_tokens)")
    if not s.get("complete"):
        if s.get("expected_episodes") is None:
            lines.insert(0, f"INCOMPLETE: {plural(o['episodes'], 'episode')}, expected count unknown "
                            "(no 'episodes' in run.json)")
        else:
            lines.insert(0, f"INCOMPLETE: {o['episodes']} of {plural(s['expected_episodes'], 'episode')}; "
                            "rerun the run to finish it")
    return "\n".join(lines)


def format_compare(c: dict[str, Any], name_a: str = "A", name_b: str = "B") -> str:
    """The comparison as text; a first INCOMPLETE line when ``c['incomplete']`` lists runs
    (the CLI's --allow-incomplete) and ``c['runs']`` holds their ``run_status``."""
    names = {"a": name_a, "b": name_b, "a2": (c.get("runs", {}).get("a2") or {}).get("path", "A2")}
    flag = [f"INCOMPLETE: {describe_incomplete(f'{k.upper()} ({names[k]})', c['runs'][k])}; "
            "only tasks present in both runs are paired" for k in c.get("incomplete", [])]
    if not c["paired_tasks"]:
        return "\n".join(flag + [f"no tasks in common (A has {plural(c['only_a'], 'task')}, B has "
                                  f"{plural(c['only_b'], 'task')}): pass@1 and mean reward deltas n/a"])
    lo, hi = c["delta_pass@1_ci95"]
    rlo, rhi = c["delta_mean_reward_ci95"]
    m = c["mcnemar"]
    return "\n".join(flag + [
        f"paired tasks: {c['paired_tasks']} (only in A: {c['only_a']}, only in B: {c['only_b']})",
        f"pass@1       A {c['pass@1_a']:.3f}  B {c['pass@1_b']:.3f}  Δ {c['delta_pass@1']:+.3f}  95% CI [{lo:+.3f}, {hi:+.3f}]",
        f"mean reward  A {c['mean_reward_a']:.3f}  B {c['mean_reward_b']:.3f}  Δ {c['delta_mean_reward']:+.3f}  95% CI [{rlo:+.3f}, {rhi:+.3f}]",
        f"McNemar exact: {m['a_only_passed']} passed only in A ({name_a}), {m['b_only_passed']} only in B ({name_b}), p = {m['p_value']:.4g}",
    ])
