"""The sheets app, driven through a real in-process MCP client session."""

import json

import mcp
import pytest
from openpyxl import Workbook

from longhorizon.apps.sheets.server import build_server
from longhorizon.apps.sheets.state import (
    cell_value,
    evaluate,
    load_workbook,
    save_workbook,
    workbook_bytes,
)


def session(world):
    """A real MCP client session on a fresh sheets server for ``world``."""
    return mcp.Client(build_server(world))


async def call(client, tool, **args):
    r = await client.call_tool(tool, args)
    return r.content[0].text, r.is_error


async def ok(client, tool, **args):
    text, err = await call(client, tool, **args)
    assert not err, text
    return text


async def test_create_write_read_round_trip(world):
    async with session(world) as sheets:
        await ok(sheets, "create_workbook", path="r/book.xlsx", sheets=["Data", "Sum"])
        assert world.file("r/book.xlsx").is_file()
        await ok(sheets, "write_rows", path="r/book.xlsx", sheet="Data", start_cell="A1",
                 rows=[["Item", "Cost"], ["pens", 2.5], ["paper", 4], ["ok", True]])
        out = json.loads(await ok(sheets, "read_range", path="r/book.xlsx", sheet="Data"))
        assert out["range"] == "A1:B4"
        assert out["columns"] == ["A", "B"]
        assert [r["values"] for r in out["rows"]] == [["Item", "Cost"], ["pens", 2.5], ["paper", 4], ["ok", True]]
        part = json.loads(await ok(sheets, "read_range", path="r/book.xlsx", sheet="Data", range="B2:B3"))
        assert [(r["row"], r["values"]) for r in part["rows"]] == [(2, [2.5]), (3, [4])]


async def test_formulas_show_text_and_computed_value(world):
    async with session(world) as sheets:
        await ok(sheets, "create_workbook", path="f.xlsx", sheets=["Data", "Other Sheet"])
        await ok(sheets, "write_cells", path="f.xlsx", sheet="Other Sheet", cells={"B3": 10})
        msg = await ok(sheets, "write_cells", path="f.xlsx", sheet="Data", cells={
            "A1": 4, "A2": 6, "A3": "=SUM(A1:A2)*2", "B1": "='Other Sheet'!B3+A1", "B2": "=NOSUCH(A1)",
        })
        assert "=SUM(A1:A2)*2 = 20" in msg
        out = json.loads(await ok(sheets, "read_range", path="f.xlsx", sheet="Data", range="A3:B3"))
        assert out["rows"][0]["values"] == [{"formula": "=SUM(A1:A2)*2", "value": 20}, None]
        b = json.loads(await ok(sheets, "read_range", path="f.xlsx", sheet="Data", range="B1:B2"))
        assert b["rows"][0]["values"] == [{"formula": "='Other Sheet'!B3+A1", "value": 14}]
        assert b["rows"][1]["values"] == [{"formula": "=NOSUCH(A1)", "value": None}]
        assert cell_value(world.file("f.xlsx"), "Data", "A3") == 20


def test_evaluator_covers_the_supported_functions(tmp_path):
    wb = Workbook()
    ws = wb.active
    ws.title = "T"
    for row in [["Dept", "Amt", "Status"], ["A", 10, "Posted"], ["B", 2.5, "Void"], ["a", 7, "Posted"], ["C", -3, "Posted"]]:
        ws.append(row)
    cases = {
        "=1+2*3": 7, "=(1+2)*3": 9, "=10/4": 2.5, "=SUM(B2:B5)": 16.5, "=AVERAGE(B2:B5)": 4.125,
        "=MIN(B2:B5)": -3, "=MAX(B:B)": 10, "=COUNT(A1:C5)": 4, "=ROUND(2.345,2)": 2.35, "=ROUND(-2.5,0)": -3,
        "=ABS(B5)": 3, '=SUMIF(A:A,"a",B:B)': 17, '=SUMIFS(B2:B5,A2:A5,"A",C2:C5,"Posted")': 17,
        '=COUNTIF(C2:C5,"<>Void")': 3, '=IF(SUM(B2:B5)>10,"Yes","No")': "Yes", '=A2&"-"&B2': "A-10",
    }
    for i, formula in enumerate(cases, start=1):
        ws[f"H{i}"] = formula
    for i, (formula, want) in enumerate(cases.items(), start=1):
        got = evaluate(wb, "T", f"H{i}")
        assert got == (want if isinstance(want, str) else pytest.approx(want)), (formula, got)


def test_evaluator_returns_none_for_what_it_cannot_compute():
    wb = Workbook()
    ws = wb.active
    ws["A1"], ws["A2"] = "=1/0", "=VLOOKUP(1,B:C,2)"
    ws["A3"], ws["A4"] = "=A4", "=A3"  # a cycle
    ws["A5"], ws["A6"] = "=SUM(", "=B1+\"text\""
    assert [evaluate(wb, ws.title, f"A{i}") for i in range(1, 7)] == [None] * 6


async def test_add_rename_and_clear(world):
    async with session(world) as sheets:
        await ok(sheets, "create_workbook", path="b.xlsx")
        await ok(sheets, "add_sheet", path="b.xlsx", name="Notes")
        await ok(sheets, "rename_sheet", path="b.xlsx", old="Sheet1", new="Main")
        listed = json.loads(await ok(sheets, "list_sheets", path="b.xlsx"))
        assert [s["name"] for s in listed] == ["Main", "Notes"]
        await ok(sheets, "write_rows", path="b.xlsx", sheet="Main", start_cell="A1", rows=[[1, 2], [3, 4], [5, 6]])
        await ok(sheets, "clear_range", path="b.xlsx", sheet="Main", range="A2:B3")
        listed = json.loads(await ok(sheets, "list_sheets", path="b.xlsx"))
        assert listed[0] == {"name": "Main", "used_range": "A1:B1", "rows": 1, "columns": 2}
        assert listed[1]["used_range"] is None
        wb = load_workbook(world.file("b.xlsx"))
        assert wb["Main"]["A3"].value is None and wb["Main"]["B1"].value == 2


async def test_long_reads_are_paged_with_the_next_range(world):
    async with session(world) as sheets:
        await ok(sheets, "create_workbook", path="big.xlsx")
        await ok(sheets, "write_rows", path="big.xlsx", sheet="Sheet1", start_cell="A1",
                 rows=[[i, i * 2, i * 3, f"row {i}"] for i in range(1, 801)])
        seen, args, pages = [], {"path": "big.xlsx", "sheet": "Sheet1"}, 0
        while True:
            out = json.loads(await ok(sheets, "read_range", **args))  # every page is whole JSON
            pages += 1
            seen.extend(r["values"][0] for r in out["rows"])
            if "truncated" not in out:
                break
            args["range"] = out["truncated"].split('range "')[1].split('"')[0]
        assert pages > 1
        assert seen == list(range(1, 801))


@pytest.mark.parametrize("tool,args,needle", [
    ("read_range", {"path": "missing.xlsx", "sheet": "Sheet1"}, "does not exist"),
    ("read_range", {"path": "b.xlsx", "sheet": "Nope"}, "its sheets are: Sheet1"),
    ("read_range", {"path": "b.xlsx", "sheet": "Sheet1", "range": "A1:B"}, "is not a range"),
    ("read_range", {"path": "b.xlsx", "sheet": "Sheet1", "range": "Other!A1"}, "pass the sheet in the sheet argument"),
    ("write_cells", {"path": "b.xlsx", "sheet": "Sheet1", "cells": {"A0": 1}}, "outside the sheet"),
    ("write_cells", {"path": "b.xlsx", "sheet": "Sheet1", "cells": {"1A": 1}}, "not a cell reference"),
    ("write_cells", {"path": "b.xlsx", "sheet": "Sheet1", "cells": {"A1:B2": 1}}, "for blocks use write_rows"),
    ("write_cells", {"path": "b.xlsx", "sheet": "Sheet1", "cells": {}}, "cells is empty"),
    ("write_cells", {"path": "b.xlsx", "sheet": "Sheet1", "cells": {"A1": "bell\x07"}}, "cannot be stored"),
    ("clear_range", {"path": "b.xlsx", "sheet": "Sheet1", "range": "ZZZZ1"}, "is not a range"),
    ("create_workbook", {"path": "b.xlsx"}, "already exists"),
    ("create_workbook", {"path": "c.csv"}, "not an .xlsx file"),
    ("create_workbook", {"path": "d.xlsx", "sheets": ["A", "a"]}, "already has a sheet"),
    ("create_workbook", {"path": "d.xlsx", "sheets": ["bad/name"]}, "may not contain"),
    ("add_sheet", {"path": "b.xlsx", "name": "sheet1"}, "already has a sheet"),
    ("rename_sheet", {"path": "b.xlsx", "old": "Nope", "new": "X"}, "has no sheet"),
    ("read_range", {"path": "../x.xlsx", "sheet": "Sheet1"}, "outside the workspace"),
    ("list_sheets", {"path": "/etc/passwd"}, "not an .xlsx file"),
    ("list_sheets", {"path": "../../etc/x.xlsx"}, "outside the workspace"),
    ("write_cells", {"path": "b.xlsx", "sheet": "Sheet1", "cells": {"A1": [1, 2]}}, "cells"),
    ("write_rows", {"path": "b.xlsx", "sheet": "Sheet1", "start_cell": "A1", "rows": "not rows"}, "rows"),
    ("read_range", {"path": 42, "sheet": "Sheet1"}, "path"),
])
async def test_bad_input_is_a_readable_tool_error(world, tool, args, needle):
    async with session(world) as sheets:
        await ok(sheets, "create_workbook", path="b.xlsx")
        before = world.file("b.xlsx").read_bytes()
        text, err = await call(sheets, tool, **args)
        assert err and needle in text, text
        assert world.file("b.xlsx").read_bytes() == before
        assert not (world.root / "x.xlsx").exists()


async def test_a_corrupt_file_is_reported_not_crashed_on(world):
    async with session(world) as sheets:
        world.file("junk.xlsx").write_text("not a zip")
        text, err = await call(sheets, "list_sheets", path="junk.xlsx")
        assert err and "could not be opened as an .xlsx workbook" in text


def test_save_workbook_is_byte_deterministic(tmp_path):
    def make():
        wb = Workbook()
        wb.active.append(["a", 1, 2.5, "=SUM(B1:C1)"])
        wb.create_sheet("Two")["B2"] = "x"
        return wb

    save_workbook(make(), tmp_path / "one.xlsx")
    save_workbook(make(), tmp_path / "two.xlsx")
    first = (tmp_path / "one.xlsx").read_bytes()
    assert first == (tmp_path / "two.xlsx").read_bytes()
    assert workbook_bytes(load_workbook(tmp_path / "one.xlsx")) == first  # a load/save round trip too


def test_many_formulas_over_huge_ranges_stop_at_the_evaluation_budget(monkeypatch):
    """An agent's workbook of formulas each summing a million cells must not keep a tool or a
    grader busy for hours: past the budget, further ranges evaluate to None."""
    from longhorizon.apps.sheets import state

    monkeypatch.setattr(state, "EVALUATION_BUDGET_CELLS", 2_000)
    wb = Workbook()
    ws = wb.active
    ws["A1"] = 1
    for r in range(1, 6):
        ws[f"B{r}"] = "=SUM(A1:A1000)"
    ev = state.Evaluator(wb)
    got = [ev.value(ws.title, f"B{r}") for r in range(1, 6)]
    assert got[:2] == [1, 1] and got[2:] == [None, None, None]
