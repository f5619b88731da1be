"""Confinement that symlinks, FIFOs and races cannot break.

The agent has a real shell on its workspace, so it can leave links there (to ``/``, to
``/proc/self/cwd``, to ``/dev/zero``, to a host file such as another episode's World), FIFOs
and dangling links, nested anywhere. No app tool may follow one: nothing outside the
workspace is read back or written, and every refusal is an error the agent can read.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import re
import shutil
import socket
import uuid
from pathlib import Path

import pytest
from mcp import Client

from longhorizon.apps.docs.state import new_document, save_document
from longhorizon.apps.files.server import build_server as files_server
from longhorizon.apps.sheets.state import save_workbook
from longhorizon.apps.slides.state import add_slide, new_presentation, save_presentation
from longhorizon.core.policy import assistant, tool_call
from longhorizon.core.task import ToolCall
from longhorizon.core.world import World, WorldCache
from longhorizon.env.episode import Limits, play
from longhorizon.policies.scripted import OraclePolicy
from longhorizon.tasks.registry import get_task

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None and not os.access("/usr/bin/bwrap", os.X_OK),
                                 reason="bubblewrap (bwrap) is not installed")

SUFFIXES = (".txt", ".docx", ".xlsx", ".pptx")
PROBED_APPS = ("files", "docs", "sheets", "slides", "search")
"""Every tool of these apps must be probed; of mail, every tool taking a workspace path."""
MAIL_PATH_PARAMS = {"path", "dest_path", "attachments"}
"""Mail's workspace-path parameters (its ``folder`` is a mailbox folder, not a path)."""
HOST_PASSWD = "root:x:0:0"
CRASH = re.compile(r"Error executing tool \S+")
"""What the MCP server sends for an unexpected exception: no text the agent can act on."""


def plant_host_files(folder: Path, marker: str) -> None:
    """A text file, a document, a workbook and a deck outside any workspace, each holding ``marker``."""
    folder.mkdir(parents=True)
    (folder / "secret.txt").write_text(f"{marker}\n")
    save_document(new_document(marker), folder / "secret.docx")
    import openpyxl

    wb = openpyxl.Workbook()
    wb.active["A1"] = marker
    save_workbook(wb, folder / "secret.xlsx")
    prs = new_presentation()
    add_slide(prs, marker, [marker], "title_and_content", marker)
    save_presentation(prs, folder / "secret.pptx")
    (folder / "deep").mkdir()
    (folder / "deep" / "secret.txt").write_text(f"{marker}\n")


def snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry under ``folder`` (links not followed): kind, bytes or link target, mode, mtime."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            if p.is_symlink():
                out[str(p)] = ("link", os.readlink(p))
            elif p.is_dir():
                out[str(p)] = ("dir", st.st_mode)
            else:
                out[str(p)] = ("file", p.read_bytes(), st.st_mode, st.st_mtime_ns)
    return out


def world_files(world: World):
    """(path, bytes) of every regular file in the World, links never followed."""
    for dirpath, _, filenames in os.walk(world.root):
        for name in filenames:
            p = Path(dirpath) / name
            if not p.is_symlink() and p.is_file():
                yield p, p.read_bytes()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class Scripted:
    """A policy that asks ``plan(tools, messages)`` for its next batch of calls each turn
    (None: finish)."""

    name = "prober"

    def __init__(self, plan):
        self.plan = plan
        self.n = 0

    def describe(self):
        return {"policy": self.name}

    async def act(self, messages, tools, ctx):
        batch = await self.plan(tools, messages)
        if not batch:
            return assistant("done")
        calls = []
        for name, args in batch:
            self.n += 1
            calls.append(tool_call(f"c{self.n}", name, json.dumps(args)))
        return assistant("", calls)


# -- the probe: every path-taking tool at every kind of link -------------------------------------


def plant_script(host: Path) -> str:
    """Shell commands (run in the sandbox) that put links and FIFOs in the workspace. Link
    targets are host paths: inside the sandbox they dangle, to the app process they are real."""
    lines = [
        "set -e",
        "rm -rf root etc cwd passwd dangling hostdir nest trap trap2 zero fifo secret* zero.* fifo.* "
        "dangling.* cwdsecret* moved-* copied-* copies mv-*.txt",
        "ln -s / root", "ln -s /etc etc", "ln -s /proc/self/cwd cwd", "ln -s /etc/passwd passwd",
        "ln -s /dev/zero zero", "mkfifo fifo", "ln -s /nonexistent dangling", f"ln -s {host} hostdir",
        "mkdir -p nest/deep trap/inner trap2",
        "ln -s / nest/deep/root", f"ln -s {host} nest/deep/hostdir", "ln -s /etc/passwd nest/passwd",
        f"ln -s {host} trap/hostdir", "mkfifo trap/inner/fifo",
        "ln -s /etc/passwd trap2/passwd", f"ln -s {host} trap2/hostdir", "mkfifo trap2/fifo",
        "for i in $(seq 0 40); do echo move-me > mv-$i.txt; done",
    ]
    for s in SUFFIXES:
        lines += [
            f"ln -s {host}/secret{s} secret{s}", f"ln -s {host}/secret{s} nest/deep/secret{s}",
            f"ln -s /dev/zero zero{s}", f"mkfifo fifo{s}", f"mkfifo nest/deep/fifo{s}",
            f"ln -s {host}/missing{s} dangling{s}", f"ln -s /proc/self/cwd/secret{s} cwdsecret{s}",
            f"ln -s {host}/secret{s} trap/inner/secret{s}",
        ]
    return "\n".join(lines)


def targets(host: Path, suffix: str = ".txt") -> tuple[list[str], list[str]]:
    """(paths whose every link leads into ``host`` or to a FIFO: safe to hand to tools that
    write or delete, paths that are only ever read)."""
    h = str(host).lstrip("/")
    s = suffix
    into_host = [
        f"secret{s}", f"nest/deep/secret{s}", f"hostdir/secret{s}", f"hostdir/new{s}", f"hostdir/deep/secret{s}",
        f"root/{h}/secret{s}", f"cwd/secret{s}", f"cwdsecret{s}", f"fifo{s}", f"nest/deep/fifo{s}",
        f"dangling{s}", f"nest/deep/hostdir/secret{s}", f"trap/inner/secret{s}",
    ]
    read_only = [f"zero{s}", f"etc/x{s}", f"root/etc/x{s}"]
    if s == ".txt":
        into_host += ["hostdir", "hostdir/deep", f"root/{h}", "cwd", "fifo", "nest/deep/hostdir", "trap",
                      "trap/inner", "trap/inner/fifo"]
        read_only += ["root", "root/etc/passwd", "etc", "etc/passwd", "passwd", "zero", "dangling", "nest",
                      "nest/deep", "nest/deep/root/etc/passwd", "nest/passwd", "trap2", ".", "/"]
    return into_host, read_only


def probes(host: Path, sent_id: int) -> dict[str, list[dict] | list[list[dict]]]:
    """Tool name -> the calls to make (or groups of calls, the links planted afresh before
    each). Writers and deleters only get paths leading into ``host`` (so a broken tool would
    change the snapshot, never the machine running the test)."""
    w, r = targets(host)
    every = w + r
    copy_src = w + ["passwd", "etc/passwd", "root/etc/passwd", "nest/passwd", "trap2", "dangling"]
    p: dict[str, list[dict]] = {
        "files__list_dir": [{"path": t, "recursive": True} for t in every] + [{"path": t} for t in every],
        "files__read_file": [{"path": t} for t in every],
        "files__write_file": [{"path": t, "content": "x"} for t in w],
        "files__make_dir": [{"path": t} for t in w] + [{"path": f"{t}/sub"} for t in w],
        "files__move": [[{"src": t, "dst": f"moved-{i}"} for i, t in enumerate(w)],
                        [{"src": f"mv-{i}.txt", "dst": t} for i, t in enumerate(w)],
                        [{"src": f"mv-{i}.txt", "dst": f"{t}/mv.txt"} for i, t in enumerate(w)]],
        "files__copy": [[{"src": t, "dst": f"copied-{i}"} for i, t in enumerate(copy_src)],
                        [{"src": "plain.txt", "dst": t} for t in w]],
        "files__delete": [{"path": t, "recursive": True} for t in w],
        "files__search": [{"query": q, "path": t} for t in every for q in ("secret", "root:x")],
        "files__file_info": [{"path": t} for t in every],
        "search__search": [{"query": q} for q in ("secret", "root", "passwd")],
        "search__get_document": [{"doc_id": d} for d in (str(host / "secret.txt"), "../../secret.txt", "/etc/passwd")],
        "search__list_sources": [{}],
        "mail__send_message": [{"to": ["a@example.com"], "subject": "s", "body": "b", "attachments": [t]}
                               for t in copy_src + r],
        "mail__reply": [{"message_id": sent_id, "body": "b", "attachments": [t]} for t in copy_src + r],
        "mail__save_attachment": [{"message_id": sent_id, "filename": "plain.txt", "dest_path": t}
                                  for t in w + [f"{t}/" for t in w]],
    }
    for app, s, ro, rw in [
        ("docs", ".docx",
         {"read_document": {}, "find_text": {"query": "secret"}},
         {"append_paragraph": {"text": "x"}, "insert_paragraph": {"index": 0, "text": "x"},
          "set_paragraph": {"index": 0, "text": "x"}, "delete_paragraph": {"index": 0},
          "replace_text": {"old": "secret", "new": "x"}, "add_table": {"rows": [["a"]]},
          "set_table_cell": {"index": 0, "row": 0, "column": 0, "text": "x"}, "delete_table": {"index": 0},
          "add_comment": {"index": 0, "text": "x"}, "create_document": {"title": "x"}}),
        ("sheets", ".xlsx",
         {"list_sheets": {}, "read_range": {"sheet": "Sheet"}},
         {"write_cells": {"sheet": "Sheet", "cells": {"A1": "x"}}, "create_workbook": {},
          "write_rows": {"sheet": "Sheet", "start_cell": "A1", "rows": [["x"]]}, "add_sheet": {"name": "New"},
          "rename_sheet": {"old": "Sheet", "new": "Other"}, "clear_range": {"sheet": "Sheet", "range": "A1:B2"}}),
        ("slides", ".pptx",
         {"list_slides": {}, "read_slide": {"index": 0}},
         {"create_deck": {}, "add_slide": {"title": "x"}, "update_slide": {"index": 0, "title": "x"},
          "delete_slide": {"index": 0}, "move_slide": {"index": 0, "new_index": 0}}),
    ]:
        ws, rs = targets(host, s)
        for tool, extra in ro.items():
            p[f"{app}__{tool}"] = [{"path": t, **extra} for t in ws + rs]
        for tool, extra in rw.items():
            p[f"{app}__{tool}"] = [{"path": t, **extra} for t in ws]
    p["docs__list_documents"] = [{"folder": t} for t in every]
    p["docs__copy_document"] = [
        [{"source": t, "path": f"copies/{i}.docx"} for i, t in enumerate(sum(targets(host, ".docx"), []))],
        [{"source": "plain.docx", "path": t} for t in targets(host, ".docx")[0]]]
    return p


def path_taking(tool: dict) -> bool:
    return bool(MAIL_PATH_PARAMS & set(tool["function"]["parameters"].get("properties", {})))


@needs_bwrap
async def test_no_tool_follows_a_link_the_agent_made(tmp_path, monkeypatch):
    marker = f"LH-SECRET-{uuid.uuid4().hex}"
    host = tmp_path / "host"
    plant_host_files(host, marker)
    monkeypatch.chdir(host)  # /proc/self/cwd of the app process leads to the secret too
    before = snapshot(host)
    host_hashes = {sha(p.read_bytes()) for p in host.rglob("*") if p.is_file()}
    host_hashes.add(sha(Path("/etc/passwd").read_bytes()))
    nonexistent_before = os.path.lexists("/nonexistent")

    base = get_task("entity_due_diligence-000000")  # mail, search, sheets, files
    task = dataclasses.replace(base, apps=tuple(dict.fromkeys(base.apps + ("shell", "docs", "slides"))))
    cache = WorldCache(tmp_path / "worlds")
    world, digest = cache.fork(task)
    (world.workspace / "plain.txt").write_text("plain text\n")
    (world.workspace / "control.txt").write_text("CONTROL-MARKER\n")
    save_document(new_document("plain"), world.workspace / "plain.docx")
    outside_before = sorted(p.name for p in tmp_path.iterdir())

    plant = plant_script(host)
    state = {"step": 0, "todo": None}
    covered: set[str] = set()
    unprobed: list[str] = []

    async def plan(tools, messages):
        step = state["step"]
        state["step"] += 1
        if step == 0:
            return [("shell__run", {"command": plant}),
                    ("mail__send_message", {"to": ["a@example.com"], "subject": "plain", "body": "b",
                                            "attachments": ["plain.txt"]}),
                    ("files__read_file", {"path": "control.txt"})]
        if state["todo"] is None:
            sent = next(m["content"] for m in messages if m["role"] == "tool" and "Sent message" in m["content"])
            table = probes(host, int(re.search(r"Sent message (\d+)", sent).group(1)))
            names = [t["function"]["name"] for t in tools]
            for t in tools:
                name = t["function"]["name"]
                app = name.split("__")[0]
                if (app in PROBED_APPS or (app == "mail" and path_taking(t))) and name not in table:
                    unprobed.append(name)
            state["todo"] = [(name, group) for name in names if name in table
                             for group in (table[name] if isinstance(table[name][0], list) else [table[name]])]
        if not state["todo"]:
            return None
        name, calls = state["todo"].pop(0)
        covered.add(name)
        return [("shell__run", {"command": plant})] + [(name, a) for a in calls]

    traj = await play(task, Scripted(plan), world, world_hash=digest,
                      limits=Limits(max_turns=200, max_tool_calls=20_000, max_result_chars=200_000))

    assert not unprobed, f"tools that take workspace paths but are not probed: {unprobed}"
    assert traj.status == "completed" and traj.grade is not None
    assert {"files__read_file", "docs__read_document", "sheets__read_range", "slides__read_slide",
            "mail__save_attachment", "search__search"} <= covered
    assert "CONTROL-MARKER" in traj.tool_calls[2].result  # the probe can see what a tool returns
    for c in traj.tool_calls:
        if c.name == "shell__run":
            assert c.result.startswith("exit code: 0"), c.result
            continue
        assert marker not in c.result and HOST_PASSWD not in c.result, (c.name, c.arguments, c.result)
        assert not CRASH.fullmatch(c.result.strip()), f"{c.name}({c.arguments}) crashed"
    refused = [c for c in traj.tool_calls if c.is_error and "symbolic link" in c.result]
    assert refused and all("file tools do not follow links" in c.result for c in refused)

    assert snapshot(host) == before, "something outside the workspace changed"
    assert sorted(p.name for p in tmp_path.iterdir()) == outside_before
    assert os.path.lexists("/nonexistent") == nonexistent_before
    for p, data in world_files(world):  # nothing from outside was copied in (workspace, mail state, ...)
        assert marker.encode() not in data and HOST_PASSWD.encode() not in data, p
        assert sha(data) not in host_hashes, f"{p} is a copy of a host file"
    cache.close()


# -- two episodes at once: neither reaches the other, nor a run folder ---------------------------


@needs_bwrap
async def test_concurrent_episodes_cannot_reach_each_other_or_a_run_folder(tmp_path):
    task = get_task("entity_due_diligence-000000")
    task = dataclasses.replace(task, apps=tuple(dict.fromkeys(task.apps + ("shell",))))
    cache = WorldCache()  # where runs put them: /dev/shm when it is writable
    worlds = [cache.fork(task) for _ in range(2)]
    secrets_ = [f"LH-EPISODE-{i}-{uuid.uuid4().hex}" for i in range(2)]
    run_secret = f"LH-RUN-{uuid.uuid4().hex}"
    run = tmp_path / "runs" / "run-1"
    run.mkdir(parents=True)
    (run / "trajectories.jsonl").write_text(json.dumps({"note": run_secret}) + "\n")
    for (w, _), s in zip(worlds, secrets_):
        (w.workspace / "report.csv").write_text(f"id,value\n1,{s}\n")
        (w.state / "private.txt").write_text(f"{s}\n")
    both_open = asyncio.Barrier(2)
    both_probed = asyncio.Barrier(2)

    def probe_calls(other: World) -> list[tuple[str, dict]]:
        o_ws, o_root, jsonl = other.workspace, other.root, run / "trajectories.jsonl"
        host_paths = [f"{o_ws}/report.csv", f"{o_root}/state/private.txt", f"{o_root}/state/mail.sqlite", str(jsonl)]
        shell = (f"cat {' '.join(host_paths)}; find {o_root} {run} {cache.base}; ls -la /dev/shm /tmp; "
                 f"ln -s {o_ws}/report.csv peer.csv; ln -s {o_root} peer; ln -s {jsonl} run.jsonl; "
                 f"ln -s {o_ws}/report.csv peer.xlsx; ln -s {run} runs; cat peer.csv run.jsonl peer/state/*; true")
        calls = [("shell__run", {"command": shell})]
        for p in host_paths + ["peer.csv", "peer/workspace/report.csv", "peer/state/private.txt", "run.jsonl",
                               "runs/trajectories.jsonl", f"../../{o_root.name}/workspace/report.csv"]:
            calls += [("files__read_file", {"path": p}), ("files__file_info", {"path": p}),
                      ("files__copy", {"src": p, "dst": "stolen.txt"}),
                      ("files__search", {"query": "LH-", "path": p}),
                      ("mail__send_message", {"to": ["x@example.com"], "subject": "s", "body": "b", "attachments": [p]}),
                      ("sheets__list_sheets", {"path": p.rsplit(".", 1)[0] + ".xlsx"})]
        for p in [".", "peer", "runs", str(o_root), str(cache.base), str(run)]:
            calls += [("files__list_dir", {"path": p, "recursive": True}), ("files__search", {"query": "LH-", "path": p})]
        calls += [("files__read_file", {"path": "report.csv"})]  # its own secret: the probe can see
        return calls

    def policy(i: int):
        state = {"step": 0}

        async def plan(tools, messages):
            state["step"] += 1
            if state["step"] == 1:
                await both_open.wait()  # both episodes' sessions are open from here on
                return probe_calls(worlds[1 - i][0])
            if state["step"] == 2:
                await both_probed.wait()
            return None

        return Scripted(plan)

    trajs = await asyncio.gather(*(play(task, policy(i), w, world_hash=d, sample=i,
                                        limits=Limits(max_tool_calls=1000, max_result_chars=100_000))
                                   for i, (w, d) in enumerate(worlds)))
    for i, traj in enumerate(trajs):
        assert traj.status == "completed"
        assert secrets_[i] in traj.tool_calls[-1].result
        forbidden = [secrets_[1 - i], run_secret]
        for c in traj.tool_calls:
            assert not any(s in c.result for s in forbidden), (i, c.name, c.arguments, c.result)
            assert not CRASH.fullmatch(c.result.strip()), (c.name, c.arguments)
        for _, data in world_files(worlds[i][0]):
            assert not any(s.encode() in data for s in forbidden)
    assert json.loads((run / "trajectories.jsonl").read_text()) == {"note": run_secret}
    cache.close()


# -- grading never follows what the agent left -----------------------------------------------------


def cheat(task):
    """The oracle for downloads_cleanup, except that invoices stay where they are and a link
    to each is put where it should have been filed; then a FIFO where a note belongs and a link
    to /dev/zero instead of a file that must stay in place."""
    notes, other = task.data["notes"], task.data["near_duplicate"]  # the edited copy must stay put
    note = sorted(notes)[0]

    def gen():
        oracle = task.oracle()
        result = None
        try:
            while True:
                call = oracle.send(result) if result is not None else next(oracle)
                if call.name == "files__move" and call.arguments["dst"].startswith("Finance/Invoices/"):
                    src, dst = call.arguments["src"], call.arguments["dst"]
                    up = "../" * dst.count("/")
                    call = ToolCall("shell__run", {"command": f"ln -s '{up}{src}' '{dst}'"})
                result = yield call
                result = result or ""
        except StopIteration:
            pass
        yield ToolCall("shell__run", {"command": f"rm 'Notes/{notes[note]}/{note}' && mkfifo 'Notes/{notes[note]}/{note}' "
                                                 f"&& rm 'Downloads/{other}' && ln -s /dev/zero 'Downloads/{other}' "
                                                 "&& mkfifo Downloads/pipe && ln -s /etc/passwd Finance/passwd.txt"})
        return "done"

    return gen


@needs_bwrap
async def test_grading_drops_links_and_fifos_so_they_neither_count_nor_hang(tmp_path):
    base = get_task("downloads_cleanup-000001")
    if not {"invoices", "notes", "near_duplicate"} <= set(base.data):
        pytest.skip("downloads_cleanup no longer exposes invoices/notes/near_duplicate in its data")
    task = dataclasses.replace(base, apps=base.apps + ("shell",))
    task.perturbations = {**task.perturbations, "cheat": cheat(task)}
    world = World.build(tmp_path / "world", task.build)
    traj = await play(task, OraclePolicy(perturb="cheat"), world)
    results = {r.id: r for r in traj.grade.results}
    assert not results["invoices_filed"].passed  # the links did not count as filed invoices
    assert not results["notes_filed"].passed and not results["others_left_in_place"].passed
    removed = traj.provenance["removed_before_grading"]
    kinds = " ".join(removed)
    assert "(fifo)" in kinds and "link -> /dev/zero" in kinds and "link -> /etc/passwd" in kinds
    assert sum("Finance/Invoices/" in r for r in removed) == len(task.data["invoices"])
    assert not any(p.is_symlink() or not (p.is_file() or p.is_dir()) for p in world.workspace.rglob("*"))


def test_a_linked_output_counts_neither_with_nor_without_the_cleanup(tmp_path):
    """Graders read outputs without following a last-component link (tasks.common.same_bytes and
    output_bytes), and grading drops links besides: a link to an input never fakes an output."""
    task = get_task("downloads_cleanup-000001")
    if "invoices" not in task.data:
        pytest.skip("downloads_cleanup no longer exposes invoices in its data")
    world = World.build(tmp_path / "world", task.build)
    for n, year in task.data["invoices"].items():
        dest = world.workspace / "Finance" / "Invoices" / str(year) / n
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.symlink_to(world.workspace / "Downloads" / n)
    from longhorizon.core.trajectory import Trajectory

    traj = Trajectory(episode_id="x", task_id=task.id, family=task.family, category=task.category,
                      split=task.split, seed=task.seed, sample=0, provenance={}, messages=[])
    faked = {r.id: r.passed for r in task.grade(world, traj).results}
    removed = world.drop_links_and_specials()
    honest = {r.id: r.passed for r in task.grade(world, traj).results}
    assert not faked["invoices_filed"] and not honest["invoices_filed"]
    assert len(removed) == len(task.data["invoices"])


def test_drop_links_and_specials_walks_without_following(tmp_path):
    world = World.build(tmp_path / "world", lambda root: None)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("keep")
    ws = world.workspace
    (ws / "a" / "b").mkdir(parents=True)
    (ws / "a" / "b" / "real.txt").write_text("real")
    (ws / "out").symlink_to(outside)
    (ws / "a" / "b" / "file-link").symlink_to(outside / "keep.txt")
    (ws / "dangling").symlink_to("/nonexistent")
    os.mkfifo(ws / "a" / "fifo")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(ws / "a" / "sock"))
    sock.close()
    (ws / "locked").mkdir()
    os.mkfifo(ws / "locked" / "hidden-fifo")
    os.chmod(ws / "locked", 0o300)  # listing refused, opening by name still possible
    os.symlink(b"/etc/\xff", os.fsencode(ws) + b"/not-utf8-\xff")
    removed = world.drop_links_and_specials()
    assert removed == ["a/b/file-link (link -> " + str(outside / "keep.txt") + ")", "a/fifo (fifo)",
                       "a/sock (socket)", "dangling (link -> /nonexistent)", "locked/hidden-fifo (fifo)",
                       "not-utf8-\ufffd (link -> /etc/\ufffd)", f"out (link -> {outside})"]
    json.dumps(removed).encode("utf-8")  # provenance stays valid UTF-8 JSON
    assert (ws / "a" / "b" / "real.txt").read_text() == "real" and (ws / "locked").is_dir()
    assert (outside / "keep.txt").read_text() == "keep"
    assert world.drop_links_and_specials() == []


# -- the link policy, tool by tool -------------------------------------------------------------


async def call(c, name, **args):
    r = await c.call_tool(name, args)
    return r.content[0].text, r.is_error


async def test_links_are_listed_as_links_and_acted_on_as_themselves(world, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret")
    ws = world.workspace
    (ws / "dir").mkdir()
    (ws / "dir" / "note.txt").write_text("hello")
    (ws / "dir" / "out").symlink_to(outside)
    (ws / "dir" / "gone").symlink_to("/nonexistent")
    os.mkfifo(ws / "dir" / "pipe")
    async with Client(files_server(world)) as c:
        text, err = await call(c, "list_dir", path="dir")
        assert not err and text.splitlines() == [
            "dir/gone -> /nonexistent  (link)", "dir/note.txt  (5 bytes)", "dir/out -> " + str(outside) + "  (link)",
            "dir/pipe  (fifo)"]
        text, err = await call(c, "file_info", path="dir/out")
        assert not err and json.loads(text)["kind"] == "link" and json.loads(text)["target"] == str(outside)
        text, err = await call(c, "write_file", path="dir/out/new.txt", content="x")
        assert err and "'dir/out' is a symbolic link" in text
        text, err = await call(c, "copy", src="dir", dst="copy")
        assert not err and "copied as links" in text and "skipped" in text
        assert os.readlink(ws / "copy" / "out") == str(outside) and (ws / "copy" / "note.txt").read_text() == "hello"
        assert not (ws / "copy" / "pipe").exists()
        _, err = await call(c, "move", src="dir/out", dst="moved-link")
        assert not err and (ws / "moved-link").is_symlink() and os.readlink(ws / "moved-link") == str(outside)
        text, err = await call(c, "delete", path="moved-link")
        assert not err and "link only" in text and not (ws / "moved-link").is_symlink()
        _, err = await call(c, "delete", path="copy", recursive=True)
        assert not err and not (ws / "copy").exists()
    assert (outside / "secret.txt").read_text() == "top secret"


async def test_a_folder_swapped_for_a_link_midway_is_refused_not_followed(world, tmp_path, monkeypatch):
    """The race a check-then-open design loses: the path is fine when looked at, and a link
    by the time it is opened. Here the swap happens right after the tool's own existence check."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "a.txt").write_text("outside secret")
    ws = world.workspace
    (ws / "docs").mkdir()
    (ws / "docs" / "a.txt").write_text("inside")
    from longhorizon.apps import common

    real_exists = common.WorkspacePath.exists

    def exists_then_swap(self):
        ok = real_exists(self)
        if self.rel == "docs/a.txt":
            shutil.rmtree(ws / "docs")
            (ws / "docs").symlink_to(outside)
        return ok

    monkeypatch.setattr(common.WorkspacePath, "exists", exists_then_swap)
    async with Client(files_server(world)) as c:
        text, err = await call(c, "read_file", path="docs/a.txt")
    assert err and "symbolic link" in text and "outside secret" not in text
