"""The tickets app through a real in-process MCP session over a real SQLite tracker."""

import json

import mcp
import pytest

from longhorizon.apps.tickets import state
from longhorizon.apps.tickets.server import build_server
from longhorizon.core.world import World


def seed(root):
    state.create_tracker(
        root / "state" / "tickets.sqlite", me="dana", now="2026-03-16T09:00:00",
        projects=[{"key": "SUP", "name": "Customer support", "kind": "support"},
                  {"key": "PRJ", "name": "Platform", "kind": "project"}],
        teams=[{"name": "Billing Ops", "description": "Invoices and payments"},
               {"name": "Mobile", "description": "iOS and Android apps"}],
        users=[{"username": "dana", "name": "Dana Whitfield", "email": "dana@corp.example", "team": "Billing Ops"},
               {"username": "lee", "name": "Lee Park", "email": "lee@corp.example", "team": "Mobile"},
               {"username": "lena", "name": "Lena Parker", "email": "lena@corp.example", "team": "Mobile"}],
        sprints=[{"project": "PRJ", "name": "Sprint 13", "start": "2026-03-02", "end": "2026-03-13", "state": "closed"},
                 {"project": "PRJ", "name": "Sprint 14", "start": "2026-03-16", "end": "2026-03-27",
                  "state": "planned"}],
        tickets=[
            {"project": "SUP", "number": 7, "title": "Invoice export fails", "type": "bug", "customer": "Acme",
             "component": "Billing", "description": "Error E-4312 on export", "created": "2026-03-10T10:00:00"},
            {"project": "SUP", "title": "Invoice export broken again", "type": "bug", "customer": "Acme",
             "description": "Still E-4312", "labels": ["export"]},
            {"project": "SUP", "title": "App crashes", "type": "bug", "status": "Closed", "resolution": "Fixed",
             "team": "Mobile", "priority": "P2"},
            {"project": "PRJ", "number": 1, "title": "Payments epic", "type": "epic"},
            {"project": "PRJ", "title": "Refund API", "type": "story", "estimate": 5, "sprint": "Sprint 13",
             "assignee": "lee", "status": "In Progress", "parent": "PRJ-1"},
        ],
        comments=[{"ticket": "SUP-7", "author": "lee", "body": "Looking into it", "internal": True}],
        links=[{"source": "SUP-9", "target": "SUP-7", "kind": "relates to"}],
    )


@pytest.fixture
def tworld(tmp_path):
    return World.build(tmp_path / "w", seed)


async def call(c, tool, **args):
    r = await c.call_tool(tool, args)
    assert not r.is_error, r.content[0].text
    return r.content[0].text


async def error(c, tool, **args):
    r = await c.call_tool(tool, args)
    assert r.is_error, f"{tool} should have failed: {r.content[0].text}"
    return r.content[0].text


def test_create_tracker_is_byte_identical_and_numbers_tickets(tmp_path):
    a = World.build(tmp_path / "a", seed)
    b = World.build(tmp_path / "b", seed)
    assert a.db_path("tickets").read_bytes() == b.db_path("tickets").read_bytes()
    assert [t["key"] for t in state.tickets(a)] == ["PRJ-1", "PRJ-2", "SUP-7", "SUP-8", "SUP-9"]


async def test_list_projects_teams_users(tworld):
    async with mcp.Client(build_server(tworld)) as c:
        projects = json.loads(await call(c, "list_projects"))
        assert projects[1]["key"] == "SUP" and projects[1]["open_tickets"] == 2
        assert projects[0]["statuses"][0] == "To Do"
        teams = json.loads(await call(c, "list_teams"))
        assert teams[1] == {"name": "Mobile", "description": "iOS and Android apps", "members": ["lee", "lena"]}
        users = json.loads(await call(c, "list_users", team="mobile"))
        assert [u["username"] for u in users] == ["lee", "lena"]
        assert json.loads(await call(c, "list_users", query="dana"))[0]["you"]
        assert "teams:" in await error(c, "list_users", team="Nope")


async def test_list_sprints_counts_points(tworld):
    async with mcp.Client(build_server(tworld)) as c:
        sprints = json.loads(await call(c, "list_sprints", project="prj"))
        assert [(s["name"], s["tickets"], s["points"]) for s in sprints] == [("Sprint 13", 1, 5), ("Sprint 14", 0, 0)]
        assert len(json.loads(await call(c, "list_sprints", state="planned"))) == 1
        assert "state" in await error(c, "list_sprints", state="future")


async def test_search_tickets_filters(tworld):
    async with mcp.Client(build_server(tworld)) as c:
        hits = json.loads(await call(c, "search_tickets", query="e-4312"))
        assert [t["key"] for t in hits["tickets"]] == ["SUP-7", "SUP-8"]
        assert json.loads(await call(c, "search_tickets", project="SUP", open_only=True))["total"] == 2
        assert json.loads(await call(c, "search_tickets", status="closed"))["tickets"][0]["key"] == "SUP-9"
        assert json.loads(await call(c, "search_tickets", label="EXPORT"))["tickets"][0]["key"] == "SUP-8"
        assert json.loads(await call(c, "search_tickets", sprint="Sprint 13"))["tickets"][0]["key"] == "PRJ-2"
        assert json.loads(await call(c, "search_tickets", project="PRJ", sprint="backlog"))["total"] == 1
        assert json.loads(await call(c, "search_tickets", assignee="Lee Park"))["total"] == 1
        assert json.loads(await call(c, "search_tickets", assignee="none", project="SUP"))["total"] == 3
        assert json.loads(await call(c, "search_tickets", parent="prj-1"))["total"] == 1
        assert json.loads(await call(c, "search_tickets", component="billing"))["total"] == 1
        assert json.loads(await call(c, "search_tickets", customer="acm", limit=1))["next_offset"] == 1
        assert "several users" in await error(c, "search_tickets", assignee="le")
        assert "statuses" in await error(c, "search_tickets", status="Shipped")
        assert "priority" in await error(c, "search_tickets", priority="urgent")


async def test_get_ticket_shows_comments_links_and_transitions(tworld):
    async with mcp.Client(build_server(tworld)) as c:
        t = json.loads(await call(c, "get_ticket", key="sup-7"))
        assert t["comments"][0]["internal"] is True
        assert t["links"] == [{"kind": "relates to", "key": "SUP-9", "title": "App crashes", "status": "Closed"}]
        assert t["allowed_transitions"] == ["Triaged", "In Progress", "Waiting on Customer", "Closed"]
        assert "search_tickets" in await error(c, "get_ticket", key="SUP-99")
        assert "search_tickets" in await error(c, "get_ticket", key="not a key")


async def test_workflow_transitions_are_validated(tworld):
    async with mcp.Client(build_server(tworld)) as c:
        assert "allowed next" in await error(c, "update_ticket", key="SUP-7", status="Resolved")
        assert "workflow" in await error(c, "update_ticket", key="SUP-7", status="Done")
        await call(c, "update_ticket", key="SUP-7", status="triaged", priority="high")
        t = state.ticket(tworld, "SUP-7")
        assert (t["status"], t["priority"]) == ("Triaged", "P2")
        assert "needs a resolution" in await error(c, "update_ticket", key="SUP-8", status="Closed")
        assert "resolution" in await error(c, "update_ticket", key="SUP-8", status="Closed", resolution="Dupe")
        await call(c, "update_ticket", key="SUP-8", status="Closed", resolution="duplicate")
        assert state.ticket(tworld, "SUP-8")["resolution"] == "Duplicate"
        await call(c, "update_ticket", key="SUP-8", status="Triaged")
        assert state.ticket(tworld, "SUP-8")["resolution"] is None
        assert "only set" in await error(c, "update_ticket", key="SUP-8", resolution="Fixed")
        await call(c, "update_ticket", key="PRJ-2", status="Done")
        assert state.ticket(tworld, "PRJ-2")["resolution"] == "Done"
        fields = [h["field"] for h in state.history(tworld, "SUP-8")]
        assert fields == ["status", "resolution", "status", "resolution"]


async def test_update_ticket_labels_estimate_sprint_parent(tworld):
    async with mcp.Client(build_server(tworld)) as c:
        text = await call(c, "update_ticket", key="PRJ-2", add_labels=["backend", "Backend", "api"], estimate=8,
                          sprint="sprint 14", due_date="2026-03-27")
        assert "'Sprint 13' -> 'Sprint 14'" in text
        t = state.ticket(tworld, "PRJ-2")
        assert t["labels"] == ["backend", "api"] and t["estimate"] == 8 and t["due_date"] == "2026-03-27"
        await call(c, "update_ticket", key="PRJ-2", remove_labels=["API"], sprint="backlog", parent="")
        t = state.ticket(tworld, "PRJ-2")
        assert t["labels"] == ["backend"] and t["sprint_id"] is None and t["parent"] is None
        assert "closed" in await error(c, "update_ticket", key="PRJ-2", sprint="Sprint 13")
        assert "hyphens" in await error(c, "update_ticket", key="PRJ-2", labels=["tech debt"])
        assert "story points" in await error(c, "update_ticket", key="PRJ-2", estimate=500)
        assert "not an epic" in await error(c, "update_ticket", key="PRJ-2", parent="SUP-7")
        assert "YYYY-MM-DD" in await error(c, "update_ticket", key="PRJ-2", due_date="next week")
        assert "nothing" in await call(c, "update_ticket", key="PRJ-2", estimate=8)


async def test_create_ticket_in_sprint_under_epic(tworld):
    async with mcp.Client(build_server(tworld)) as c:
        text = await call(c, "create_ticket", project="prj", title="Webhook retries", type="story", assignee="Lena",
                          labels=["backend"], estimate=3, sprint="Sprint 14", parent="PRJ-1")
        assert text.startswith("Created PRJ-3")
        t = state.ticket(tworld, "PRJ-3")
        assert (t["status"], t["assignee"], t["team"], t["reporter"], t["parent"]) == (
            "To Do", "lena", "Mobile", "dana", "PRJ-1")
        text = await call(c, "create_ticket", project="SUP", title="Login loop")
        assert text.startswith("Created SUP-10") and state.ticket(tworld, "SUP-10")["status"] == "New"
        assert "projects" in await error(c, "create_ticket", project="XYZ", title="x")
        assert "type" in await error(c, "create_ticket", project="PRJ", title="x", type="feature")
        assert "empty" in await error(c, "create_ticket", project="PRJ", title="  ")
        assert "no sprint" in await error(c, "create_ticket", project="PRJ", title="x", sprint="Sprint 99")


async def test_assign_ticket_person_and_team(tworld):
    async with mcp.Client(build_server(tworld)) as c:
        await call(c, "assign_ticket", key="SUP-7", team="billing ops")
        t = state.ticket(tworld, "SUP-7")
        assert (t["assignee"], t["team"]) == (None, "Billing Ops")
        assert "not Billing Ops" in await error(c, "assign_ticket", key="SUP-7", assignee="lee", team="Billing Ops")
        await call(c, "assign_ticket", key="SUP-7", assignee="lee@corp.example")
        t = state.ticket(tworld, "SUP-7")
        assert (t["assignee"], t["team"]) == ("lee", "Mobile")
        await call(c, "assign_ticket", key="SUP-7", assignee="")
        assert state.ticket(tworld, "SUP-7")["assignee"] is None
        assert "give an assignee" in await error(c, "assign_ticket", key="SUP-7")


async def test_comments_public_and_internal(tworld):
    async with mcp.Client(build_server(tworld)) as c:
        assert "public comment 2" in await call(c, "add_comment", key="SUP-8", body="We're on it.")
        assert "internal" in await call(c, "add_comment", key="SUP-8", body="dup of 7?", internal=True)
        cs = state.comments(tworld, "SUP-8")
        assert [(x["author"], x["internal"]) for x in cs] == [("dana", 0), ("dana", 1)]
        assert "empty" in await error(c, "add_comment", key="SUP-8", body=" ")


async def test_links_both_directions(tworld):
    async with mcp.Client(build_server(tworld)) as c:
        assert "SUP-8 duplicates SUP-7" in await call(c, "link_tickets", key="SUP-8", other="SUP-7", kind="duplicates")
        assert "already" in await call(c, "link_tickets", key="SUP-7", other="SUP-8", kind="is duplicated by")
        await call(c, "link_tickets", key="PRJ-1", other="PRJ-2", kind="is blocked by")
        assert state.has_link(tworld, "SUP-8", "SUP-7", "duplicates")
        assert state.has_link(tworld, "PRJ-2", "PRJ-1", "blocks")
        t = json.loads(await call(c, "get_ticket", key="SUP-7"))
        assert {"kind": "is duplicated by", "key": "SUP-8", "title": "Invoice export broken again",
                "status": "New"} in t["links"]
        assert "itself" in await error(c, "link_tickets", key="SUP-8", other="sup-8", kind="relates to")
        assert "kind" in await error(c, "link_tickets", key="SUP-8", other="SUP-7", kind="clones")
        assert "Removed 1" in await call(c, "unlink_tickets", key="SUP-7", other="SUP-8")
        assert not state.has_link(tworld, "SUP-8", "SUP-7", "duplicates")


async def test_missing_tracker_is_a_tool_error(world):
    async with mcp.Client(build_server(world)) as c:
        assert "no ticket tracker" in await error(c, "list_projects")


def seed_with_history(root):
    state.create_tracker(
        root / "state" / "tickets.sqlite", me="dana", now="2026-03-20T09:00:00",
        projects=[{"key": "SUP", "name": "Customer support", "kind": "support"}],
        teams=[{"name": "Mobile"}],
        users=[{"username": "dana", "name": "Dana Whitfield", "email": "dana@corp.example", "team": "Mobile"},
               {"username": "lee", "name": "Lee Park", "email": "lee@corp.example", "team": "Mobile"}],
        tickets=[{"project": "SUP", "number": 4, "title": "App crashes", "status": "Resolved", "resolution": "Fixed",
                  "created": "2026-03-02T10:00:00", "updated": "2026-03-18T16:30:00"}],
        history=[{"ticket": "SUP-4", "field": "status", "old": "Triaged", "new": "In Progress",
                  "author": "lee", "at": "2026-03-03T09:00:00"},
                 {"ticket": "SUP-4", "field": "status", "old": "In Progress", "new": "Resolved", "author": "lee",
                  "at": "2026-03-18T16:30:00"},
                 {"ticket": "SUP-4", "field": "resolution", "old": None, "new": "Fixed", "author": "lee",
                  "at": "2026-03-18T16:30:00"}],
    )


def test_create_tracker_seeds_updated_and_history(tmp_path):
    w = World.build(tmp_path / "h", seed_with_history)
    t = state.ticket(w, "SUP-4")
    assert (t["created"], t["updated"]) == ("2026-03-02T10:00:00", "2026-03-18T16:30:00")
    assert [(h["id"], h["field"], h["new"]) for h in state.history(w, "SUP-4")] == [
        (1, "status", "In Progress"), (2, "status", "Resolved"), (3, "resolution", "Fixed")]
    b = World.build(tmp_path / "h2", seed_with_history)
    assert w.db_path("tickets").read_bytes() == b.db_path("tickets").read_bytes()


def test_create_tracker_rejects_history_of_unknown_ticket(tmp_path):
    with pytest.raises(ValueError, match="unknown ticket"):
        state.create_tracker(tmp_path / "t.sqlite", me="dana", now="2026-03-20T09:00:00",
                             projects=[{"key": "SUP", "name": "S", "kind": "support"}],
                             users=[{"username": "dana", "name": "Dana", "email": "d@x.example"}],
                             history=[{"ticket": "SUP-1", "field": "status", "at": "2026-03-01T09:00:00"}])


async def test_get_history_lists_seeded_and_new_changes(tmp_path):
    w = World.build(tmp_path / "h", seed_with_history)
    async with mcp.Client(build_server(w)) as c:
        h = json.loads(await call(c, "get_history", key="sup-4"))
        assert (h["key"], h["created"], h["reporter"]) == ("SUP-4", "2026-03-02T10:00:00", "dana")
        assert [(x["at"], x["author"], x["old"], x["new"]) for x in h["changes"] if x["field"] == "status"] == [
            ("2026-03-03T09:00:00", "lee", "Triaged", "In Progress"),
            ("2026-03-18T16:30:00", "lee", "In Progress", "Resolved")]
        await call(c, "update_ticket", key="SUP-4", status="Closed", resolution="Fixed", priority="P1")
        h = json.loads(await call(c, "get_history", key="SUP-4", field="Status"))
        assert [(x["new"], x["author"], x["at"]) for x in h["changes"]][-1] == ("Closed", "dana", "2026-03-20T09:00:00")
        assert all(x["field"] == "status" for x in h["changes"])
        assert json.loads(await call(c, "get_history", key="SUP-4", field="sprint"))["changes"] == []
        assert "fields:" in await error(c, "get_history", key="SUP-4", field="mood")
        assert "search_tickets" in await error(c, "get_history", key="SUP-99")
