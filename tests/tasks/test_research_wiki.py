"""The research and wiki families' graders: tolerant where people write differently, strict on
content; and the archive search finds what the questions need."""

import dataclasses
import json
import re
from datetime import date, datetime, time

import mcp
from openpyxl import Workbook

from longhorizon.apps import build_server
from longhorizon.apps.sheets.state import save_workbook
from longhorizon.core.task import ToolCall
from longhorizon.core.world import World
from longhorizon.env.episode import play_task
from longhorizon.policies.scripted import OraclePolicy
from longhorizon.tasks.registry import get_family
from longhorizon.tasks.research import answer_segments, cited_docs, numbers, stated_first
from longhorizon.tasks.research.due_diligence import HEADER, SHEET, cell_amount, event_kind
from longhorizon.tasks.research.vendor_brief import _render
from longhorizon.tasks.wiki.chat_reconcile import count_near, mentions_time, rota_table


def check(task, cid, world, traj=None):
    out = next(c for c in task.criteria if c.id == cid).check(world, traj)
    return out if isinstance(out, tuple) else (out, "")


def test_answer_segments_reads_lines_tables_and_headings():
    text = ("# Brief\n**Q1.** Oregon\nsource: DOC-8850\n| 2 | headcount | 719 | DOC-4100 |\n"
            "### Question 3\nGold (DOC-1)\n4) $36.50\nSources:\n2026-01-03 was the price change\n")
    segs = answer_segments(text)
    assert segs[1] == ["Oregon\nsource: DOC-8850"] and "719" in segs[2][0]
    assert segs[3][0].strip().startswith("Gold") and "2026-01-03" in segs[4][0]
    assert cited_docs("see doc 8850 and DOC_4100, DOC-12") == {"DOC-8850", "DOC-4100"}


def test_numbers_understand_scales_currencies_and_skip_dates_and_ids():
    vals = [(v, k) for _, v, k in numbers("$40M, 1,250 staff, 99.95%, USD 2.5 million (DOC-1234, 2026-03-01)")]
    assert vals == [(40e6, "money"), (1250.0, "plain"), (99.95, "percent"), (2.5e6, "money")]


def test_stated_first_takes_the_first_candidate():
    assert stated_first("$45 per seat (up from $42)", "money", 45, [42, 48])[0]
    assert not stated_first("$42, now $45", "money", 45, [42, 48])[0]
    assert stated_first("As of March 2026 it is 99.9% (was 99.5%)", "percent", 99.9, [99.5])[0]
    assert stated_first("Kelly Lewis replaced April Mitchell", "person", "Kelly Lewis", ["April Mitchell"])[0]
    assert stated_first("Lewis", "person", "Kelly Lewis", ["April Mitchell"])[0]
    assert stated_first("ends 31 March 2027 (was 2026-05-14)", "date", date(2027, 3, 31), [date(2026, 5, 14)])[0]
    assert not stated_first("Dublin, moving to Oregon", "place", "Oregon", ["Dublin"])[0]
    assert not stated_first("no idea", "word", "Gold", ["Silver"])[0]


def test_vendor_brief_accepts_a_differently_formatted_brief(tmp_path):
    task = get_family("vendor_research_brief").generate(0)
    world = World.build(tmp_path / "w", task.build)
    qs = task.data["questions"]
    rows = ["| # | Question | Answer | Source |", "|---|---|---|---|"]
    for q in qs:
        full = next(x for x in task.data["questions"] if x["n"] == q["n"])
        kind = {"ceo": "person", "manager": "person", "price": "money", "funding": "money", "uptime": "percent",
                "headcount": "count", "contract_end": "date"}.get(q["key"], "place")
        value = q["right"]
        if q["key"] == "funding":
            value = f"${float(value) / 1e6:g}M"
        elif q["key"] == "contract_end":
            value = value  # ISO
        elif kind in ("money",):
            value = f"USD {float(value):.2f}"
        elif kind == "percent":
            value = f"{value} %"
        rows.append(f"| {q['n']} | ... | {value} (previously {q['wrong'][0]}) | doc {full['accept'][-1][4:]} |")
    world.file(task.data["brief"]).parent.mkdir(parents=True, exist_ok=True)
    world.file(task.data["brief"]).write_text("\n".join(rows) + "\n")
    for q in qs:
        assert check(task, f"answer_q{q['n']}", world)[0], q
    assert check(task, "sources_cited", world)[0]


async def test_vendor_brief_oracle_queries_surface_the_answers(tmp_path):
    task = get_family("vendor_research_brief").generate(2)
    world = World.build(tmp_path / "w", task.build)
    vendor = task.data["vendor"]
    from longhorizon.tasks.research.vendor_brief import QUESTIONS
    async with mcp.Client(build_server("search", world)) as c:
        for q in task.data["questions"]:
            res = await c.call_tool("search", {"query": f'"{vendor}" {QUESTIONS[q["key"]][2]}'})
            hits = [h["id"] for h in json.loads(res.content[0].text)["hits"]]
            assert set(q["accept"]) <= set(hits), (q["key"], hits)


def test_render_matches_what_graders_read():
    assert _render("money", "funding", 75e6) == "$75 million"
    assert stated_first(_render("count", "headcount", 1250), "count", 1250, [1180])[0]


def test_event_kinds_and_amount_cells():
    assert event_kind("Litigation") == "lawsuit" and event_kind("Regulatory fine") == "fine"
    assert event_kind("Data breach") == "data breach" and event_kind("Product recall") == "recall"
    assert event_kind("fine / lawsuit") is None
    assert cell_amount("$4.2M") == 4.2e6 and cell_amount(850000) == 850000 and cell_amount("n/a") is None


def test_due_diligence_accepts_another_layout(tmp_path):
    task = get_family("entity_due_diligence").generate(1)
    world = World.build(tmp_path / "w", task.build)
    names = {"lawsuit": "Litigation", "fine": "Regulatory fine", "settlement": "Settled",
             "data breach": "Data breach", "recall": "Product recall"}
    wb = Workbook()
    ws = wb.active
    ws.title = "events"
    ws.append(["Entity", "Event type", "Amount", "Document", "Date"])
    for r in reversed(task.data["rows"]):
        amt = f"${r['amount'] / 1e6:g}M" if r["amount"] and r["amount"] >= 1e6 else (r["amount"] or "-")
        ws.append([r["entity"].upper(), names[r["event"]], amt, r["id"], datetime.fromisoformat(r["date"])])
    world.file(task.data["path"]).parent.mkdir(parents=True, exist_ok=True)
    save_workbook(wb, world.file(task.data["path"]))
    for cid in ("rows_complete", "rows_precise", "entities_right", "events_right", "amounts_right", "dates_right"):
        assert check(task, cid, world)[0], cid


def test_wiki_helpers_read_people_phrasing():
    assert count_near("Get two code-owner approvals first", 2) and count_near("Approvals required: 3", 3)
    assert not count_near("2. Get 1 approval", 2)
    assert mentions_time("from Thursday 3pm", time(15, 0)) and mentions_time("at 13.30", time(13, 30))
    assert not mentions_time("at 15:30", time(15, 0))
    table = rota_table("| Service | Primary | Secondary |\n|---|---|---|\n| Search | Ana Lima | Bo Chen |\n")
    assert table == {"search": {"primary": "Ana Lima", "secondary": "Bo Chen"}}


async def test_wiki_process_accepts_a_rewritten_page(tmp_path):
    task = get_family("wiki_chat_reconcile").generate(4)
    world = World.build(tmp_path / "w", task.build)
    async with mcp.Client(build_server("chat", world)) as c:
        eng = json.loads((await c.call_tool("read_channel", {"channel": "eng"})).content[0].text)
    decision = next(m["text"] for m in eng["messages"] if m["text"].startswith("Decision"))
    n_new = int(decision.split("need ")[1].split()[0])
    day2, t2 = decision.split("freeze starts ")[1].split(" instead")[0].split(" at ")
    soak = json.loads(await _page(world, "deploy-process"))["body"].split("dashboard for ")[1].split()[0]
    hh, mm = map(int, t2.split(":"))
    ampm = f"{hh % 12 or 12}{':%02d' % mm if mm else ''}{'pm' if hh >= 12 else 'am'}"
    body = (f"# Deploy process\n\n- Every PR needs {['', 'one', 'two', 'three'][n_new]} approvals from code owners.\n"
            f"- Soak on staging for {soak} minutes.\n\n**Freeze:** deploys are frozen from {day2} {ampm} "
            f"until Monday morning.\n")
    async with mcp.Client(build_server("wiki", world)) as c:
        r = await c.call_tool("update_page", {"slug": "deploy-process", "body": body, "summary": "rewrite"})
        assert not r.is_error
    assert check(task, "process_updated", world)[0]


async def _page(world, slug):
    async with mcp.Client(build_server("wiki", world)) as c:
        return (await c.call_tool("get_page", {"slug": slug})).content[0].text


async def _junk_reward(t, script) -> tuple[float, set[str]]:
    """Reward and met criteria when ``script`` (a generator of ToolCalls) is played as the solution."""
    traj = await play_task(dataclasses.replace(t, oracle=script), OraclePolicy())
    return traj.grade.reward, {r.id for r in traj.grade.results if r.passed}


async def test_due_diligence_pays_nothing_for_a_register_of_every_search_hit():
    """Every event is in a dump of the search results, and so is everything else: recall and the
    copied dates pay only when the rows are the events."""
    t = get_family("entity_due_diligence").generate(1)
    d = t.data

    def dump():
        rows, seen = [list(HEADER)], set()
        for name in [d["target"], d["former"], *d["subsidiaries"]]:
            hits = json.loads((yield ToolCall("search__search", {"query": name, "limit": 50})))["hits"]
            for h in hits:
                if h["id"] not in seen:
                    seen.add(h["id"])
                    rows.append([h["id"], h["date"], d["target"], "lawsuit", ""])
        yield ToolCall("sheets__create_workbook", {"path": d["path"], "sheets": [SHEET]})
        yield ToolCall("sheets__write_rows", {"path": d["path"], "sheet": SHEET, "start_cell": "A1", "rows": rows})
        return "done"

    reward, met = await _junk_reward(t, dump)
    assert {"rows_complete", "dates_right"} <= met and reward == 0.0, met


async def test_vendor_brief_pays_nothing_for_last_quarters_brief_copied():
    """Seed 2's old brief states a tier that happens to be this vendor's too: a copy still earns nothing."""
    t = get_family("vendor_research_brief").generate(2)
    brief = t.data["brief"]

    def copy_old():
        listing = yield ToolCall("files__list_dir", {"path": "research"})
        old = next(p for p in re.findall(r"[\w./-]+-brief\.md", listing) if not brief.endswith(p.split("/")[-1]))
        yield ToolCall("files__copy", {"src": f"research/{old.split('/')[-1]}", "dst": brief})
        return "done"

    reward, met = await _junk_reward(t, copy_old)
    assert reward == 0.0, met


async def test_wiki_chat_reconcile_draws_its_traps_per_seed():
    """The thread under one rota announcement (called off, or another engineer named), the office's
    abandoned first address and the soak-time proposal vary over seeds (at least 3 trap sets). A
    corrected change is graded with the thread's engineer (the announced one fails); without an
    abandoned address the criterion does not speak of one; the oracle meets every mix."""
    from longhorizon.tasks.diversity import trap_set
    fam = get_family("wiki_chat_reconcile")
    tasks = [fam.generate(s) for s in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("reversed", "corrected", "abandoned_address", "soak_proposal"):
        assert {bool(t.data[key]) for t in tasks} == {True, False}, key
    assert all(bool(t.data["reversed"]) != bool(t.data["corrected"]) for t in tasks)
    fixed = next(t for t in tasks if t.data["corrected"])
    service, role, old, new, announced = fixed.data["corrected"]
    assert [service, role, old, new] in fixed.data["changes"] and new != announced
    traj = await play_task(fixed, OraclePolicy(perturb="rota_updated"))  # the announced engineer
    assert not next(r for r in traj.grade.results if r.id == "rota_updated").passed
    direct = next(t for t in tasks if not t.data["abandoned_address"])
    assert "abandoned" not in next(c for c in direct.criteria if c.id == "address_updated").description
    for t in (fixed, direct, next(t for t in tasks if t.data["reversed"] and t.data["abandoned_address"])):
        traj = await play_task(t, OraclePolicy())
        assert traj.grade.reward == 1.0, [r for r in traj.grade.results if not r.passed]


async def test_entity_due_diligence_draws_its_traps_per_seed():
    """Legal's follow-up (adds a subsidiary, takes a sold one out, none), the target's former name
    and legal's memo copies vary over seeds (at least 3 trap sets). A sold subsidiary's events are
    in the archive but have no rows (a row for one fails rows_precise); the oracle meets every mix."""
    from longhorizon.tasks.diversity import trap_set
    fam = get_family("entity_due_diligence")
    tasks = [fam.generate(s) for s in range(20)]
    assert len({trap_set(t) for t in tasks}) >= 3
    for key in ("renamed", "added_subsidiary", "dropped_subsidiary", "memo_copies"):
        assert {bool(t.data[key]) for t in tasks} == {True, False}, key
    sold = next(t for t in tasks if t.data["dropped_subsidiary"])
    assert not sold.data["added_subsidiary"]
    assert sold.data["dropped_subsidiary"] not in {r["entity"] for r in sold.data["rows"]}
    traj = await play_task(sold, OraclePolicy(perturb="rows_precise"))  # a row for the sold one's event
    assert not next(r for r in traj.grade.results if r.id == "rows_precise").passed
    plain = next(t for t in tasks if not t.data["renamed"])
    assert plain.data["former"] not in {r["entity"] for r in plain.data["rows"]}
    nobody = next(t for t in tasks if not t.data["added_subsidiary"] and not t.data["dropped_subsidiary"])
    for t in (sold, plain, nobody):
        traj = await play_task(t, OraclePolicy())
        assert traj.grade.reward == 1.0, [r for r in traj.grade.results if not r.passed]
