"""BFCL-V4 through its official checker and harness (the real bfcl-eval wheel in .venvs/bfcl).

Ground truth is read at test time from BFCL's own data files (possible_answer/) in that venv,
never copied here. The venv is made by `make bfcl-venv` (a prerequisite of `make test`); a
missing one is created by the fixture (about a minute from a warm pip cache).
"""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

import pytest

from longhorizon.cli import main
from longhorizon.evaluate.bfcl import ensure_venv, run_driver
from longhorizon.testing.standin_llm import StandinLLM

CATS = ("simple_python", "multiple", "irrelevance")
BENCH_CATS = CATS + ("multi_turn_base",)  # the whole command also plays multi-turn conversations
N = 3


@pytest.fixture(scope="module")
def bfcl_python() -> Path:
    return ensure_venv(quiet=True)


@pytest.fixture(scope="module")
def bfcl_data(bfcl_python) -> Path:
    out = subprocess.run([str(bfcl_python), "-c", "import bfcl_eval, pathlib; print(pathlib.Path(bfcl_eval.__file__).parent / 'data')"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _cases(data: Path, cat: str) -> list[dict]:
    """The first N entries of CAT with their ground truth (None for irrelevance: no call is right)."""
    questions = _jsonl(data / f"BFCL_v4_{cat}.json")[:N]
    answers = {a["id"]: a["ground_truth"] for a in _jsonl(data / "possible_answer" / f"BFCL_v4_{cat}.json")} \
        if (data / "possible_answer" / f"BFCL_v4_{cat}.json").exists() else {}
    return [{"id": q["id"], "question": q["question"][0][-1]["content"], "function": q.get("function", []),
             "truth": answers.get(q["id"])} for q in questions]


def _right_calls(truth: list[dict]) -> list[tuple[str, dict]]:
    """One correct call per ground-truth call: each parameter's first accepted value ("" = omit).
    Names as the OpenAI handler sends them ("." is not allowed there, BFCL maps it to "_")."""
    out = []
    for call in truth:
        (name, params), = call.items()
        out.append((name.replace(".", "_"), {k: v[0] for k, v in params.items() if v[0] != ""}))
    return out


def _right(case: dict) -> list[tuple[str, dict]]:
    return _right_calls(case["truth"]) if case["truth"] is not None else []


def _wrong_calls(case: dict) -> list[tuple[str, dict]]:
    if case["truth"] is None:  # irrelevance: calling anything is wrong
        fn = case["function"][0]
        return [(fn["name"].replace(".", "_"), {})]
    return [(name, {k: "definitely-not-this" for k in args}) for name, args in _right_calls(case["truth"])]


def _answer_file(cases: list[dict], calls) -> str:
    rows = []
    for c in cases:
        made = calls(c)
        result = [{name: json.dumps(args)} for name, args in made] if made else \
            "I cannot help with that using these functions."
        rows.append(json.dumps({"id": c["id"], "result": result}))
    return "\n".join(rows) + "\n"


def _score_files(tmp_path: Path, bfcl_python: Path, bfcl_data: Path, calls) -> list[dict]:
    work = tmp_path / "bfcl"
    groups = {"simple_python": "non_live", "multiple": "non_live", "irrelevance": "non_live"}
    for cat in CATS:
        d = work / "result" / "longhorizon-openai-FC" / groups[cat]
        d.mkdir(parents=True, exist_ok=True)
        (d / f"BFCL_v4_{cat}_result.json").write_text(_answer_file(_cases(bfcl_data, cat), calls))
    cfg = {"mode": "score", "workdir": str(work), "categories": list(CATS), "limit": N}
    return run_driver(cfg, bfcl_python, quiet=True)["entries"]


def test_known_correct_answers_score_one_through_bfcls_checker(tmp_path, bfcl_python, bfcl_data):
    entries = _score_files(tmp_path, bfcl_python, bfcl_data, _right)
    assert len(entries) == N * len(CATS)
    assert all(e["passed"] for e in entries), [e for e in entries if not e["passed"]]


def test_wrong_answers_score_zero_through_bfcls_checker(tmp_path, bfcl_python, bfcl_data):
    entries = _score_files(tmp_path, bfcl_python, bfcl_data, _wrong_calls)
    assert len(entries) == N * len(CATS)
    assert not any(e["passed"] for e in entries)


def _parse_call(src: str, tools: dict) -> tuple[str, dict]:
    """A multi-turn ground-truth call such as "cd(folder='x')" or "sort('f.pdf')" as (name,
    arguments); positional arguments take the names of the tool's parameters in order."""
    node = ast.parse(src, mode="eval").body
    order = list(tools[node.func.id]["parameters"]["properties"])
    args = {order[i]: ast.literal_eval(a) for i, a in enumerate(node.args)}
    return node.func.id, args | {k.arg: ast.literal_eval(k.value) for k in node.keywords}


class _Replay:
    """A stand-in model that answers each BFCL question from BFCL's ground truth (or wrongly).
    Multi-turn: each user turn gets that turn's ground-truth calls, then a text reply once the
    tool results are back (which ends the turn in BFCL's loop)."""

    def __init__(self, cases: list[dict], wrong: bool = False):
        self.by_question = {c["question"]: c for c in cases}
        self.wrong = wrong

    def __call__(self, request: dict) -> dict:
        case = self.by_question[next(m["content"] for m in request["messages"] if m["role"] == "user")]
        if case["id"].startswith("multi_turn"):
            return self._turn(request, case)
        return self._reply(request, (_wrong_calls if self.wrong else _right)(case))

    def _turn(self, request: dict, case: dict) -> dict:
        msgs = request["messages"]
        if msgs[-1]["role"] == "tool":
            return {"role": "assistant", "content": "Done with this step."}
        turn = sum(m["role"] == "user" for m in msgs) - 1
        tools = {t["function"]["name"]: t["function"] for t in request["tools"]}
        calls = [_parse_call(c, tools) for c in case["truth"][turn]]
        if self.wrong:
            calls = [(n, {k: "definitely-not-this" for k in a}) for n, a in calls]
        return self._reply(request, calls)

    @staticmethod
    def _reply(request: dict, calls: list[tuple[str, dict]]) -> dict:
        if not calls:
            return {"role": "assistant", "content": "None of these functions fits the request."}
        sent = {t["function"]["name"] for t in request["tools"]}
        assert {n for n, _ in calls} <= sent, "the replay calls only the tools the harness sent"
        return {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, (n, a) in enumerate(calls)]}


def _bench(tmp_path: Path, bfcl_data: Path, wrong: bool, capsys) -> dict:
    cases = [c for cat in BENCH_CATS for c in _cases(bfcl_data, cat)]
    with StandinLLM(_Replay(cases, wrong=wrong), model="replay") as srv:
        rc = main(["bench", "bfcl", "--base-url", srv.base_url, "--model", "replay", "--categories", *BENCH_CATS,
                   "--limit", str(N), "--out", str(tmp_path / "out"), "--quiet", "--threads", "2"])
    assert rc == 0
    capsys.readouterr()
    return json.loads((tmp_path / "out" / "results.json").read_text())


def test_bench_bfcl_against_a_faithful_replay_scores_one(tmp_path, bfcl_python, bfcl_data, capsys):
    res = _bench(tmp_path, bfcl_data, wrong=False, capsys=capsys)
    assert res["benchmark"] == "bfcl" and res["model"] == "replay"
    assert sorted({e["category"] for e in res["entries"]}) == sorted(BENCH_CATS)
    assert len(res["entries"]) == N * len(BENCH_CATS)
    assert res["summary"]["overall"]["accuracy"] == 1.0
    assert all(e["reward"] == 1.0 and e["passed"] for e in res["entries"])
    assert "| **overall (pooled)** | 12 | 1.000 |" in (tmp_path / "out" / "results.md").read_text()


def test_bench_bfcl_against_a_wrong_replay_scores_zero(tmp_path, bfcl_python, bfcl_data, capsys):
    res = _bench(tmp_path, bfcl_data, wrong=True, capsys=capsys)
    assert len(res["entries"]) == N * len(BENCH_CATS)
    assert res["summary"]["overall"]["accuracy"] == 0.0
    lo, hi = res["summary"]["overall"]["accuracy_ci95"]
    assert lo == pytest.approx(0.0, abs=1e-12) and 0 < hi < 0.5


def test_bench_bfcl_sends_temperature_0_and_a_seed_with_every_request(tmp_path, bfcl_python, bfcl_data, capsys):
    with StandinLLM(_Replay(_cases(bfcl_data, "simple_python")), model="replay") as srv:
        assert main(["bench", "bfcl", "--base-url", srv.base_url, "--model", "replay", "--categories", "simple_python",
                     "--limit", "2", "--out", str(tmp_path / "out"), "--quiet", "--seed", "7"]) == 0
    assert len(srv.requests) == 2
    assert [(r["temperature"], r["seed"]) for r in srv.requests] == [(0.0, 7), (0.0, 7)]
    meta = json.loads((tmp_path / "out" / "results.json").read_text())["meta"]
    assert (meta["temperature"], meta["seed"], meta["reproducible"], meta["threads"]) == (0.0, 7, False, 4)


def test_bench_bfcl_reproducible_sends_one_request_at_a_time_and_records_it(tmp_path, bfcl_python, bfcl_data, capsys):
    with StandinLLM(_Replay(_cases(bfcl_data, "simple_python")), model="replay") as srv:
        assert main(["bench", "bfcl", "--base-url", srv.base_url, "--model", "replay", "--categories", "simple_python",
                     "--limit", "2", "--out", str(tmp_path / "out"), "--quiet", "--reproducible"]) == 0
    meta = json.loads((tmp_path / "out" / "results.json").read_text())["meta"]
    assert (meta["reproducible"], meta["threads"], meta["seed"]) == (True, 1, 0)
    config = json.loads((tmp_path / "out" / "bfcl" / "driver_config.json").read_text())
    assert config["threads"] == 1  # what BFCL's generation loop was told: one request in flight
    assert main(["bench", "bfcl", "--base-url", srv.base_url, "--model", "replay", "--threads", "4",
                 "--reproducible", "--out", str(tmp_path / "x")]) == 2


def test_bench_bfcl_refuses_an_online_category(capsys):
    assert main(["bench", "bfcl", "--base-url", "http://127.0.0.1:1/v1", "--model", "m",
                 "--categories", "web_search_base", "--out", "/tmp/never"]) == 2
    assert "does not run offline" in capsys.readouterr().err


def test_entries_the_server_never_answered_are_infra_errors_and_a_rerun_retries_them(tmp_path, bfcl_python,
                                                                                     bfcl_data, capsys):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"
    args = ["bench", "bfcl", "--model", "replay", "--categories", "simple_python", "--limit", "2",
            "--out", str(tmp_path / "out"), "--quiet"]
    assert main(args + ["--base-url", dead]) == 3
    assert "2 of 2 BFCL entries never reached the model" in capsys.readouterr().err
    first = json.loads((tmp_path / "out" / "results.json").read_text())
    assert first["entries"] == [] and first["meta"]["complete"] is False
    with StandinLLM(_Replay(_cases(bfcl_data, "simple_python")), model="replay") as srv:
        assert main(args + ["--base-url", srv.base_url]) == 0
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    assert res["meta"]["complete"] and [e["passed"] for e in res["entries"]] == [True, True]


@pytest.mark.parametrize("body", ["{nope", "[1]", '{"entries": [1]}', '{"entries": [{"id": 3, "passed": true}]}',
                                  '{"entries": [{"id": "a", "category": "c"}]}'])
def test_an_unreadable_entries_file_is_one_line(tmp_path, body):
    from longhorizon.core.errors import InfraError
    from longhorizon.evaluate.bfcl import read_entries

    (tmp_path / "entries.json").write_text(body)
    with pytest.raises(InfraError) as err:
        read_entries(tmp_path / "entries.json")
    assert "\n" not in str(err.value)


def test_an_entry_given_twice_is_kept_once_and_counted(tmp_path):
    from longhorizon.evaluate.bfcl import read_entries

    e = {"id": "simple_python_0", "category": "simple_python", "passed": True}
    (tmp_path / "entries.json").write_text(json.dumps({"entries": [e, {**e, "passed": False}]}))
    got = read_entries(tmp_path / "entries.json")
    assert got["entries"] == [e] and got["duplicates_dropped"] == 1
