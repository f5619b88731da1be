"""Importers read τ²-bench and BFCL multi-turn result files (small samples written here in
those tools' own formats: tau2's Results JSON, BFCL's result and score JSONL) into
Trajectories that the behaviour metrics, `analyze` and `view` then use unchanged."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from longhorizon.analysis.behaviours import metrics
from longhorizon.analysis.importers import bfcl_trajectories, parse_call, tau2_trajectories
from longhorizon.cli import main
from longhorizon.core.errors import UsageError


def tau2_results(reward_second: float = 0.0) -> dict:
    def msg(role, content=None, tool_calls=None, turn=0):
        return {"role": role, "content": content, "tool_calls": tool_calls, "turn_idx": turn,
                "timestamp": "2026-01-01T00:00:00", "cost": 0.0, "usage": None, "raw_data": None}

    def tc(cid, name, args, requestor="assistant"):
        return {"id": cid, "name": name, "arguments": args, "requestor": requestor}

    def tool(cid, content, error=False, requestor="assistant"):
        return {"id": cid, "role": "tool", "content": content, "requestor": requestor, "error": error,
                "turn_idx": 0, "timestamp": None}

    ok = [msg("assistant", "Hi! How can I help you today?"),
          msg("user", "I want to cancel reservation ABC123."),
          msg("assistant", "Let me look up the reservation first.",
              [tc("c1", "get_reservation_details", {"reservation_id": "ABC123"})]),
          tool("c1", '{"reservation_id": "ABC123", "status": "active"}'),
          msg("assistant", None, [tc("c2", "cancel_reservation", {"reservation_id": "ABC123"})]),
          tool("c2", '{"reservation_id": "ABC123", "status": "cancelled"}'),
          msg("assistant", "Your reservation ABC123 is cancelled."),
          msg("user", "Thanks! ###STOP###")]
    bad = [msg("user", "My data does not work."),
           msg("user", None, [tc("u1", "toggle_airplane_mode", {}, requestor="user")]),  # the user's own tool
           tool("u1", "Airplane mode is now OFF", requestor="user"),
           msg("assistant", None, [tc("c3", "get_line_details", {"line_id": "L9"})]),
           tool("c3", "Error: line L9 not found", error=True),
           msg("assistant", "Sorry, I could not find your line.")]
    reward_info = lambda reward, basis, db: {  # noqa: E731
        "reward": reward, "db_check": {"db_match": db, "db_reward": float(db)}, "env_assertions": None,
        "action_checks": [{"action": {"action_id": "a1", "requestor": "assistant", "name": "cancel_reservation",
                                      "arguments": {"reservation_id": "ABC123"}, "info": None, "compare_args": None},
                           "action_match": db, "action_reward": float(db)}],
        "nl_assertions": None, "communicate_checks": None, "reward_basis": basis, "reward_breakdown": None,
        "info": None}
    return {
        "timestamp": "2026-01-01T00:00:00",
        "info": {"git_commit": "abc", "num_trials": 1, "max_steps": 100, "max_errors": 10,
                 "user_info": {"implementation": "user_simulator", "llm": "gpt-4.1", "llm_args": {}},
                 "agent_info": {"implementation": "llm_agent", "llm": "my-model", "llm_args": {"temperature": 0}},
                 "environment_info": {"domain_name": "airline", "policy": "...", "tool_defs": None}, "seed": 300},
        "tasks": [{"id": "0", "description": None, "user_scenario": {"persona": None, "instructions": "..."},
                   "ticket": None, "initial_state": None, "evaluation_criteria": None}],
        "simulations": [
            {"id": "sim-1", "task_id": "0", "timestamp": "t", "start_time": "t", "end_time": "t", "duration": 12.5,
             "termination_reason": "user_stop", "agent_cost": 0.01, "user_cost": 0.01,
             "reward_info": reward_info(1.0, ["DB", "ACTION"], True), "messages": ok, "trial": 0, "seed": 300},
            {"id": "sim-2", "task_id": "1", "timestamp": "t", "start_time": "t", "end_time": "t", "duration": 3.0,
             "termination_reason": "max_steps", "agent_cost": 0.0, "user_cost": 0.0,
             "reward_info": reward_info(reward_second, ["DB"], reward_second == 1.0), "messages": bad, "trial": 0, "seed": 300}]}


def test_tau2_simulations_become_trajectories(tmp_path):
    path = tmp_path / "airline_results.json"
    path.write_text(json.dumps(tau2_results()))
    ok, bad = tau2_trajectories(path)
    assert (ok.task_id, ok.category, ok.sample, ok.passed, ok.status) == ("tau2-airline-0", "tau2 airline", 0, True,
                                                                          "completed")
    assert [r.id for r in ok.grade.results] == ["tau2_success", "db_match", "action_0"]
    assert [(c.name, c.arguments, c.is_error) for c in ok.tool_calls] == [
        ("get_reservation_details", {"reservation_id": "ABC123"}, False),
        ("cancel_reservation", {"reservation_id": "ABC123"}, False)]
    assert "cancelled" in ok.tool_calls[1].result
    m = metrics(ok)
    assert m["lookup_before_act_share"] is None  # the user named ABC123
    assert m["verification_share"] == 0.0 and m["goal_statement_share"] == 0.5
    # the simulated user's own tool call is not the agent's; the agent's failed call is an error
    assert [c.name for c in bad.tool_calls] == ["get_line_details"] and bad.tool_calls[0].is_error
    assert not bad.passed and bad.status == "max_turns" and [r.id for r in bad.grade.results] == ["tau2_success",
                                                                                                 "db_match"]
    assert metrics(bad)["ended_after_error"] == 0.0  # cut by max_steps: not the agent ending on an error


def test_bfcl_results_graded_by_the_score_file(tmp_path):
    state = [{"role": "state_info", "class_name": "GorillaFileSystem", "content": {"root": "..."}}]
    log = [state,
           {"begin_of_turn_query": [{"role": "user", "content": "Move final_report.pdf into the temp folder."}],
            "step_0": [{"role": "assistant", "content": [{"ls": "{\"a\": true}"}]},
                       {"role": "handler_log", "content": "Successfully decoded model response.",
                        "model_response_decoded": ["ls(a=True)"]},
                       {"role": "tool", "content": "{\"current_directory_content\": [\"final_report.pdf\", \"temp\"]}"}],
            "step_1": [{"role": "assistant", "content": [{"mv": "{}"}, {"cd": "{}"}]},
                       {"role": "handler_log", "content": "Successfully decoded model response.",
                        "model_response_decoded": ["mv(source='final_report.pdf', destination='temp')",
                                                   "cd(folder='nowhere')"]},
                       {"role": "tool", "content": "{\"result\": \"moved\"}"},
                       {"role": "tool", "content": "{\"error\": \"cd: nowhere: No such directory\"}"}],
            "step_2": [{"role": "assistant", "content": "I moved the file."},
                       {"role": "handler_log", "content": "Error decoding the model response. Proceed to next turn.",
                        "error": "invalid syntax"}]},
           state]
    result = tmp_path / "BFCL_v4_multi_turn_base_result.json"
    result.write_text("\n".join(json.dumps(r) for r in [
        {"id": "multi_turn_base_0", "result": [[[{"ls": "{}"}], [{"mv": "{}"}], "I moved the file."]],
         "inference_log": log, "input_token_count": [[100, 120, 130]], "output_token_count": [[10, 20, 8]],
         "latency": [[0.5, 0.4, 0.3]]},
        {"id": "multi_turn_base_1", "result": [[]], "inference_log": [
            {"begin_of_turn_query": [{"role": "user", "content": "Hi"}],
             "step_0": [{"role": "assistant", "content": "Hello"},
                        {"role": "handler_log", "content": "Empty response from the model. Proceed to next turn.",
                         "model_response_decoded": []}]}]}]) + "\n")
    score = tmp_path / "BFCL_v4_multi_turn_base_score.json"
    score.write_text("\n".join(json.dumps(r) for r in [
        {"accuracy": 0.5, "correct_count": 1, "total_count": 2},
        {"id": "multi_turn_base_1", "model_name": "my-model", "test_category": "multi_turn_base", "valid": False,
         "error": {"error_message": "Model response list is empty for turn 0",
                   "error_type": "multi_turn:empty_turn_model_response"}}]) + "\n")
    first, second = bfcl_trajectories(result, score)
    assert (first.task_id, first.category, first.passed) == ("bfcl-multi_turn_base_0", "bfcl multi_turn_base", True)
    assert [(c.name, c.arguments, c.is_error) for c in first.tool_calls] == [
        ("ls", {"a": True}, False),
        ("mv", {"source": "final_report.pdf", "destination": "temp"}, False),
        ("cd", {"folder": "nowhere"}, True)]
    assert [c.turn for c in first.tool_calls] == [0, 1, 1]
    m = metrics(first)
    assert (m["calls_per_turn"], m["parallel_turn_share"], m["error_recovery_share"]) == (1.5, 0.5, 0.0)
    assert first.final_answer == "I moved the file."
    assert not second.passed and "empty_turn_model_response" in second.grade.results[0].note


def test_parse_call_reads_python_call_strings():
    assert parse_call("sort(file_name='a.txt')") == ("sort", {"file_name": "a.txt"})
    assert parse_call("Api.get(3, x=[1, 2])") == ("Api.get", {"arg0": 3, "x": [1, 2]})
    assert parse_call("not a call") is None and parse_call("f(x=open('y'))") is None


def test_import_cli_writes_a_run_that_view_and_analyze_read(tmp_path, capsys):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(tau2_results(reward_second=0.0)))
    b.write_text(json.dumps(tau2_results(reward_second=1.0)))
    assert main(["import", "tau2", str(a), "--out", str(tmp_path / "ra")]) == 0
    assert main(["import", "tau2", str(a), "--out", str(tmp_path / "ra"), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["written"] == 0  # re-import adds nothing
    assert main(["import", "tau2", str(b), "--out", str(tmp_path / "rb")]) == 0
    assert main(["analyze", str(tmp_path / "ra"), str(tmp_path / "rb"), "--out", str(tmp_path / "rep"),
                 "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1])["outcomes"]["fail→pass"] == 1
    assert main(["view", str(tmp_path / "ra"), "--task", "tau2-airline-0"]) == 0
    index = Path(capsys.readouterr().out.strip())
    pages = list((index.parent / "episodes").iterdir())
    assert index.name == "index.html" and len(pages) == 1 and "get_reservation_details" in pages[0].read_text()


def test_files_that_are_not_benchmark_results_are_one_line_errors(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    with pytest.raises(UsageError, match="not a τ²-bench results file"):
        tau2_trajectories(bad)
    assert main(["import", "bfcl", str(bad), "--out", str(tmp_path / "r")]) == 2
    assert "needs the score file" in capsys.readouterr().err


# -- untrusted files: one line for every malformed file, each id once ------------------------------

def _tau2(change):
    data = tau2_results()
    change(data)
    return json.dumps(data)


def _sim(data):
    return data["simulations"][0]


TAU2_MALFORMED = {
    "not UTF-8": b"\xff\xfe\x00{",
    "nesting deeper than Python recurses": "[" * 100_000 + "]" * 100_000,
    "an integer of 5000 digits": '{"simulations": [{"id": "a", "trial": ' + "9" * 5000 + "}]}",
    "a simulation that is a number": _tau2(lambda d: d.update(simulations=[1])),
    "messages that are a string": _tau2(lambda d: _sim(d).update(messages="hi")),
    "a message that is a number": _tau2(lambda d: _sim(d).update(messages=[3])),
    "tool_calls that are a string": _tau2(lambda d: _sim(d)["messages"][2].update(tool_calls="x")),
    "a tool call without a name": _tau2(lambda d: _sim(d)["messages"][2]["tool_calls"][0].pop("name")),
    "a tool name that is a list": _tau2(lambda d: _sim(d)["messages"][2]["tool_calls"][0].update(name=[1])),
    "a reward that is a word": _tau2(lambda d: _sim(d)["reward_info"].update(reward="high")),
    "reward_info that is a list": _tau2(lambda d: _sim(d).update(reward_info=[1])),
    "a reward basis that is a number": _tau2(lambda d: _sim(d)["reward_info"].update(reward_basis=5)),
    "a db check that is a string": _tau2(lambda d: _sim(d)["reward_info"].update(db_check="yes")),
    "action checks that are strings": _tau2(lambda d: _sim(d)["reward_info"].update(action_checks=["x"])),
    "a trial that is a word": _tau2(lambda d: _sim(d).update(trial="first")),
    "an infinite seed": _tau2(lambda d: _sim(d).update(seed=1e400)),
    "info that is a string": _tau2(lambda d: d.update(info="x")),
}


@pytest.mark.parametrize("name", TAU2_MALFORMED)
def test_a_malformed_tau2_file_is_one_line(tmp_path, capsys, name):
    body = TAU2_MALFORMED[name]
    path = tmp_path / "results.json"
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    assert main(["import", "tau2", str(path), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("longhorizon: error: ") and err.count("\n") == 1, err
    assert not (tmp_path / "run" / "trajectories.jsonl").exists()


def test_a_result_file_that_is_a_fifo_is_refused_not_read(tmp_path):
    fifo = tmp_path / "results.json"
    os.mkfifo(fifo)  # reading it would block until a writer came: the subprocess timeout guards that
    done = subprocess.run([sys.executable, "-m", "longhorizon.cli", "import", "tau2", str(fifo), "--out",
                           str(tmp_path / "run")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "is not a regular file" in done.stderr


def _bfcl_files(tmp_path, results, scores=None):
    log = [{"begin_of_turn_query": [{"role": "user", "content": "List the files."}],
            "step_0": [{"role": "assistant", "content": [{"ls": "{}"}]},
                       {"role": "handler_log", "model_response_decoded": ["ls(a=True)"]},
                       {"role": "tool", "content": "{\"current_directory_content\": []}"}]}]
    good = {"id": "multi_turn_base_0", "inference_log": log, "output_token_count": [[10]]}
    rows = results(json.loads(json.dumps(good))) if callable(results) else results
    result, score = tmp_path / "result.json", tmp_path / "score.json"
    result.write_text(rows if isinstance(rows, str) else "\n".join(json.dumps(r) for r in rows) + "\n")
    header = {"accuracy": 0.0, "correct_count": 0, "total_count": 1}
    failure = {"id": "multi_turn_base_0", "model_name": "m", "error": {"error_type": "t", "error_message": "m"}}
    score.write_bytes(scores if isinstance(scores, bytes) else scores.encode() if isinstance(scores, str) else
                      ("\n".join(json.dumps(r) for r in (scores or [header, failure])) + "\n").encode())
    return result, score


def _step(change):
    def rows(entry):
        change(entry)
        return [entry]
    return rows


BFCL_MALFORMED = {
    "a result line that is not JSON": ("{nope\n", None),
    "a result line that is a list": ([[1]], None),
    "an id that is an object": ([{"id": {"a": 1}, "inference_log": []}], None),
    "a step that is a number": (_step(lambda e: e["inference_log"][0].update(step_0=5)), None),
    "a step named step_x": (_step(lambda e: e["inference_log"][0].update(step_x=[])), None),
    "a step item that is a string": (_step(lambda e: e["inference_log"][0].update(step_0=["x"])), None),
    "output tokens that are a number": (_step(lambda e: e.update(output_token_count=7)), None),
    "a score header that is a list": (_step(lambda e: None), "[1]\n"),
    "a failure id that is a list": (_step(lambda e: None), [{"accuracy": 0.0}, {"id": [1]}]),
    "a failure error that is a string": (_step(lambda e: None), [{"accuracy": 0.0},
                                                                 {"id": "multi_turn_base_0", "error": "bad"}]),
    "a score file that is not UTF-8": (_step(lambda e: None), b"\xff\xfe{"),
}


@pytest.mark.parametrize("name", BFCL_MALFORMED)
def test_a_malformed_bfcl_file_is_one_line(tmp_path, capsys, name):
    result, score = _bfcl_files(tmp_path, *BFCL_MALFORMED[name])
    assert main(["import", "bfcl", str(result), "--score", str(score), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("longhorizon: error: ") and err.count("\n") == 1, err


def test_a_call_string_nested_too_deep_is_not_a_call():
    assert parse_call("f(x=" + "[" * 100_000 + "]" * 100_000 + ")") is None


def test_an_id_given_twice_is_written_once_and_counted(tmp_path, capsys):
    data = tau2_results()
    data["simulations"].append(json.loads(json.dumps(data["simulations"][0])))
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data))
    assert main(["import", "tau2", str(path), "--out", str(tmp_path / "run"), "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["episodes"], summary["written"], summary["duplicates"]) == (2, 2, 1)
    assert len((tmp_path / "run" / "trajectories.jsonl").read_text().splitlines()) == 2
    result, score = _bfcl_files(tmp_path, lambda e: [e, e])
    assert main(["import", "bfcl", str(result), "--score", str(score), "--out", str(tmp_path / "bfcl")]) == 0
    out = capsys.readouterr().out
    assert "1 written" in out and "1 duplicate id dropped" in out
    assert len((tmp_path / "bfcl" / "trajectories.jsonl").read_text().splitlines()) == 1
