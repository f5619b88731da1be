"""Families for data conversion, shell scripting, survey aggregation and the second file, log and
mail families: graders accept other correct ways of doing the work, and the scripting grader
runs the agent's own script only inside the sandbox."""

import dataclasses
import re

import pytest

from longhorizon.core.task import ToolCall
from longhorizon.core.world import World
from longhorizon.env.episode import play, play_task
from longhorizon.policies.scripted import OraclePolicy, rewritten_oracle
from longhorizon.tasks.registry import get_family
from longhorizon.tasks.scripting import report_rotation

CATEGORIES = {
    "legacy_catalog_conversion": "data conversion",
    "timesheet_json_export": "data conversion",
    "report_rotation_script": "shell scripting",
    "pulse_survey_results": "survey aggregation",
    "shared_drive_retention": "file organisation",
    "access_log_incident_timeline": "log analysis",
    "shared_inbox_routing": "mail triage",
}


@pytest.mark.parametrize("name", sorted(CATEGORIES))
def test_family_is_registered_in_its_category(name):
    fam = get_family(name)
    assert fam.category == CATEGORIES[name]
    if fam.holdout_family:  # kept out of training entirely
        assert {fam.generate(0).split, fam.generate(100_000).split} == {"holdout-family"}
    else:
        assert fam.generate(0).split == "train" and fam.generate(100_000).split == "holdout"


# -- shell scripting --------------------------------------------------------------------------

PURE_BASH = r"""#!/usr/bin/env bash
# the same job without python: GNU date does the calendar
dir=${1%/}; today=$2
today_s=$(date -u -d "$today" +%s) || exit 2
get() { grep -v '^[[:space:]]*#' "$dir/retention.conf" | tr -d ' \t' | sed -n "s/^$1=//p" | tail -n 1; }
n=$(get archive_after_days); m=$(get delete_after_days)
age() {
  [[ $1 =~ ^.+-([0-9]{4}-[0-9]{2}-[0-9]{2})\.(csv|txt|log)$ ]] || return 1
  local d=${BASH_REMATCH[1]}
  [ "$(date -u -d "$d" +%F 2>/dev/null)" = "$d" ] || return 1
  echo $(( (today_s - $(date -u -d "$d" +%s)) / 86400 ))
}
old() { [ "$m" != never ] && [ "$1" -gt "$m" ]; }
for f in "$dir"/*; do
  [ -f "$f" ] || continue
  b=${f##*/}; a=$(age "$b") || continue
  if old "$a"; then rm -- "$f"; echo "$today deleted $b" >> "$dir/rotation.log"
  elif [ "$a" -gt "$n" ]; then
    mon=$(sed -E 's/.*-([0-9]{4}-[0-9]{2})-[0-9]{2}\.[a-z]+$/\1/' <<< "$b")
    mkdir -p "$dir/archive/$mon" && gzip -c -- "$f" > "$dir/archive/$mon/$b.gz" && rm -- "$f"
    echo "$today archived $b" >> "$dir/rotation.log"
  fi
done
for g in "$dir"/archive/*/*.gz; do
  [ -f "$g" ] || continue
  b=$(basename "$g" .gz); a=$(age "$b") || continue
  if old "$a"; then rm -- "$g"; echo "$today deleted $b" >> "$dir/rotation.log"; fi
done
[ -d "$dir/archive" ] && find "$dir/archive" -mindepth 1 -type d -empty -delete
exit 0
"""


async def test_rotation_grader_accepts_another_correct_script():
    task = get_family("report_rotation_script").generate(2)

    def swap(call):
        if call.name == "files__write_file" and call.arguments.get("path") == report_rotation.SCRIPT:
            return ToolCall(call.name, {**call.arguments, "content": PURE_BASH}, call.note)
        return call

    traj = await play_task(rewritten_oracle(task, swap), OraclePolicy())
    assert traj.passed, [r for r in traj.grade.results if not r.passed]


async def test_rotation_grader_refuses_to_run_scripts_without_the_sandbox(tmp_path, monkeypatch):
    task = get_family("report_rotation_script").generate(1)
    world = World.build(tmp_path / "w", task.build)
    traj = await play(task, OraclePolicy(), world)
    assert traj.passed
    fresh = world.fork(tmp_path / "copy")  # another world: nothing cached from the first grading
    monkeypatch.setattr("longhorizon.apps.shell.sandbox.find_bwrap", lambda: None)
    grade = {r.id: r for r in task.grade(fresh, traj).results}
    assert not grade["script_generalises"].passed and not grade["script_idempotent"].passed
    assert "sandbox" in grade["script_generalises"].note


# -- tolerant graders -------------------------------------------------------------------------

async def test_survey_grader_accepts_other_header_words_and_team_spellings():
    task = get_family("pulse_survey_results").generate(1)

    def reword(call):
        if call.name == "sheets__write_rows" and call.arguments.get("sheet") == "Scores":
            rows = [list(r) for r in call.arguments["rows"]]
            rows[0] = ["Team", "Question", "Count", "Mean"]
            for r in rows[1:]:
                r[0] = str(r[0]).upper()
            return ToolCall(call.name, {**call.arguments, "rows": rows}, call.note)
        return call

    traj = await play_task(rewritten_oracle(task, reword), OraclePolicy())
    assert traj.passed, [r for r in traj.grade.results if not r.passed]


def test_pulse_survey_draws_its_trap_mix_per_seed():
    """The re-exported team, the labelled answers, the keyword look-alikes and the off-scale
    answers are each there or not: instances differ in what must be noticed."""
    from longhorizon.tasks.diversity import trap_set

    fam = get_family("pulse_survey_results")
    tasks = [fam.generate(seed) for seed in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("redo_team", "labelled_team", "lookalike_comments", "off_scale"):
        assert {bool(t.data[key]) for t in tasks} == {True, False}, key
    for t in tasks:  # a criterion for the re-export only where a team re-exported
        ids = {c.id for c in t.criteria}
        assert ("latest_export_used" in ids) == bool(t.data["redo_team"]) == bool(t.data["stale_file"])
        assert {"response_counts", "averages", "themes"} <= ids


async def test_pulse_survey_without_a_reexport_has_one_file_per_team(tmp_path):
    fam = get_family("pulse_survey_results")
    tasks = [fam.generate(seed) for seed in range(20)]
    plain = next(t for t in tasks if not t.data["redo_team"])
    w = World.build(tmp_path / "w", plain.build)
    folder = plain.data["results"].rsplit("/", 1)[0]
    assert sorted(p.name for p in w.file(folder).glob("*.xlsx")) == sorted(
        f.rsplit("/", 1)[1] for f in plain.data["team_files"].values())
    traj = await play_task(plain, OraclePolicy())
    assert traj.passed, [(r.id, r.note) for r in traj.grade.results if not r.passed]
    redo = next(t for t in tasks if t.data["redo_team"])
    traj = await play_task(redo, OraclePolicy(perturb="latest_export_used"))
    failed = {r.id for r in traj.grade.results if not r.passed}
    assert "latest_export_used" in failed


def test_training_feedback_draws_its_trap_mix_per_seed():
    """The re-export, the cancelled session, no-shows', trainers' and forwarded answers and second
    submissions are each there or not (one kind of non-attendee always)."""
    from longhorizon.tasks.diversity import trap_set

    fam = get_family("training_feedback_rollup")
    tasks = [fam.generate(seed) for seed in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("stale_file", "cancelled", "no_show_answers", "trainer_tests", "forwarded_answers", "resubmitted"):
        assert {bool(t.data[key]) for t in tasks} == {True, False}, key
    for t in tasks:
        ids = {c.id for c in t.criteria}
        assert ("latest_export_used" in ids) == bool(t.data["stale_file"])
        assert t.data["no_show_answers"] or t.data["trainer_tests"] or t.data["forwarded_answers"]
        assert {"responses", "avg_rating", "nps"} <= ids


async def test_training_feedback_without_a_cancelled_session_or_reexport(tmp_path):
    fam = get_family("training_feedback_rollup")
    tasks = [fam.generate(seed) for seed in range(20)]
    plain = next(t for t in tasks if not t.data["cancelled"] and not t.data["stale_file"])
    w = World.build(tmp_path / "w", plain.build)
    exports = sorted(p.name for p in w.file(plain.data["folder"] + "/feedback").iterdir())
    assert exports == sorted(s["file"].rsplit("/", 1)[1] for s in plain.data["sessions"])
    traj = await play_task(plain, OraclePolicy())
    assert traj.passed, [(r.id, r.note) for r in traj.grade.results if not r.passed]
    redo = next(t for t in tasks if t.data["stale_file"])
    traj = await play_task(redo, OraclePolicy(perturb="latest_export_used"))
    assert "latest_export_used" in {r.id for r in traj.grade.results if not r.passed}


async def test_incident_grader_accepts_markdown_summary_and_full_timestamps():
    task = get_family("access_log_incident_timeline").generate(0)
    day = task.data["date"]

    def restyle(call):
        path = str(call.arguments.get("path", ""))
        if call.name == "files__write_file" and path.endswith("summary.md"):
            lines = []
            for line in call.arguments["content"].splitlines():
                m = re.match(r"^(\w+): (.+)$", line)
                if m:
                    key, value = m.groups()
                    value = value.replace("%", " %") if key == "peak_error_rate" else value
                    label = "Trigger deploy" if key == "trigger" else key.replace("_", " ").capitalize()
                    lines.append(f"- **{label}**: {value}"
                                 + (" UTC" if key in ("start", "end", "peak") else ""))
                else:
                    lines.append(line)
            return ToolCall(call.name, {**call.arguments, "content": "\n".join(lines) + "\n"}, call.note)
        if call.name == "files__write_file" and path.endswith("timeline.csv"):
            text = re.sub(r"^(\d\d:\d\d),", rf"{day} \1,", call.arguments["content"], flags=re.M)
            return ToolCall(call.name, {**call.arguments, "content": text}, call.note)
        return call

    traj = await play_task(rewritten_oracle(task, restyle), OraclePolicy())
    assert traj.passed, [r for r in traj.grade.results if not r.passed]


async def test_routing_grader_reads_counts_in_a_sentence_and_allows_copying_the_lead():
    task = get_family("shared_inbox_routing").generate(0)
    counts, rest = task.data["counts"], task.data["new_in_inbox"]

    def prose(call):
        if call.name == "mail__forward":
            return ToolCall(call.name, {**call.arguments, "to": call.arguments["to"] + [task.data["lead"]]}, call.note)
        if call.name == "mail__send_message" and "routing" in call.arguments.get("subject", "").lower():
            body = (f"All done. {counts['Support/Priority']} went to Priority and were forwarded, "
                    f"{counts['Support/Billing']} to Billing, {counts['Support/Technical']} to Technical and "
                    f"{counts['Support/Auto-replies']} to Auto-replies; {rest} new ones stayed in the Inbox.")
            return ToolCall(call.name, {**call.arguments, "body": body}, call.note)
        return call

    traj = await play_task(rewritten_oracle(task, prose), OraclePolicy())
    assert traj.passed, [r for r in traj.grade.results if not r.passed]


async def test_routing_draws_its_traps_per_seed():
    """Over seeds 0..19 the traps differ; the look-alike's criterion only where it is in the inbox,
    and the oracle routes it by its words."""
    from longhorizon.tasks.diversity import trap_set

    fam = get_family("shared_inbox_routing")
    tasks = [fam.generate(s) for s in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("key_invoice", "key_error", "lookalike_msgs", "body_billing", "debug"):
        assert 0 < sum(bool(t.data[key]) for t in tasks) < 20, key
    with_look = next(t for t in tasks if t.data["lookalike"])
    without = next(t for t in tasks if not t.data["lookalike"])
    assert not without.data["lookalike_msgs"]
    assert "lookalike_not_priority" not in {c.id for c in without.criteria}
    assert "lookalike_not_priority" in {c.id for c in with_look.criteria}
    traj = await play_task(with_look, OraclePolicy())
    assert traj.passed and traj.reward == 1.0
    look = with_look.data["lookalike_msgs"][0]
    assert with_look.data["expected"][str(look)] == "Support/Billing"
    traj = await play_task(with_look, OraclePolicy(perturb="lookalike_not_priority"))
    assert {r.id: r.passed for r in traj.grade.results}["lookalike_not_priority"] is False


async def test_conversion_grader_accepts_lower_case_sources_and_padded_names():
    task = get_family("legacy_catalog_conversion").generate(0)

    def sloppy(call):
        if call.name == "sheets__write_rows":
            rows = [list(r) for r in call.arguments["rows"]]
            for r in rows:
                if r and r[0] != "SKU":
                    r[1] = f" {r[1]} "
                    r[6] = str(r[6]).title()
            return ToolCall(call.name, {**call.arguments, "rows": rows}, call.note)
        return call

    traj = await play_task(rewritten_oracle(task, sloppy), OraclePolicy())
    assert traj.passed, [r for r in traj.grade.results if not r.passed]


async def test_timesheet_check_counts_an_export_the_shell_wrote():
    """The instruction leaves the tool open: an export written by a shell command, then checked,
    is checked work."""
    task = get_family("timesheet_json_export").generate(0)
    export = task.data["export"]

    def by_shell(call):
        if call.name == "files__write_file" and call.arguments["path"] == export:
            return ToolCall("shell__run", {"command": f"cat > {export} <<'JSON'\n{call.arguments['content']}JSON"},
                            call.note)
        return call

    traj = await play_task(rewritten_oracle(task, by_shell), OraclePolicy())
    assert not any(c.is_error for c in traj.tool_calls)
    assert traj.passed, [r for r in traj.grade.results if not r.passed]


async def test_retention_oracle_is_long_and_reads_before_deleting():
    task = get_family("shared_drive_retention").generate(0)
    traj = await play_task(task, OraclePolicy())
    assert traj.passed and len(traj.tool_calls) >= 40
    read = {c.arguments["path"] for c in traj.tool_calls if c.name == "files__read_file"}
    deleted = [c.arguments["path"] for c in traj.tool_calls if c.name == "files__delete"]
    assert deleted and all(p in read for p in deleted)


async def test_retention_draws_its_traps_per_seed(tmp_path):
    """The drive's traps vary over seeds (at least 3 trap sets); a drive without the look-alike
    draft has no file named like an old invoice, one with it keeps that file, and the oracle
    earns 1.0 on both."""
    from longhorizon.tasks.diversity import trap_set
    from longhorizon.tasks.files.drive_retention import TRAPS
    tasks = [get_family("shared_drive_retention").generate(s) for s in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for trap in TRAPS:
        assert {bool(t.data[trap]) for t in tasks} == {True, False}, trap
    with_decoy = next(t for t in tasks if t.data["decoy_name"] and not t.data["at_limit"])
    without = next(t for t in tasks if not t.data["decoy_name"] and t.data["at_limit"])
    assert "exactly at them" in next(c for c in without.criteria if c.id == "others_untouched").description
    assert "exactly at them" not in next(c for c in with_decoy.criteria if c.id == "others_untouched").description
    for t in (with_decoy, without):
        world = World.build(tmp_path / str(t.seed), t.build)
        named_like_invoice = sorted(p.relative_to(world.workspace).as_posix()
                                    for p in world.workspace.rglob("invoice_*_scan.txt"))
        assert named_like_invoice == t.data["decoy_name"]
        assert not set(t.data["decoy_name"]) & set(t.data["delete"])
        traj = await play_task(t, OraclePolicy())
        assert traj.grade.reward == 1.0, [r for r in traj.grade.results if not r.passed]


async def test_rotation_pays_nothing_for_a_script_that_deletes_everything():
    """rm -rf removes every expired report and is idempotent, but it keeps nothing it should."""
    task = get_family("report_rotation_script").generate(1)
    day = task.data["today"]

    def wipe():
        yield ToolCall("files__write_file", {"path": report_rotation.SCRIPT, "content": '#!/bin/bash\nrm -rf "$1"/*\n'})
        for team in task.data["teams"]:
            yield ToolCall("shell__run", {"command": f"bash {report_rotation.SCRIPT} shared/{team}/reports {day}"})
        return "done"

    traj = await play_task(dataclasses.replace(task, oracle=wipe), OraclePolicy())
    met = {r.id for r in traj.grade.results if r.passed}
    assert traj.grade.reward == 0.0 and not met & {"teams_expired_deleted", "script_idempotent"}, met


@pytest.mark.parametrize("family,folder", [("shared_drive_retention", "shared"), ("downloads_cleanup", "Downloads")])
async def test_deleting_the_whole_folder_pays_nothing(family, folder):
    """Every expired document (every exact copy) is gone, but so is everything that had to stay."""
    task = get_family(family).generate(1)

    def wipe():
        yield ToolCall("files__delete", {"path": folder, "recursive": True})
        return "done"

    traj = await play_task(dataclasses.replace(task, oracle=wipe), OraclePolicy())
    assert [c for c in traj.tool_calls if c.is_error] == []
    assert traj.grade.reward == 0.0, [r.id for r in traj.grade.results if r.passed]


def test_a_scratch_folder_left_by_a_killed_grading_is_swept_by_the_next_one(tmp_path):
    """kill -9 while a grader runs the agent's script leaves its scratch folder; the next
    process that grades removes it on its first scratch folder (the dead owner is recorded)."""
    import os
    import signal
    import subprocess
    import sys

    env = {**os.environ, "LONGHORIZON_WORLDS_DIR": str(tmp_path)}
    killed = subprocess.run([sys.executable, "-c", "import os, signal\n"
                             "from longhorizon.tasks.scripting import scratch_dir\n"
                             "print(scratch_dir(), flush=True)\n"
                             "os.kill(os.getpid(), signal.SIGKILL)\n"], env=env, capture_output=True, text=True,
                            timeout=120)
    assert killed.returncode == -signal.SIGKILL
    left = tmp_path / os.path.basename(killed.stdout.strip())
    assert left.is_dir() and left.name.startswith("longhorizon-grader-")
    nxt = subprocess.run([sys.executable, "-c", "from longhorizon.tasks.scripting import scratch_dir, force_rmtree\n"
                          "force_rmtree(scratch_dir())\n"], env=env, capture_output=True, text=True, timeout=120)
    assert nxt.returncode == 0, nxt.stderr
    assert not left.exists()
