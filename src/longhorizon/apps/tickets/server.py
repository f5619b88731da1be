"""The `tickets` app: an MCP server over an issue tracker (``state/tickets.sqlite``).

One tracker serves support queues (SUP-123: customer tickets with a priority, a team, a
component) and project boards (PRJ-45: stories and tasks with estimates, sprints and epics).
Status changes follow the project's workflow; anything else the agent gets wrong comes back
as a ToolError that says how to fix it.
"""

from __future__ import annotations

import json
from contextlib import closing
from datetime import date, datetime
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError

from longhorizon.apps.common import (
    ADD, READ, SET, AppServer, cap, read_meta, server_builder, sqlite_connector, tick_clock,
)
from longhorizon.apps.tickets.state import (
    DONE_STATUSES,
    LINK_KINDS,
    PRIORITIES,
    RESOLUTIONS,
    SPRINT_STATES,
    TYPES,
    WORKFLOWS,
    advance,
    canonical,
    canonical_priority,
    clean_labels,
    parse_key,
    ticket_dict,
)

MAX_LIMIT = 100
ALL_STATUSES = tuple(dict.fromkeys(s for flow in WORKFLOWS.values() for s in flow))
PRIORITY_TEXT = ", ".join(f"{p} ({n})" for p, n in PRIORITIES.items())
INVERSE = {v: k for k, v in LINK_KINDS.items() if v != k}
HISTORY_FIELDS = ("created", "status", "resolution", "priority", "assignee", "team", "title", "description", "type",
                  "labels", "estimate", "sprint_id", "parent", "due_date", "component", "link", "unlink")

INSTRUCTIONS = (
    "The team's ticket tracker. Tickets have keys like SUP-123 (support queue) or PRJ-45 (project "
    f"work). Priorities: {PRIORITY_TEXT}. Support workflow: New -> Triaged -> In Progress -> "
    "Waiting on Customer -> Resolved -> Closed (closing or resolving needs a resolution). Project "
    "workflow: To Do -> In Progress -> In Review -> Done (or Won't Do). Dates are YYYY-MM-DD; "
    "estimates are story points. Find tickets with search_tickets, open one with get_ticket."
)


def _dumps(obj: Any) -> str:
    return cap(json.dumps(obj, ensure_ascii=False))


def _text(value: str | None, field: str, required: bool = False, limit: int = 200) -> str:
    v = " ".join(str(value or "").split())
    if required and not v:
        raise ToolError(f"{field} must not be empty")
    if len(v) > limit:
        raise ToolError(f"{field} must be at most {limit} characters")
    return v


def _due(value: str) -> str | None:
    v = str(value).strip()
    if not v or v.lower() == "none":
        return None
    try:
        return date.fromisoformat(v).isoformat() if len(v) == 10 else datetime.fromisoformat(v).date().isoformat()
    except ValueError:
        raise ToolError(f"due_date={value!r} is not a date: use YYYY-MM-DD (or \"\" to clear it)") from None


def _labels(values: list[str], field: str = "labels") -> list[str]:
    try:
        return clean_labels(values)
    except ValueError as exc:
        raise ToolError(f"{field}: {str(exc)!r} is not a valid label; labels are single words up to 40 characters "
                        "(use hyphens instead of spaces, e.g. 'tech-debt')") from None


def _estimate(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
        raise ToolError(f"estimate {value!r} must be a whole number of story points from 0 to 100")
    return value


def make_app(world):
    db_path = world.db_path("tickets")
    srv = AppServer("tickets", instructions=INSTRUCTIONS)

    connect = sqlite_connector(db_path, "ticket tracker", "tickets")

    meta = read_meta

    def tick(conn) -> str:
        return tick_clock(conn, advance)

    def project_of(conn, key: str) -> dict:
        want = str(key or "").strip().upper()
        row = conn.execute("SELECT * FROM projects WHERE key = ?", (want,)).fetchone()
        if row is None:
            keys = ", ".join(r[0] for r in conn.execute("SELECT key FROM projects ORDER BY key"))
            raise ToolError(f"no project {key!r}; projects: {keys}")
        return dict(row)

    def get(conn, key: str) -> dict:
        k = parse_key(key)
        row = conn.execute("SELECT * FROM tickets WHERE key = ?", (k,)).fetchone() if k else None
        if row is None:
            raise ToolError(f"no ticket {key!r}; keys look like SUP-12 (use search_tickets to find them)")
        return ticket_dict(row)

    def user_of(conn, who: str, field: str = "assignee") -> str:
        users = [dict(r) for r in conn.execute("SELECT * FROM users ORDER BY username")]
        w = str(who).strip().lower()
        hits = ([u for u in users if u["username"].lower() == w or u["email"] == w]
                or [u for u in users if u["name"].lower() == w]
                or [u for u in users if w and w in u["name"].lower()])
        if len(hits) != 1:
            why = "matches several users" if hits else "is not a user"
            raise ToolError(f"{field} {who!r} {why}; see list_users for usernames")
        return hits[0]["username"]

    def team_of(conn, name: str) -> str:
        names = [r[0] for r in conn.execute("SELECT name FROM teams ORDER BY name")]
        t = canonical(name, names)
        if t is None:
            raise ToolError(f"no team {name!r}; teams: {', '.join(names)}")
        return t

    def sprint_of(conn, project: str, ref) -> int | None:
        """A sprint of ``project`` by name or id; None for '', 'none' or 'backlog'. Closed sprints are refused."""
        v = str(ref).strip()
        if v.lower() in ("", "none", "backlog"):
            return None
        rows = [dict(r) for r in conn.execute("SELECT * FROM sprints WHERE project = ? ORDER BY id", (project,))]
        hit = [s for s in rows if str(s["id"]) == v] or [s for s in rows if s["name"].lower() == v.lower()]
        if not hit:
            names = ", ".join(f"{s['name']} ({s['state']})" for s in rows) or "none"
            raise ToolError(f"project {project} has no sprint {ref!r}; its sprints: {names}")
        if hit[0]["state"] == "closed":
            raise ToolError(f"sprint {hit[0]['name']!r} is closed; put the ticket in an active or planned sprint")
        return hit[0]["id"]

    def epic_of(conn, project: str, ref: str) -> str | None:
        if not str(ref).strip() or str(ref).strip().lower() == "none":
            return None
        t = get(conn, ref)
        if t["type"] != "epic":
            raise ToolError(f"{t['key']} is a {t['type']}, not an epic; a parent must be an epic")
        if t["project"] != project:
            raise ToolError(f"{t['key']} is in project {t['project']}; the parent epic must be in {project}")
        return t["key"]

    def log(conn, key: str, field: str, old, new, now: str) -> None:
        show = lambda v: json.dumps(v) if isinstance(v, list) else (None if v is None else str(v))  # noqa: E731
        conn.execute("INSERT INTO history (ticket, field, old, new, author, at) VALUES (?,?,?,?,?,?)",
                     (key, field, show(old), show(new), meta(conn)["me"], now))

    def sprint_names(conn) -> dict[int, str]:
        return {r[0]: r[1] for r in conn.execute("SELECT id, name FROM sprints")}

    def summary(t: dict, sprints: dict[int, str]) -> dict:
        return {
            "key": t["key"], "type": t["type"], "title": t["title"], "status": t["status"],
            "priority": t["priority"], "assignee": t["assignee"], "team": t["team"], "customer": t["customer"],
            "component": t["component"], "labels": t["labels"], "estimate": t["estimate"],
            "sprint": sprints.get(t["sprint_id"]), "parent": t["parent"], "updated": t["updated"],
        }

    def kind_of(conn, t: dict) -> str:
        return project_of(conn, t["project"])["kind"]

    # -- directory ------------------------------------------------------------------------

    @srv.tool(READ)
    def list_projects() -> str:
        """List projects with their kind (support queue or project board) and workflow.

        Returns JSON [{key, name, kind, statuses: [...], open_tickets}]."""
        with closing(connect()) as conn:
            out = []
            for p in conn.execute("SELECT * FROM projects ORDER BY key").fetchall():
                done = DONE_STATUSES[p["kind"]]
                n = conn.execute(
                    f"SELECT COUNT(*) FROM tickets WHERE project = ? AND status NOT IN ({','.join('?' * len(done))})",
                    (p["key"], *done)).fetchone()[0]
                out.append({"key": p["key"], "name": p["name"], "kind": p["kind"],
                            "statuses": list(WORKFLOWS[p["kind"]]), "open_tickets": n})
        return _dumps(out)

    @srv.tool(READ)
    def list_teams() -> str:
        """List teams with what they look after and their members.

        Returns JSON [{name, description, members: [username...]}]."""
        with closing(connect()) as conn:
            teams = [dict(r) for r in conn.execute("SELECT * FROM teams ORDER BY name")]
            for t in teams:
                t["members"] = [r[0] for r in conn.execute(
                    "SELECT username FROM users WHERE team = ? ORDER BY username", (t["name"],))]
        return _dumps(teams)

    @srv.tool(READ)
    def list_users(team: str | None = None, query: str | None = None) -> str:
        """List people in the tracker, optionally only one team's or those whose name, username or
        email contains ``query`` (case-insensitive).

        Returns JSON [{username, name, email, team}]; you are marked "you": true."""
        with closing(connect()) as conn:
            me = meta(conn)["me"]
            t = team_of(conn, team) if team else None
            rows = [dict(r) for r in conn.execute("SELECT * FROM users ORDER BY name")]
        q = (query or "").strip().lower()
        out = [{**u, **({"you": True} if u["username"] == me else {})} for u in rows
               if (t is None or u["team"] == t) and q in f"{u['username']} {u['name']} {u['email']}".lower()]
        return _dumps(out)

    @srv.tool(READ)
    def list_sprints(project: str | None = None, state: str | None = None) -> str:
        """List sprints (closed, active, planned) with how many tickets and story points they hold.

        Args:
            project: only this project's sprints (e.g. "PRJ").
            state: only sprints in this state: closed, active or planned.

        Returns JSON [{id, project, name, start, end, state, goal, tickets, points}]."""
        if state and state.strip().lower() not in SPRINT_STATES:
            raise ToolError(f"state must be one of: {', '.join(SPRINT_STATES)}")
        with closing(connect()) as conn:
            sql, args = "SELECT * FROM sprints WHERE 1 = 1", []
            if project:
                sql += " AND project = ?"
                args.append(project_of(conn, project)["key"])
            if state:
                sql += " AND state = ?"
                args.append(state.strip().lower())
            out = []
            for s in conn.execute(sql + " ORDER BY project, start, id", args).fetchall():
                n, pts = conn.execute("SELECT COUNT(*), COALESCE(SUM(estimate), 0) FROM tickets WHERE sprint_id = ?",
                                      (s["id"],)).fetchone()
                out.append({**dict(s), "tickets": n, "points": pts})
        return _dumps(out)

    # -- reading tickets ------------------------------------------------------------------

    @srv.tool(READ)
    def search_tickets(query: str = "", project: str | None = None, status: str | None = None,
                       open_only: bool = False, assignee: str | None = None, team: str | None = None,
                       label: str | None = None, priority: str | None = None, type: str | None = None,  # noqa: A002
                       sprint: str | int | None = None, customer: str | None = None,
                       component: str | None = None, parent: str | None = None,
                       limit: int = 25, offset: int = 0) -> str:
        """Find tickets (ordered by key). Every word of ``query`` must appear (case-insensitive) in
        the key, title or description; "" matches all. Filters combine.

        Args:
            query: words to look for, e.g. "E-4312" or "export timeout".
            project: project key, e.g. "SUP".
            status: exact status, e.g. "New", "In Progress", "Done".
            open_only: only tickets not finished (excludes Resolved/Closed and Done/Won't Do).
            assignee: username, email or name; "none" for unassigned tickets.
            team: team name; "none" for tickets without a team.
            label: tickets carrying this label.
            priority: P1-P4 (or Critical/High/Medium/Low).
            type: bug, task, story, epic, question or incident.
            sprint: sprint name or id; "backlog" for tickets in no sprint.
            customer: text contained in the customer name.
            component: the product component; "none" for tickets without one.
            parent: the parent epic's key.
            limit: page size (1-100). offset: how many to skip (use next_offset).

        Returns JSON {total, offset, tickets: [{key, type, title, status, priority,
        assignee, team, customer, component, labels, estimate, sprint, parent,
        updated}], next_offset}."""
        if not 1 <= limit <= MAX_LIMIT or offset < 0:
            raise ToolError(f"limit must be 1-{MAX_LIMIT} and offset >= 0")
        with closing(connect()) as conn:
            kinds = {r[0]: r[1] for r in conn.execute("SELECT key, kind FROM projects")}
            proj = project_of(conn, project)["key"] if project else None
            st = None
            if status:
                st = canonical(status, ALL_STATUSES)
                if st is None:
                    raise ToolError(f"status {status!r} is not a status; statuses: {', '.join(ALL_STATUSES)}")
            who = None
            if assignee:
                who = "" if assignee.strip().lower() in ("none", "unassigned") else user_of(conn, assignee)
            tm = None
            if team:
                tm = "" if team.strip().lower() == "none" else team_of(conn, team)
            pr = None
            if priority:
                pr = canonical_priority(priority)
                if pr is None:
                    raise ToolError(f"priority {priority!r} must be one of {PRIORITY_TEXT}")
            if type and type.strip().lower() not in TYPES:
                raise ToolError(f"type must be one of: {', '.join(TYPES)}")
            sprint_ids: set | None = None
            if sprint is not None and str(sprint).strip():
                v = str(sprint).strip()
                if v.lower() in ("backlog", "none"):
                    sprint_ids = {None}
                else:
                    rows = [dict(r) for r in conn.execute("SELECT * FROM sprints")]
                    sprint_ids = {s["id"] for s in rows if (str(s["id"]) == v or s["name"].lower() == v.lower())
                                  and (proj is None or s["project"] == proj)}
                    if not sprint_ids:
                        raise ToolError(f"no sprint {sprint!r}; see list_sprints")
            par = None
            if parent:
                par = parse_key(parent)
                if par is None:
                    raise ToolError(f"parent {parent!r} is not a ticket key like PRJ-12")
            names = sprint_names(conn)
            rows = [ticket_dict(r) for r in conn.execute("SELECT * FROM tickets ORDER BY project, number")]
        words = (query or "").lower().split()
        hits = []
        for t in rows:
            if proj and t["project"] != proj:
                continue
            if st and t["status"] != st:
                continue
            if open_only and t["status"] in DONE_STATUSES[kinds[t["project"]]]:
                continue
            if who is not None and (t["assignee"] or "") != who:
                continue
            if tm is not None and (t["team"] or "") != tm:
                continue
            if label and label.strip().lower() not in [x.lower() for x in t["labels"]]:
                continue
            if pr and t["priority"] != pr:
                continue
            if type and t["type"] != type.strip().lower():
                continue
            if sprint_ids is not None and t["sprint_id"] not in sprint_ids:
                continue
            if customer and customer.strip().lower() not in t["customer"].lower():
                continue
            if component and (t["component"].lower() != component.strip().lower()
                              and not (component.strip().lower() == "none" and not t["component"])):
                continue
            if par and t["parent"] != par:
                continue
            hay = f"{t['key']} {t['title']} {t['description']}".lower()
            if all(w in hay for w in words):
                hits.append(summary(t, names))
        page = hits[offset:offset + limit]
        nxt = offset + len(page) if offset + len(page) < len(hits) else None
        return _dumps({"total": len(hits), "offset": offset, "tickets": page, "next_offset": nxt})

    @srv.tool(READ)
    def get_ticket(key: str) -> str:
        """One ticket in full: description, comments (oldest first) and links to other tickets.

        Returns JSON {key, project, type, title, description, status, resolution,
        priority, assignee, team, reporter, customer, component, labels, due_date,
        estimate, sprint, parent, created, updated, allowed_transitions: [...],
        comments: [{id, author, body, internal, created}],
        links: [{kind, key, title, status}]}. Link kinds read from this ticket's side:
        "duplicates" / "is duplicated by", "blocks" / "is blocked by", "relates to"."""
        with closing(connect()) as conn:
            t = get(conn, key)
            kind = kind_of(conn, t)
            names = sprint_names(conn)
            comments = [dict(r) | {"internal": bool(r["internal"])} for r in conn.execute(
                "SELECT id, author, body, internal, created FROM comments WHERE ticket = ? ORDER BY id", (t["key"],))]
            links = []
            for ln in conn.execute("SELECT * FROM links WHERE source = ? OR target = ? ORDER BY id",
                                   (t["key"], t["key"])).fetchall():
                outgoing = ln["source"] == t["key"]
                other = ln["target"] if outgoing else ln["source"]
                o = conn.execute("SELECT title, status FROM tickets WHERE key = ?", (other,)).fetchone()
                links.append({"kind": ln["kind"] if outgoing else LINK_KINDS[ln["kind"]], "key": other,
                              "title": o["title"], "status": o["status"]})
        out = {k: t[k] for k in ("key", "project", "type", "title", "description", "status", "resolution",
                                 "priority", "assignee", "team", "reporter", "customer", "component", "labels",
                                 "due_date", "estimate")}
        out.update(sprint=names.get(t["sprint_id"]), parent=t["parent"], created=t["created"], updated=t["updated"],
                   allowed_transitions=list(WORKFLOWS[kind][t["status"]]), comments=comments, links=links)
        return _dumps(out)

    @srv.tool(READ)
    def get_history(key: str, field: str | None = None) -> str:
        """A ticket's change history (its "activity" tab): every recorded change of status,
        resolution, priority, assignee, team, sprint, labels and other fields, oldest first, with
        who made it and when. Comments are not changes: get_ticket shows them.

        Args:
            key: the ticket, e.g. "SUP-12".
            field: only changes of this field, e.g. "status" or "assignee".

        Returns JSON {key, created, reporter, changes: [{at, author, field, old,
        new}]} (times are YYYY-MM-DDTHH:MM:SS)."""
        with closing(connect()) as conn:
            t = get(conn, key)
            rows = conn.execute("SELECT * FROM history WHERE ticket = ? ORDER BY at, id", (t["key"],)).fetchall()
        want = str(field or "").strip().lower().replace(" ", "_")
        want = "sprint_id" if want == "sprint" else want
        if want and want not in HISTORY_FIELDS:
            raise ToolError(f"field {field!r} is not tracked; fields: {', '.join(HISTORY_FIELDS)}")
        changes = [{"at": r["at"], "author": r["author"], "field": r["field"], "old": r["old"], "new": r["new"]}
                   for r in rows if not want or r["field"] == want]
        return _dumps({"key": t["key"], "created": t["created"], "reporter": t["reporter"], "changes": changes})

    # -- changing tickets -----------------------------------------------------------------

    @srv.tool(ADD)
    def create_ticket(project: str, title: str, type: str = "task", description: str = "",  # noqa: A002
                      priority: str = "P3", assignee: str | None = None, team: str | None = None,
                      labels: list[str] = [], estimate: int | None = None, sprint: str | int | None = None,  # noqa: B006
                      parent: str | None = None, due_date: str | None = None, customer: str = "",
                      component: str = "") -> str:
        """Create a ticket. It starts in the workflow's first status (New or To Do).

        Args:
            project: project key, e.g. "PRJ".
            title: short summary (not empty).
            type: bug, task, story, epic, question or incident.
            description: the details.
            priority: P1-P4 (or Critical/High/Medium/Low); default P3.
            assignee: username, email or name of the person to assign.
            team: the team that owns it (default: the assignee's team).
            labels: single-word labels, e.g. ["backend", "tech-debt"].
            estimate: story points, a whole number 0-100.
            sprint: sprint name or id (active or planned) to put it in.
            parent: key of the epic it belongs to.
            due_date: YYYY-MM-DD.
            customer, component: for support tickets, the customer and product component.

        Returns a confirmation with the new key."""
        t_title = _text(title, "title", required=True)
        kind = (type or "").strip().lower()
        if kind not in TYPES:
            raise ToolError(f"type must be one of: {', '.join(TYPES)}")
        pr = canonical_priority(priority)
        if pr is None:
            raise ToolError(f"priority {priority!r} must be one of {PRIORITY_TEXT}")
        labs = _labels(labels)
        est = _estimate(estimate) if estimate is not None else None
        due = _due(due_date) if due_date else None
        with closing(connect()) as conn, conn:
            proj = project_of(conn, project)
            who = user_of(conn, assignee) if assignee and assignee.strip() else None
            tm = team_of(conn, team) if team and team.strip() else None
            if who and tm is None:
                tm = conn.execute("SELECT team FROM users WHERE username = ?", (who,)).fetchone()[0]
            sid = sprint_of(conn, proj["key"], sprint) if sprint is not None else None
            par = epic_of(conn, proj["key"], parent) if parent else None
            if par and kind == "epic":
                raise ToolError("an epic cannot have a parent epic")
            number = proj["next_number"]
            key = f"{proj['key']}-{number}"
            now = tick(conn)
            conn.execute("UPDATE projects SET next_number = ? WHERE key = ?", (number + 1, proj["key"]))
            conn.execute(
                "INSERT INTO tickets VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (key, proj["key"], number, kind, t_title, str(description or "").strip(),
                 next(iter(WORKFLOWS[proj["kind"]])), None, pr, who, tm, meta(conn)["me"], _text(customer, "customer"),
                 _text(component, "component"), json.dumps(labs), due, est, sid, par, now, now))
            log(conn, key, "created", None, t_title, now)
        return f"Created {key} {t_title!r} ({kind}, {pr}{', assigned to ' + who if who else ''})."

    @srv.tool(SET)
    def update_ticket(key: str, status: str | None = None, resolution: str | None = None,
                      priority: str | None = None, title: str | None = None, description: str | None = None,
                      type: str | None = None, labels: list[str] | None = None,  # noqa: A002
                      add_labels: list[str] | None = None, remove_labels: list[str] | None = None,
                      estimate: int | None = None, sprint: str | int | None = None, parent: str | None = None,
                      due_date: str | None = None, component: str | None = None) -> str:
        """Change a ticket. Only the fields you pass change. Use assign_ticket to change the assignee or team.

        Args:
            key: the ticket, e.g. "SUP-12".
            status: new status; it must be an allowed next step in the workflow (get_ticket shows
                "allowed_transitions"). Moving a support ticket to Resolved or Closed needs a resolution;
                reopening clears it.
            resolution: Fixed, Answered, Duplicate, Won't Fix, Cannot Reproduce, Done or Won't Do.
            priority: P1-P4 (or Critical/High/Medium/Low).
            title, description, type: new values.
            labels: replace all labels with these. add_labels / remove_labels: change some.
            estimate: story points, a whole number 0-100.
            sprint: sprint name or id to move it to; "backlog" takes it out of its sprint.
            parent: key of the parent epic; "" removes it.
            due_date: YYYY-MM-DD; "" clears it.
            component: the product component.

        Returns what changed (old -> new)."""
        with closing(connect()) as conn, conn:
            t = get(conn, key)
            kind = kind_of(conn, t)
            flow = WORKFLOWS[kind]
            new = dict(t)
            if status is not None:
                st = canonical(status, flow)
                if st is None:
                    raise ToolError(f"{t['key']} has no status {status!r}; its workflow: {', '.join(flow)}")
                if st != t["status"] and st not in flow[t["status"]]:
                    raise ToolError(f"cannot move {t['key']} from {t['status']} to {st}; allowed next: "
                                    f"{', '.join(flow[t['status']])}")
                new["status"] = st
            res = None
            if resolution is not None and resolution.strip():
                res = canonical(resolution, RESOLUTIONS)
                if res is None:
                    raise ToolError(f"resolution {resolution!r} must be one of: {', '.join(RESOLUTIONS)}")
            done = DONE_STATUSES[kind]
            if new["status"] in done:
                if res is not None:
                    new["resolution"] = res
                elif new["status"] != t["status"]:
                    if kind == "support":
                        raise ToolError(f"moving {t['key']} to {new['status']} needs a resolution: "
                                        f"{', '.join(RESOLUTIONS[:5])}")
                    new["resolution"] = new["status"]
            else:
                if res is not None:
                    raise ToolError(f"a resolution is only set when the ticket is finished ({', '.join(done)})")
                new["resolution"] = None
            if priority is not None:
                new["priority"] = canonical_priority(priority)
                if new["priority"] is None:
                    raise ToolError(f"priority {priority!r} must be one of {PRIORITY_TEXT}")
            if title is not None:
                new["title"] = _text(title, "title", required=True)
            if description is not None:
                new["description"] = str(description).strip()
            if type is not None:
                if type.strip().lower() not in TYPES:
                    raise ToolError(f"type must be one of: {', '.join(TYPES)}")
                new["type"] = type.strip().lower()
            if labels is not None:
                new["labels"] = _labels(labels)
            if add_labels:
                new["labels"] = _labels([*new["labels"], *add_labels], "add_labels")
            if remove_labels:
                drop = {x.strip().lower() for x in remove_labels}
                new["labels"] = [x for x in new["labels"] if x.lower() not in drop]
            if estimate is not None:
                new["estimate"] = _estimate(estimate)
            if sprint is not None:
                new["sprint_id"] = sprint_of(conn, t["project"], sprint)
            if parent is not None:
                new["parent"] = epic_of(conn, t["project"], parent)
                if new["parent"] and new["type"] == "epic":
                    raise ToolError("an epic cannot have a parent epic")
            if due_date is not None:
                new["due_date"] = _due(due_date)
            if component is not None:
                new["component"] = _text(component, "component")
            fields = ("status", "resolution", "priority", "title", "description", "type", "labels", "estimate",
                      "sprint_id", "parent", "due_date", "component")
            changed = [f for f in fields if new[f] != t[f]]
            if changed:
                now = tick(conn)
                conn.execute(
                    "UPDATE tickets SET status = ?, resolution = ?, priority = ?, title = ?, description = ?, type = ?,"
                    " labels = ?, estimate = ?, sprint_id = ?, parent = ?, due_date = ?, component = ?, updated = ?"
                    " WHERE key = ?",
                    (new["status"], new["resolution"], new["priority"], new["title"], new["description"], new["type"],
                     json.dumps(new["labels"]), new["estimate"], new["sprint_id"], new["parent"], new["due_date"],
                     new["component"], now, t["key"]))
                for f in changed:
                    log(conn, t["key"], f, t[f], new[f], now)
            names = sprint_names(conn)
        def show(f, v):
            if f == "sprint_id":
                return names.get(v, "backlog") if v else "backlog"
            if f == "description":
                return f"{len(v or '')} characters"
            return v
        what = "; ".join(f"{'sprint' if f == 'sprint_id' else f}: {show(f, t[f])!r} -> {show(f, new[f])!r}"
                         for f in changed) or "nothing (values were already the same)"
        return f"Updated {t['key']}: {what}."

    @srv.tool(SET)
    def assign_ticket(key: str, assignee: str | None = None, team: str | None = None) -> str:
        """Assign a ticket to a person and/or a team. Pass assignee "" to unassign the person, team
        "" to clear the team. Assigning a person without naming a team also sets their team.

        Args:
            key: the ticket.
            assignee: username, email or name (see list_users).
            team: team name (see list_teams).

        Returns what changed."""
        if assignee is None and team is None:
            raise ToolError("give an assignee, a team, or both")
        with closing(connect()) as conn, conn:
            t = get(conn, key)
            new = dict(t)
            if team is not None:
                new["team"] = team_of(conn, team) if team.strip() else None
            if assignee is not None:
                if assignee.strip():
                    who = user_of(conn, assignee)
                    their_team = conn.execute("SELECT team FROM users WHERE username = ?", (who,)).fetchone()[0]
                    if team is None:
                        new["team"] = their_team or t["team"]
                    elif new["team"] and their_team != new["team"]:
                        raise ToolError(f"{who} is in team {their_team}, not {new['team']}; pick someone from "
                                        f"{new['team']} (list_users team=...) or leave assignee out")
                    new["assignee"] = who
                else:
                    new["assignee"] = None
            changed = [f for f in ("assignee", "team") if new[f] != t[f]]
            if changed:
                now = tick(conn)
                conn.execute("UPDATE tickets SET assignee = ?, team = ?, updated = ? WHERE key = ?",
                             (new["assignee"], new["team"], now, t["key"]))
                for f in changed:
                    log(conn, t["key"], f, t[f], new[f], now)
        what = "; ".join(f"{f}: {t[f]!r} -> {new[f]!r}" for f in changed) or "nothing (values were already the same)"
        return f"Updated {t['key']}: {what}."

    @srv.tool(ADD)
    def add_comment(key: str, body: str, internal: bool = False) -> str:
        """Comment on a ticket. Comments are public (the customer or reporter sees them) unless
        internal=true, which keeps them to the team.

        Returns a confirmation with the comment id."""
        text = str(body or "").strip()
        if not text:
            raise ToolError("body must not be empty")
        if len(text) > 10_000:
            raise ToolError("body must be at most 10000 characters")
        with closing(connect()) as conn, conn:
            t = get(conn, key)
            me = meta(conn)["me"]
            now = tick(conn)
            cur = conn.execute("INSERT INTO comments (ticket, author, body, internal, created) VALUES (?,?,?,?,?)",
                               (t["key"], me, text, int(bool(internal)), now))
            conn.execute("UPDATE tickets SET updated = ? WHERE key = ?", (now, t["key"]))
        return f"Added {'internal' if internal else 'public'} comment {cur.lastrowid} to {t['key']}."

    @srv.tool(ADD)
    def link_tickets(key: str, other: str, kind: str) -> str:
        """Link two tickets: "KEY KIND OTHER", e.g. key="SUP-20", kind="duplicates", other="SUP-7"
        (SUP-20 is a duplicate of SUP-7), or key="PRJ-3", kind="blocks", other="PRJ-9" (PRJ-3 must be
        done before PRJ-9).

        Args:
            key: the ticket the sentence starts with.
            other: the ticket it ends with.
            kind: duplicates, is duplicated by, blocks, is blocked by, or relates to.

        Returns a confirmation."""
        k = canonical(kind, [*LINK_KINDS, *INVERSE])
        if k is None:
            raise ToolError(f"kind {kind!r} must be one of: duplicates, is duplicated by, blocks, is blocked by, "
                            "relates to")
        with closing(connect()) as conn, conn:
            a, b = get(conn, key), get(conn, other)
            if a["key"] == b["key"]:
                raise ToolError("a ticket cannot be linked to itself")
            src, dst, stored = (b["key"], a["key"], INVERSE[k]) if k in INVERSE else (a["key"], b["key"], k)
            same = conn.execute("SELECT kind FROM links WHERE (source = ? AND target = ?) OR (source = ? AND target = ?)",
                                (src, dst, dst, src)).fetchall()
            if any(r[0] == stored for r in same):
                return f"{a['key']} already {k} {b['key']}; nothing changed."
            now = tick(conn)
            conn.execute("INSERT INTO links (source, target, kind, created) VALUES (?,?,?,?)", (src, dst, stored, now))
            log(conn, src, "link", None, f"{stored} {dst}", now)
        return f"Linked: {a['key']} {k} {b['key']}."

    @srv.tool(SET)
    def unlink_tickets(key: str, other: str) -> str:
        """Remove every link between two tickets. Returns how many were removed."""
        with closing(connect()) as conn, conn:
            a, b = get(conn, key), get(conn, other)
            n = conn.execute("DELETE FROM links WHERE (source = ? AND target = ?) OR (source = ? AND target = ?)",
                             (a["key"], b["key"], b["key"], a["key"])).rowcount
            if n:
                log(conn, a["key"], "unlink", b["key"], None, tick(conn))
        return f"Removed {n} link(s) between {a['key']} and {b['key']}."

    return srv


build_server = server_builder(make_app)
