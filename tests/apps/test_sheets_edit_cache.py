"""The sheets app's edit cache, shared parses and one-pass save change nothing an agent or a
grader sees.

Edits reuse the parse of an unchanged workbook and keep what they saved when every value in
it reads back exactly (``reloads_exactly``), so a workbook is loaded once per episode instead
of once per call; reads and graders share one parse of the same bytes across episodes
(``core.parse_cache.shared_parse``). These tests hold that to "the same as loading on every
call": every family's oracle played with the caches and without them gives the same tool
results, grades and final World; values that do not read back exactly (1.0, -0.0, 10**17, "")
are never kept; an edit in one episode never shows in another's reads; and ``workbook_bytes``
gives the bytes the former save-then-copy gave.
"""

from __future__ import annotations

import asyncio
import io
import json
import re

import pytest

from longhorizon.apps.common import OfficeFiles
from longhorizon.core import parse_cache
from longhorizon.apps.sheets.state import (
    all_reload_exactly,
    forget_save_state,
    load_workbook,
    reloads_exactly,
    workbook_bytes,
    workbook_bytes_two_pass,
)
from longhorizon.tasks.registry import families
from longhorizon.core.world import World, WorldCache
from longhorizon.env.episode import Limits, play
from longhorizon.policies.scripted import OraclePolicy

CLOCK = re.compile(r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d")


def _outcome(traj, world):
    results = [(c.name, CLOCK.sub("<time>", c.result), c.is_error) for c in traj.tool_calls]
    grade = [(r.id, r.passed, r.note.replace(str(world.root), "<world>")) for r in traj.grade.results]
    final = {path: (data if not path.endswith(".gz") else len(data), mode) for path, data, mode in world.image().files}
    return results, grade, final


def _play_all(tasks, enabled: bool, policies=(OraclePolicy,)) -> dict:
    OfficeFiles.ENABLED = parse_cache.SHARED = enabled
    cache, out = WorldCache(), {}

    async def run():
        for make in policies:
            for task in tasks:
                world, digest = cache.fork(task)
                limits = Limits() if make is OraclePolicy else Limits(max_turns=60)
                traj = await play(task, make(), world, world_hash=digest, limits=limits)
                out[task.id if make is OraclePolicy else (make.name, task.id)] = _outcome(traj, world)
                cache.release(world)

    try:
        asyncio.run(run())
    finally:
        OfficeFiles.ENABLED = parse_cache.SHARED = True
        cache.close()
    return out


def test_every_family_gets_the_same_results_grade_and_world_with_and_without_the_cache():
    tasks = [f.generate(s) for f in families() if "sheets" in f.generate(0).apps for s in (0, 1)]
    tasks += tasks[:4]  # the same tasks again: what the first plays parsed is shared now
    assert len(tasks) >= 20
    cached, fresh = _play_all(tasks, True), _play_all(tasks, False)
    for task in tasks[:-4]:
        assert cached[task.id][0] == fresh[task.id][0], f"{task.id}: tool results differ"
        assert cached[task.id][1] == fresh[task.id][1], f"{task.id}: grades differ"
        assert cached[task.id][2] == fresh[task.id][2], f"{task.id}: final Worlds differ"


def test_adversaries_get_the_same_results_grade_and_world_with_and_without_the_cache():
    """Random and junk arguments (floats like 1.0, empty strings, odd ranges) through every sheets family."""
    from longhorizon.policies.adversaries import ADVERSARIES

    tasks = [f.generate(0) for f in families() if "sheets" in f.generate(0).apps]
    policies = tuple(ADVERSARIES[n] for n in ("random_tools", "shotgun", "empty_artefact"))
    cached, fresh = _play_all(tasks, True, policies), _play_all(tasks, False, policies)
    assert cached.keys() == fresh.keys()
    for key in cached:
        assert cached[key] == fresh[key], key


TRICKY = [1.0, -0.0, 10**17, 0.1 + 0.2, "", 2.5, 7, -3, True, False, None, "x\ry", " a ", "=SUM(A1:A2)",
          "#N/A", "_x000D_", "1.0", "é😀", 123456789012345, 1e300, 1e-300, "\t", "= A1"]


@pytest.mark.parametrize("value", TRICKY, ids=repr)
def test_reloads_exactly_says_what_a_saved_value_reads_back_as(value):
    from openpyxl import Workbook

    wb = Workbook()
    wb.active["B2"] = value
    back = load_workbook(io.BytesIO(workbook_bytes(wb))).active["B2"].value
    same = type(back) is type(wb.active["B2"].value) and repr(back) == repr(wb.active["B2"].value)
    assert reloads_exactly(wb.active["B2"].value) == same


def _world(tmp_path):
    return World.build(tmp_path / "w", lambda root: None)


def _session(world):
    from longhorizon.apps import build_app

    return build_app("sheets", world).session()


def _call(s, name, **args):
    res = asyncio.run(s.call_tool(name, args))
    return res.content[0].text, res.is_error


def _check_every_step_reads_as_a_fresh_load(tmp_path, steps):
    """Each step through one session; after each, its reads equal a new session's (which
    loads the file from disk)."""
    world = _world(tmp_path)
    s = _session(world)
    _call(s, "create_workbook", path="b.xlsx", sheets=["S"])
    for name, args in steps:
        _call(s, name, path="b.xlsx", **args)
        for read, kw in (("list_sheets", {}), ("read_range", {"sheet": "S"})):
            assert _call(s, read, path="b.xlsx", **kw) == _call(_session(world), read, path="b.xlsx", **kw), (name, args)


def test_edits_after_values_that_do_not_reload_exactly_read_what_is_on_disk(tmp_path):
    OfficeFiles.ENABLED = True
    _check_every_step_reads_as_a_fresh_load(tmp_path, [
        ("write_cells", {"sheet": "S", "cells": {"A1": 1.0, "B1": ""}}),
        ("write_rows", {"sheet": "S", "start_cell": "A2", "rows": [[-0.0, 10**17, 0.1 + 0.2], ["", "x", 2.5]]}),
        ("write_cells", {"sheet": "S", "cells": {"C3": "=A2+B2"}}),
        ("clear_range", {"sheet": "S", "range": "B1:B2"}),
        ("write_cells", {"sheet": "S", "cells": {"D4": 7}}),
    ])


def test_a_value_that_does_not_reload_exactly_is_read_back_as_the_file_holds_it(tmp_path):
    world = _world(tmp_path)
    s = _session(world)
    _call(s, "create_workbook", path="b.xlsx", sheets=["S"])
    _call(s, "write_cells", path="b.xlsx", sheet="S", cells={"A1": 3})
    text, err = _call(s, "read_range", path="b.xlsx", sheet="S", range="A1")
    assert not err and json.loads(text)["rows"][0]["values"] == [3]
    _call(s, "write_cells", path="b.xlsx", sheet="S", cells={"A1": 1.0})
    text, err = _call(s, "read_range", path="b.xlsx", sheet="S", range="A1")
    assert not err and json.loads(text)["rows"][0]["values"] == [1]
    assert type(load_workbook(world.workspace / "b.xlsx")["S"]["A1"].value) is int


def test_a_failed_edit_leaves_the_file_and_the_next_read_as_they_were(tmp_path):
    world = _world(tmp_path)
    s = _session(world)
    _call(s, "create_workbook", path="b.xlsx", sheets=["S"])
    _call(s, "write_cells", path="b.xlsx", sheet="S", cells={"A1": 3})
    before = (world.workspace / "b.xlsx").read_bytes()
    text, err = _call(s, "write_cells", path="b.xlsx", sheet="S", cells={"A1": 5, "B1": "=", "C1": 9})
    assert err and "'=' alone" in text
    assert (world.workspace / "b.xlsx").read_bytes() == before
    text, _ = _call(s, "read_range", path="b.xlsx", sheet="S")
    assert json.loads(text)["rows"] == [{"row": 1, "values": [3]}]


def test_a_file_changed_behind_the_app_is_loaded_again(tmp_path):
    from openpyxl import Workbook

    world = _world(tmp_path)
    s = _session(world)
    _call(s, "create_workbook", path="b.xlsx", sheets=["S"])
    _call(s, "write_cells", path="b.xlsx", sheet="S", cells={"A1": 3})
    other = Workbook()
    other.active.title = "S"
    other.active["A1"] = "replaced"
    (world.workspace / "b.xlsx").write_bytes(workbook_bytes(other))
    _call(s, "write_cells", path="b.xlsx", sheet="S", cells={"B1": 4})
    text, _ = _call(s, "read_range", path="b.xlsx", sheet="S")
    assert json.loads(text)["rows"] == [{"row": 1, "values": ["replaced", 4]}]


def test_every_suite_workbook_saves_to_the_same_bytes_in_one_pass_and_is_a_fixed_point(tmp_path):
    n = 0
    for fam in families():
        task = fam.generate(0)
        world = World.build(tmp_path / task.id, task.build)
        for p in sorted(world.workspace.rglob("*.xlsx")):
            try:
                a, b = load_workbook(p), load_workbook(p)
            except Exception:  # some families plant files that only look like workbooks
                continue
            n += 1
            once = workbook_bytes(a)
            assert once == workbook_bytes_two_pass(b), f"{task.id} {p.name}"
            forget_save_state(a)  # as the app does before keeping a saved workbook
            assert workbook_bytes(a) == once, f"{task.id} {p.name}: saving changed the workbook"
            again = load_workbook(io.BytesIO(once))
            if all_reload_exactly(a):  # what the app would keep: a reload saves to the same bytes
                assert workbook_bytes(again) == once, f"{task.id} {p.name}"
    assert n >= 40


@pytest.mark.parametrize("names", [["Sheet1"], ["A", "B b", "C"]])
def test_a_new_workbook_kept_after_create_saves_as_a_reload_of_its_file_does(names):
    from openpyxl import Workbook

    wb = Workbook()
    wb.active.title = names[0]
    for name in names[1:]:
        wb.create_sheet(name)
    first = workbook_bytes(wb)
    reloaded = load_workbook(io.BytesIO(first))
    for book in (wb, reloaded):
        forget_save_state(book)
        for i, row in enumerate([["h", "x"], [1, 2.5], ["=A2*2", True], [None, "#N/A"]]):
            for j, v in enumerate(row):
                book[names[-1]].cell(row=i + 1, column=j + 1).value = v
    assert workbook_bytes(wb) == workbook_bytes(reloaded)


def test_an_edit_in_one_episode_never_shows_in_another_episodes_reads(tmp_path):
    from openpyxl import Workbook

    wb = Workbook()
    wb.active.title = "S"
    wb.active["A1"] = 3
    data = workbook_bytes(wb)
    worlds = []
    for name in ("one", "two"):
        world = World.build(tmp_path / name, lambda root: None)
        (world.workspace / "b.xlsx").write_bytes(data)  # the same bytes, as forks of one snapshot
        worlds.append(world)
    one, two = _session(worlds[0]), _session(worlds[1])
    assert _call(one, "read_range", path="b.xlsx", sheet="S") == _call(two, "read_range", path="b.xlsx", sheet="S")
    _call(one, "write_cells", path="b.xlsx", sheet="S", cells={"A1": 4, "B1": "x"})
    text, _ = _call(two, "read_range", path="b.xlsx", sheet="S")
    assert json.loads(text)["rows"] == [{"row": 1, "values": [3]}]
    text, _ = _call(one, "read_range", path="b.xlsx", sheet="S")
    assert json.loads(text)["rows"] == [{"row": 1, "values": [4, "x"]}]
    assert parse_cache.shared_parse(".xlsx", data, load_workbook)["S"]["A1"].value == 3
