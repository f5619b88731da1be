"""Cross-benchmark compare (results.json paired by entry and trial) and the transfer report."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from longhorizon.cli import main
from longhorizon.evaluate.results import write_results
from longhorizon.evaluate.runs import run_episodes
from longhorizon.rollout.runner import RunSpec
from longhorizon.tasks.registry import tasks_for
from longhorizon.train.provenance import rl_input, sft_input, stage_record

FAMILY = "downloads_cleanup"


def _bench(out: Path, benchmark: str, model: str, passing: set[str], ids, trials: int = 1) -> Path:
    entries = [{"id": i, "category": "simple_python" if i < "m" else "multiple", "trial": t,
                "passed": i in passing, "reward": float(i in passing)} for i in ids for t in range(trials)]
    write_results(out, benchmark, model, entries, {})
    return out / "results.json"


IDS = [f"a{k:02d}" for k in range(10)] + [f"n{k:02d}" for k in range(10)]


def test_compare_pairs_two_results_files_by_entry_with_mcnemar(tmp_path, capsys):
    a = _bench(tmp_path / "a", "bfcl", "base", set(IDS[:10]), IDS)
    b = _bench(tmp_path / "b", "bfcl", "trained", set(IDS), IDS)
    assert main(["compare", str(a), str(b), "--format", "json"]) == 0
    c = json.loads(capsys.readouterr().out)
    assert c["paired_tasks"] == 20 and c["pass@1_a"] == 0.5 and c["pass@1_b"] == 1.0
    assert c["mcnemar"] == {"a_only_passed": 0, "b_only_passed": 10, "p_value": 2 / 2**10}
    assert c["categories"]["simple_python"]["delta_pass@1"] == 0.0
    assert c["categories"]["multiple"]["delta_pass@1"] == 1.0


def test_compare_averages_trials_of_an_entry_and_takes_folders(tmp_path, capsys):
    _bench(tmp_path / "a", "tau2", "base", set(), IDS[:4], trials=3)
    _bench(tmp_path / "b", "tau2", "trained", set(IDS[:2]), IDS[:4], trials=3)
    assert main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--format", "json"]) == 0
    c = json.loads(capsys.readouterr().out)
    assert c["paired_tasks"] == 4 and c["delta_pass@1"] == 0.5


def test_compare_refuses_results_of_different_benchmarks(tmp_path, capsys):
    a = _bench(tmp_path / "a", "bfcl", "m", set(), IDS)
    b = _bench(tmp_path / "b", "tau2", "m", set(), IDS)
    assert main(["compare", str(a), str(b)]) == 2
    assert "cannot pair bfcl results with tau2 results" in capsys.readouterr().err


@pytest.fixture(scope="module")
def holdout_runs(tmp_path_factory):
    from longhorizon.policies.factory import make_policy

    base = tmp_path_factory.mktemp("runs")
    for name in ("null", "oracle"):
        p = make_policy(name)
        asyncio.run(run_episodes(tasks_for("holdout", 2, [FAMILY]), p,
                                 RunSpec(policy=p.describe(), split="holdout", seeds=2, families=[FAMILY]),
                                 base / name, progress=False))
    return base


def _model(tmp_path: Path, inputs: list[dict]) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "longhorizon_model.json").write_text(json.dumps({"training": [stage_record("rl", inputs)]}))
    return folder


def _audit(tmp_path: Path, passed: bool) -> Path:
    path = tmp_path / "audit.json"
    path.write_text(json.dumps({"passed": passed, "flagged": 0 if passed else 3}))
    return path


def _report(tmp_path, holdout_runs, model, audit, capsys):
    a = _bench(tmp_path / "ba", "bfcl", "base", set(IDS[:10]), IDS)
    b = _bench(tmp_path / "bb", "bfcl", "trained", set(IDS), IDS)
    args = ["report", "transfer", "--base", str(holdout_runs / "null"), str(a),
            "--trained", str(holdout_runs / "oracle"), str(b), "--trained-model", str(model), "--out", str(tmp_path / "r")]
    assert main(args + (["--audit", str(audit)] if audit else [])) == 0
    capsys.readouterr()
    return json.loads((tmp_path / "r" / "transfer.json").read_text())


def test_transfer_report_puts_holdout_and_benchmark_rows_in_one_table(tmp_path, holdout_runs, capsys):
    rep = _report(tmp_path, holdout_runs, _model(tmp_path, [rl_input("train", 10, None)]), _audit(tmp_path, True), capsys)
    rows = {(r["suite"], r["row"]): r for r in rep["rows"]}
    assert list(rows)[0] == ("suite:holdout", "overall")
    hold = rows[("suite:holdout", "overall")]
    assert (hold["n"], hold["base"], hold["trained"], hold["delta"]) == (2, 0.0, 1.0, 1.0)
    assert rows[("bfcl", "overall")]["delta"] == 0.5 and rows[("bfcl", "multiple")]["delta"] == 1.0
    assert rep["clean"] and rep["firewall_problems"] == []
    md = (tmp_path / "r" / "report.md").read_text()
    assert "Firewall: clean" in md and "| internal holdout | overall | 2 | 0.000 | 1.000 | +1.000 |" in md
    page = (tmp_path / "r" / "report.html").read_text()
    assert page.startswith("<!doctype html>") and "<td>multiple</td>" in page and "<script" not in page and "http" not in page


def test_transfer_report_refuses_clean_when_training_saw_an_external_benchmark(tmp_path, holdout_runs, capsys):
    ext = tmp_path / "bfcl-run"
    ext.mkdir()
    (ext / "run.json").write_text(json.dumps({"split": "simple_python", "source": "external:bfcl"}))
    data = tmp_path / "sft-data"
    data.mkdir()
    (data / "summary.json").write_text(json.dumps({"runs": [str(ext)]}))
    rep = _report(tmp_path, holdout_runs, _model(tmp_path, [sft_input(data)]), _audit(tmp_path, True), capsys)
    assert not rep["clean"]
    assert any("external:bfcl" in p for p in rep["firewall_problems"])
    assert "Firewall: NOT shown clean" in (tmp_path / "r" / "report.md").read_text()


def test_transfer_report_is_not_clean_without_a_passed_audit(tmp_path, holdout_runs, capsys):
    model = _model(tmp_path, [rl_input("train", 10, None)])
    assert _report(tmp_path, holdout_runs, model, None, capsys)["clean"] is False
    (tmp_path / "x").mkdir()
    rep = _report(tmp_path / "x", holdout_runs, model, _audit(tmp_path, False), capsys)
    assert rep["clean"] is False and any("flagged 3" in p for p in rep["firewall_problems"])


def test_transfer_report_joins_one_benchmarks_files_per_domain(tmp_path, holdout_runs, capsys):
    def domain(out: Path, d: str, passing: set) -> Path:
        entries = [{"id": str(k), "trial": 0, "passed": str(k) in passing, "reward": float(str(k) in passing)}
                   for k in range(4)]
        write_results(out, "tau2", "m", entries, {"domain": d})
        return out / "results.json"

    base = [domain(tmp_path / "b1", "mock", set()), domain(tmp_path / "b2", "airline", set())]
    trained = [domain(tmp_path / "t1", "mock", {"0", "1", "2", "3"}), domain(tmp_path / "t2", "airline", {"0"})]
    assert main(["report", "transfer", "--base", *map(str, base), "--trained", *map(str, trained),
                 "--out", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    rows = {r["row"]: r for r in json.loads((tmp_path / "r" / "transfer.json").read_text())["rows"]}
    assert (rows["overall"]["n"], rows["overall"]["delta"]) == (8, 5 / 8)
    assert (rows["mock"]["delta"], rows["airline"]["delta"]) == (1.0, 0.25)


@pytest.mark.parametrize("entry", [1, {"id": "a"}, {"id": "a", "passed": "yes", "reward": 1.0},
                                   {"id": ["a"], "passed": True, "reward": 1.0},
                                   {"id": "a", "passed": True, "reward": "full"}])
def test_compare_refuses_a_malformed_entry_in_one_line(tmp_path, capsys, entry):
    good = _bench(tmp_path / "a", "bfcl", "base", set(IDS[:10]), IDS)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"benchmark": "bfcl", "model": "m", "entries": [entry]}))
    assert main(["compare", str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert "entry 0 is malformed" in err and err.count("\n") == 1


def test_compare_of_results_files_with_a_repeat_reports_the_self_disagreement(tmp_path, capsys):
    a = _bench(tmp_path / "a", "bfcl", "base", set(IDS[:10]), IDS)
    a2 = _bench(tmp_path / "a2", "bfcl", "base", set(IDS[:8] + IDS[10:12]), IDS)  # 2 lost, 2 gained: 4 of 20 differ
    b = _bench(tmp_path / "b", "bfcl", "trained", set(IDS), IDS)
    assert main(["compare", str(a), str(b), "--repeat", str(a2), "--format", "json"]) == 0
    c = json.loads(capsys.readouterr().out)
    assert c["noise_floor"]["self_disagreement"] == 4 / 20 and c["noise_floor"]["self_delta_pass@1"] == 0.0
    assert c["categories"]["simple_python"]["noise_floor"]["self_disagreement"] == 2 / 10
    assert c["inside_noise_floor"]["pass@1"] is False  # Δ 0.5 against a floor well below it


def test_transfer_report_with_a_repeat_of_the_base_labels_a_delta_inside_the_floor(tmp_path, capsys):
    a = _bench(tmp_path / "a", "bfcl", "base", set(IDS[:10]), IDS)
    a2 = _bench(tmp_path / "a2", "bfcl", "base", set(IDS[:8] + IDS[10:12]), IDS)
    b = _bench(tmp_path / "b", "bfcl", "trained", set(IDS[:11]), IDS)  # one entry more than A: Δ 0.05
    assert main(["report", "transfer", "--base", str(a), "--trained", str(b), "--repeat", str(a2),
                 "--out", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    row = json.loads((tmp_path / "r" / "transfer.json").read_text())["rows"][0]
    assert (row["suite"], row["row"], row["delta"]) == ("bfcl", "overall", 0.05)
    assert row["noise_floor"]["self_disagreement"] == 0.2 and row["noise_floor"]["inside"] is True
    assert "| bfcl | overall | 20 | 0.500 | 0.550 | +0.050 |" in (tmp_path / "r" / "report.md").read_text()
    assert "| 0.200 | ±" in (tmp_path / "r" / "report.md").read_text()
    assert "INSIDE |" in (tmp_path / "r" / "report.md").read_text()


def test_held_out_seeds_at_two_levels_are_two_rows_not_a_clash(tmp_path, capsys):
    """The recipe's sets (a) and (c) are both split holdout: one at the trained level 1, one at a
    longer level. The report keys runs by split and level (read from the task ids)."""
    from longhorizon.policies.factory import make_policy

    family = "downloads_cleanup"  # levels 1-3
    runs = {}
    for name in ("null", "oracle"):
        p = make_policy(name)
        for level in (1, 2):
            tasks = tasks_for("holdout", 1, [family], level)
            runs[name, level] = tmp_path / f"{name}-L{level}"
            asyncio.run(run_episodes(tasks, p, RunSpec(policy=p.describe(), split="holdout", seeds=1, families=[family],
                                                       tasks=[t.id for t in tasks]), runs[name, level], progress=False))
    assert main(["report", "transfer", "--base", str(runs["null", 1]), str(runs["null", 2]),
                 "--trained", str(runs["oracle", 1]), str(runs["oracle", 2]), "--out", str(tmp_path / "r")]) == 0
    capsys.readouterr()
    rows = json.loads((tmp_path / "r" / "transfer.json").read_text())["rows"]
    assert [(r["suite"], r["n"], r["delta"]) for r in rows] == [("suite:holdout level 1", 1, 1.0),
                                                                ("suite:holdout level 2", 1, 1.0)]
    assert "| internal holdout level 2 | overall | 1 |" in (tmp_path / "r" / "report.md").read_text()
