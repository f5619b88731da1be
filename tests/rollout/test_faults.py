"""Injected faults during real runs: the model endpoint (the OpenAI-compatible stand-in on
loopback) failing with 500s, hanging, or dropping the connection mid-response; an app server
raising mid-episode; the disk filling up while Trajectories are written. Each ends as a
retried infrastructure error or a clean resume: the run never crashes, no episode is lost or
written twice, and no infrastructure failure is graded as the agent's."""

import contextlib
import os
import subprocess
from collections import Counter

import pytest
from mcp.shared.exceptions import MCPError

from longhorizon.evaluate.runs import run_episodes
from longhorizon.policies.openai_client import OpenAIPolicy
from longhorizon.policies.scripted import OraclePolicy
from longhorizon.rollout.runner import RunSpec
from longhorizon.rollout.store import read_jsonl
from longhorizon.tasks.registry import tasks_for
from longhorizon.testing import OracleBrain, StandinLLM

FAMILY = "downloads_cleanup"


def tasks(n=4):
    return tasks_for("train", n, [FAMILY])


def spec(policy, n=4):
    return RunSpec(policy=policy.describe(), split="train", seeds=n, families=[FAMILY])


def episodes_once(out):
    """The episode ids of the run's log, asserting each appears once (and the log parses strictly)."""
    counts = Counter(r["episode_id"] for r in read_jsonl(out / "trajectories.jsonl"))
    assert set(counts.values()) <= {1}, counts
    return set(counts)


def client(srv, **kw):
    kw.setdefault("backoff_s", 0.0)
    return OpenAIPolicy(base_url=srv.base_url, model=srv.model, api_key="", **kw)


# -- the model endpoint --------------------------------------------------------------------

@pytest.mark.parametrize("fault", ["500", "stall", "drop"])
async def test_model_endpoint_faults_are_retried_and_the_episodes_pass(fault, tmp_path):
    ts = tasks()
    with StandinLLM(OracleBrain(ts)) as srv:
        {"500": lambda: srv.fail_next(3, 500, "internal server error"),
         "stall": lambda: srv.stall_next(2), "drop": lambda: srv.drop_next(3)}[fault]()
        # Only a stall needs the read timeout to fire; it is long enough that a healthy answer from
        # the stand-in (a thread of this busy process) never reaches it, or one more retry is counted.
        pol = client(srv, timeout_s=5.0 if fault == "stall" else 120.0, max_retries=4)
        summary = await run_episodes(ts, pol, spec(pol), tmp_path, concurrency=2, progress=False)
        turns = sum(len(r["turns"]) for r in read_jsonl(tmp_path / "trajectories.jsonl"))
        assert len(srv.requests) == turns + {"500": 3, "stall": 2, "drop": 3}[fault], "each fault cost one retry"
    assert summary["complete"] and summary["infra_errors"] == 0 and summary["overall"]["pass@1"] == 1.0
    assert episodes_once(tmp_path) == {f"{t.id}#0" for t in ts}


@pytest.mark.parametrize("fault", ["500", "stall", "drop"])
async def test_a_model_endpoint_that_stays_down_is_infra_then_a_resume_finishes(fault, tmp_path):
    ts = tasks(3)
    with StandinLLM(OracleBrain(ts)) as srv:
        {"500": lambda: srv.fail_next(1000, 500), "stall": lambda: srv.stall_next(1000),
         "drop": lambda: srv.drop_next(1000)}[fault]()
        pol = client(srv, timeout_s=0.5, max_retries=1)
        summary = await run_episodes(ts, pol, spec(pol, 3), tmp_path, concurrency=3, progress=False)
    assert summary["overall"]["episodes"] == 0, "no episode was graded as the agent's failure"
    assert summary["infra_errors"] == 3 and not summary["complete"]
    errors = read_jsonl(tmp_path / "infra_errors.jsonl")
    assert sorted(e["episode_id"] for e in errors) == sorted(f"{t.id}#0" for t in ts)
    assert all(e["error"].startswith("InfraError:") and "after 2 attempts" in e["error"] for e in errors)
    with StandinLLM(OracleBrain(ts), port=srv.port) as healthy:  # back up, at the same address
        pol = client(healthy)
        summary = await run_episodes(ts, pol, spec(pol, 3), tmp_path, progress=False)
    assert summary["complete"] and summary["infra_errors"] == 0 and summary["overall"]["pass@1"] == 1.0
    assert episodes_once(tmp_path) == {f"{t.id}#0" for t in ts}


# -- an app server --------------------------------------------------------------------------

@pytest.fixture
def failing_files_app(monkeypatch):
    """The files app's in-process session for the World of ``victim`` raises ``error`` on its
    third tool call (the rollout path: ``make_app(world).session()``)."""
    import longhorizon.apps.files.server as files_server

    real = files_server.make_app
    plan = {}

    def make_app(world, **kwargs):
        app = real(world, **kwargs)
        if plan and f"/{plan['victim']}." in str(world.root):
            open_session = app.session

            def session(*args, **kwargs):
                s = open_session(*args, **kwargs)
                calls = {"n": 0}
                call_tool = s.call_tool

                async def failing(name, arguments=None):
                    calls["n"] += 1
                    if calls["n"] == 3:
                        raise plan["error"]
                    return await call_tool(name, arguments)

                s.call_tool = failing
                return s

            app.session = session
        return app

    monkeypatch.setattr(files_server, "make_app", make_app)
    return plan


@pytest.mark.parametrize("error", [MCPError(-32603, "the files backend is gone"), SystemExit(3)],
                         ids=["protocol-error", "exit"])
async def test_an_app_server_raising_mid_episode_is_infra_and_resumes(failing_files_app, error, tmp_path):
    ts = tasks(3)
    failing_files_app.update(victim=ts[1].id, error=error)
    summary = await run_episodes(ts, OraclePolicy(), spec(OraclePolicy(), 3), tmp_path, concurrency=3, progress=False)
    assert episodes_once(tmp_path) == {f"{ts[0].id}#0", f"{ts[2].id}#0"}, "the others went on and passed"
    assert summary["overall"]["pass@1"] == 1.0 and summary["infra_errors"] == 1
    [err] = read_jsonl(tmp_path / "infra_errors.jsonl")
    assert err["episode_id"] == f"{ts[1].id}#0"
    assert err["error"] == ("MCPError: the files backend is gone" if isinstance(error, MCPError) else "SystemExit: 3")
    failing_files_app.clear()  # the app is healthy again
    summary = await run_episodes(ts, OraclePolicy(), spec(OraclePolicy(), 3), tmp_path, progress=False)
    assert summary["complete"] and summary["overall"]["pass@1"] == 1.0
    assert episodes_once(tmp_path) == {f"{t.id}#0" for t in ts}


# -- the disk -------------------------------------------------------------------------------

@contextlib.contextmanager
def tiny_disk(path, size="1m"):
    """A real tmpfs of ``size`` mounted at ``path`` (needs root, as CI and this machine have)."""
    path.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs to fill up needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                          capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


async def test_a_full_disk_while_writing_trajectories_ends_cleanly_and_resumes(tmp_path):
    ts = tasks(5)
    s = spec(OraclePolicy(), 5)
    await run_episodes(ts[:1], OraclePolicy(), s, tmp_path / "probe", progress=False)
    line = (tmp_path / "probe" / "trajectories.jsonl").stat().st_size  # one episode's line, in bytes
    with tiny_disk(tmp_path / "disk") as disk:
        out = disk / "run"
        out.mkdir()
        free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
        with open(disk / "filler", "wb") as f:  # leave room for about two and a half episodes
            f.write(b"\0" * (free - int(2.5 * line) - 3 * 4096))
        summary = await run_episodes(ts, OraclePolicy(), s, out, concurrency=1, progress=False)
        written = episodes_once(out)  # strict: no torn line left where the disk ran out
        assert 1 <= len(written) < len(ts) and not summary["complete"]
        assert not any(p.name.endswith(".tmp") for p in out.iterdir())
        (disk / "filler").unlink()  # room again: the rerun resumes
        summary = await run_episodes(ts, OraclePolicy(), s, out, progress=False)
        assert summary["complete"] and summary["overall"]["pass@1"] == 1.0
        assert episodes_once(out) == {f"{t.id}#0" for t in ts}
