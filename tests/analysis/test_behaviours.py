"""Each behaviour metric detects its behaviour on a trajectory built to have it, and reads
differently on one built not to (expected values counted by hand)."""

from analysis_synth import call, traj

from longhorizon.analysis.behaviours import METRICS, metrics
from longhorizon.core.grade import CriterionResult, Grade

READ_A = call("files__read_file", {"path": "a.txt"}, "alpha")
READ_B = call("files__read_file", {"path": "b.txt"}, "beta")
WRITE_A = call("files__write_file", {"path": "a.txt", "content": "x"})
WRITE_B = call("files__write_file", {"path": "b.txt", "content": "y"})


def test_goal_statement_share_counts_turns_that_say_what_comes_next():
    said = traj([("Read the policy file first.", [READ_A]), ("", [READ_B]), ("Done.", [])])
    silent = traj([("", [READ_A]), ("ok", [READ_B]), ("Done.", [])])
    assert metrics(said)["goal_statement_share"] == 0.5  # 1 of the 2 turns with calls
    assert metrics(silent)["goal_statement_share"] == 0.0  # "ok" is under three words


def test_lookup_before_act_needs_the_entity_seen_first():
    looked = traj([("", [call("tickets__get_ticket", {"ticket_id": "T-1"}, "{...}")]),
                   ("", [call("tickets__update_ticket", {"ticket_id": "T-1", "status": "done"})]), ("Done.", [])])
    found_in_result = traj([("", [call("tickets__search_tickets", {"query": "late"}, "T-7: late delivery")]),
                            ("", [call("tickets__update_ticket", {"ticket_id": "T-7"})]), ("Done.", [])])
    blind = traj([("", [call("tickets__update_ticket", {"ticket_id": "T-9"})]), ("Done.", [])])
    given = traj([("", [call("tickets__update_ticket", {"ticket_id": "T-9"})]), ("Done.", [])],
                 instruction="Close ticket T-9.")
    assert metrics(looked)["lookup_before_act_share"] == 1.0
    assert metrics(found_in_result)["lookup_before_act_share"] == 1.0
    assert metrics(blind)["lookup_before_act_share"] == 0.0
    assert metrics(given)["lookup_before_act_share"] is None  # the instruction names it: nothing to look up


def test_repeated_reads_are_exact_repeats_with_nothing_written_between():
    repeats = traj([("", [READ_A]), ("", [READ_A]), ("", [READ_B]), ("Done.", [])])
    reread_after_write = traj([("", [READ_A]), ("", [WRITE_A]), ("", [READ_A]), ("", [READ_B]), ("Done.", [])])
    m = metrics(repeats)
    assert m["distinct_reads"] == 2
    assert m["repeated_read_share"] == 1 / 3
    assert metrics(reread_after_write)["repeated_read_share"] == 0.0


def test_read_before_write_share_is_over_entities_written():
    m = metrics(traj([("", [READ_A]), ("", [WRITE_A]), ("", [WRITE_B]), ("Done.", [])]))
    assert m["read_before_write_share"] == 0.5  # a.txt read first, b.txt not


def test_verification_needs_a_read_after_the_last_write():
    verified = traj([("", [WRITE_A]), ("", [READ_A]), ("Done.", [])])
    overwritten = traj([("", [WRITE_A]), ("", [READ_A]), ("", [WRITE_A]), ("Done.", [])])
    unchecked = traj([("", [WRITE_A]), ("", [WRITE_B]), ("", [READ_B]), ("Done.", [])])
    read_only = traj([("", [READ_A]), ("Done.", [])])
    assert metrics(verified)["verification_share"] == 1.0
    assert metrics(overwritten)["verification_share"] == 0.0
    assert metrics(unchecked)["verification_share"] == 0.5
    assert metrics(read_only)["verification_share"] is None


def test_error_recovery_and_ending_after_an_error():
    failed = call("files__write_file", {"path": "a.txt"}, "error: content is required", error=True)
    recovered = traj([("", [failed]), ("", [WRITE_A]), ("Done.", [])])
    gave_up = traj([("", [READ_A]), ("", [failed]), ("I could not do it.", [])])
    only_reads_after = traj([("", [failed]), ("", [READ_B]), ("Done.", [])])
    assert metrics(recovered)["error_recovery_share"] == 1.0
    assert metrics(recovered)["ended_after_error"] == 0.0
    assert metrics(gave_up)["error_recovery_share"] == 0.0
    assert metrics(gave_up)["ended_after_error"] == 1.0
    assert metrics(only_reads_after)["error_recovery_share"] == 0.0  # reading something else is drifting
    assert metrics(traj([("", [READ_A]), ("Done.", [])]))["error_recovery_share"] is None


def test_parallel_calls_per_turn():
    m = metrics(traj([("", [READ_A, READ_B]), ("", [WRITE_A]), ("Done.", [])]))
    assert m["calls_per_turn"] == 1.5
    assert m["parallel_turn_share"] == 0.5
    assert metrics(traj([("", [READ_A]), ("", [READ_B]), ("Done.", [])]))["parallel_turn_share"] == 0.0


def test_closure_reads_the_final_state_criteria():
    m = metrics(traj([("", [WRITE_A]), ("Done.", [])], final=[True, True, False]))
    assert m["final_state_share"] == 2 / 3
    assert m["closure"] == 0.0
    assert metrics(traj([("", [WRITE_A]), ("Done.", [])], final=[True, True]))["closure"] == 1.0


def test_effort_counts_calls_turns_errors_and_tokens():
    t = traj([("", [READ_A, call("x__get", {}, "no", error=True)]), ("Done.", [])], token_ids=[[1, 2, 3], [4]])
    m = metrics(t)
    assert (m["tool_calls"], m["turns"], m["tool_errors"], m["tokens"]) == (2, 2, 1, 4)
    assert metrics(traj([("Done.", [])]))["tokens"] is None  # no token data recorded


def test_every_listed_metric_is_computed():
    assert set(metrics(traj([("Done.", [])]))) == set(METRICS)


def test_closure_leaves_guards_out():
    t = traj([("Done.", [])], final=[False])  # did nothing: the artefact is missing
    t.grade = Grade(t.grade.results + (CriterionResult("others_untouched", "final_state", 1.0, True, guard=True),))
    assert metrics(t)["final_state_share"] == 0.0  # not 1/2: "nothing else touched" is met by doing nothing


def test_verifies_is_any_read_back():
    assert metrics(traj([("", [WRITE_A]), ("", [WRITE_B]), ("", [READ_B]), ("Done.", [])]))["verifies"] == 1.0
    assert metrics(traj([("", [WRITE_A]), ("Done.", [])]))["verifies"] == 0.0
    assert metrics(traj([("", [READ_A]), ("Done.", [])]))["verifies"] is None


def test_an_id_counts_as_seen_only_as_a_whole_token():
    t = traj([("", [call("tickets__search_tickets", {"query": "x"}, "T-70 opened 2027")]),
              ("", [call("tickets__update_ticket", {"ticket_id": "T-7"})]), ("Done.", [])],
             instruction="Update the ticket by 2027.")
    assert metrics(t)["lookup_before_act_share"] == 0.0  # T-7 is neither T-70 nor in "2027"
