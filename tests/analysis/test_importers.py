"""Importers read τ²-bench and BFCL multi-turn result files (small samples written here in
those tools' own formats: tau2's Results JSON, BFCL's result and score JSONL) into
Trajectories that the behaviour metrics, `analyze` and `view` then use unchanged."""

import json

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
    shown = capsys.readouterr().out.strip()
    assert shown.endswith(".html") and "get_reservation_details" in open(shown).read()


def test_files_that_are_not_benchmark_results_are_one_line_errors(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text('{"hello": 1}')
    with pytest.raises(UsageError, match="not a τ²-bench results file"):
        tau2_trajectories(bad)
    assert main(["import", "bfcl", str(bad), "--out", str(tmp_path / "r")]) == 2
    assert "needs the score file" in capsys.readouterr().err
