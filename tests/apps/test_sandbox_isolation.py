"""The shell sandbox learns nothing of the host's paths, and an episode's bytes are bounded.

Commands run over a World forked by a real WorldCache (its workspace on a tmpfs of its own
when the process may mount: root, as here and in CI) while the test process sits in a run
folder with the paths in its environment, and every way an attacker would look is tried:
process arguments and environments, mount tables, cgroups, fds, links, memory.
"""

import json
import os
import sys
from pathlib import Path

import pytest
from mcp import Client

import longhorizon
from longhorizon.apps.shell.server import build_server
from longhorizon.core import world as world_mod
from longhorizon.core.world import WorldCache

ROOT = os.geteuid() == 0
needs_mount = pytest.mark.skipif(not ROOT, reason="a workspace tmpfs needs root; without it mountinfo "
                                                  "shows the workspace's path within its filesystem")


class FakeTask:
    id = "fake-000001"

    @staticmethod
    def build(root):
        (root / "workspace" / "notes.txt").write_text("hello\n")


@pytest.fixture
def episode(tmp_path, monkeypatch):
    """(world, secrets): a fork, and the host strings no sandbox output may contain."""
    monkeypatch.setenv("LONGHORIZON_WORLDS_DIR", str(tmp_path / "worlds"))
    run_dir = tmp_path / "runs" / "probe-run"
    run_dir.mkdir(parents=True)
    monkeypatch.chdir(run_dir)
    cache = WorldCache()
    world, _ = cache.fork(FakeTask)
    if ROOT:
        assert cache.bounded, "as root every fork's workspace is a tmpfs of its own"
    project = Path(longhorizon.__file__).resolve().parents[2]
    secrets = {str(world.root), str(world.workspace), str(cache.base), cache.base.name,
               "longhorizon-worlds", str(tmp_path), str(run_dir), str(project), sys.prefix}
    assert all(len(s) > 6 for s in secrets)
    for name, value in {"LH_WORLD": world.root, "LH_RUN": run_dir, "PWD": run_dir, "OLDPWD": project}.items():
        monkeypatch.setenv(name, str(value))
    yield world, secrets
    cache.close()


async def run(world, command):
    async with Client(build_server(world)) as c:
        r = await c.call_tool("run", {"command": command, "timeout_s": 60})
    return r.content[0].text


def leaks(text: str | bytes, secrets) -> list[str]:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return sorted(s for s in secrets if s in text)


PROBES = {
    "pid 1 argv": "tr '\\0' '\\n' < /proc/1/cmdline",
    "pid 1 environ": "tr '\\0' '\\n' < /proc/1/environ",
    "own environ": "tr '\\0' '\\n' < /proc/self/environ; env; echo \"$PWD $OLDPWD\"; cd - ; set",
    "mount tables": "cat /proc/self/mountinfo /proc/1/mountinfo /proc/self/mounts /proc/mounts /proc/self/mountstats",
    "df": "df -a; stat -f /workspace; stat /workspace",
    "cgroups": "cat /proc/self/cgroup /proc/1/cgroup",
    "links": "for p in /proc/[0-9]* /proc/self /proc/thread-self; do readlink $p/cwd $p/root $p/exe; done; "
             "pwd -P; realpath /workspace /workspace/..",
    "fds": "ls -la /proc/*/fd/ /proc/self/fd/; cat /proc/*/fdinfo/*",
    "maps": "cat /proc/1/maps /proc/self/maps /proc/1/smaps",
    "processes": "ps -efww 2>/dev/null; for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done",
    "files": "ls -laR / 2>/dev/null | grep -v '^/usr\\|^/proc'; cat /etc/passwd /etc/group /etc/hosts /etc/hostname",
    "id and limits": "id; hostname; ulimit -a; cat /proc/self/status /proc/self/stat",
}


@needs_mount
@pytest.mark.parametrize("probe", sorted(PROBES))
async def test_no_probe_reveals_a_host_path(episode, probe):
    world, secrets = episode
    text = await run(world, f"( {PROBES[probe]} ) > /workspace/.probe 2>&1; echo done")
    assert "done" in text
    assert leaks(text, secrets) == []
    assert leaks((world.workspace / ".probe").read_bytes(), secrets) == []


WALKER = r'''
import json, os, stat
SKIP = {"mem", "pagemap", "clear_refs", "kcore", "kmsg", "kpagecount", "kpageflags", "kpagecgroup",
        "sysrq-trigger", "kallsyms", "map_files"}
text = open("/workspace/.walk-text", "w", errors="replace")
fds = {}

def dump(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            data = os.read(fd, 1 << 20)
        finally:
            os.close(fd)
    except OSError:
        return
    text.write(f"== {path}\n{data.decode('utf-8', 'replace')}\n")

def walk(folder, depth=0):
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return
    for name in names:
        path = f"{folder}/{name}"
        if name in SKIP:
            continue
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if stat.S_ISLNK(st.st_mode):
            try:
                text.write(f"{path} -> {os.readlink(path)}\n")
            except OSError:
                pass
        elif stat.S_ISREG(st.st_mode):
            dump(path)
        elif stat.S_ISDIR(st.st_mode) and depth < 6:
            walk(path, depth + 1)

pids = sorted(p for p in os.listdir("/proc") if p.isdigit())
for name in sorted(os.listdir("/proc")):
    if not name.isdigit() and name not in ("self", "thread-self"):
        walk(f"/proc/{name}") if os.path.isdir(f"/proc/{name}") else dump(f"/proc/{name}")
for pid in pids:
    walk(f"/proc/{pid}")
    try:
        fds[pid] = {fd: os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}
    except OSError:
        pass
walk("/etc")
walk("/dev")
walk("/tmp")

# The memory of every other process in the sandbox (its heap, stack, anonymous maps).
mem = open("/workspace/.walk-mem", "wb")
for pid in pids:
    if pid == str(os.getpid()):
        continue
    try:
        maps = open(f"/proc/{pid}/maps").read().splitlines()
        src = open(f"/proc/{pid}/mem", "rb", buffering=0)
    except OSError:
        continue
    for line in maps:
        parts = line.split()
        if parts[1].startswith("r") and (len(parts) < 6 or parts[5].startswith("[")):
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            try:
                src.seek(lo)
                mem.write(src.read(min(hi - lo, 16 << 20)))
            except (OSError, ValueError, OverflowError):
                pass
json.dump({"fds": fds, "pids": pids}, open("/workspace/.walk-fds", "w"))
print("walked", len(pids))
'''


@needs_mount
async def test_an_attacker_walking_proc_and_memory_finds_no_host_path(episode):
    world, secrets = episode
    text = await run(world, f"python3 - <<'EOF'\n{WALKER}\nEOF")
    assert "walked" in text, text
    assert leaks(text, secrets) == []
    walked = (world.workspace / ".walk-text").read_bytes()
    assert b"/proc/1/mountinfo" in walked and b"/proc/1/environ" in walked
    assert leaks(walked, secrets) == []
    memory = (world.workspace / ".walk-mem").read_bytes()
    assert memory, "the walker could read the shell's memory: the test must see it"
    assert leaks(memory, secrets) == []


async def test_no_host_fd_is_inherited(episode):
    world, secrets = episode
    script = ("import json, os\nlinks = {}\nfor fd in os.listdir('/proc/self/fd'):\n"
              "    try:\n        links[fd] = os.readlink(f'/proc/self/fd/{fd}')\n"
              "    except OSError:\n        links[fd] = None\nprint(json.dumps(links))\n")
    text = await run(world, f"ls /proc/$$/fd; echo ---; python3 -c \"{script}\"")
    out = text.split("--- stdout ---\n", 1)[1].split("\n--- stderr ---", 1)[0]
    shell_fds, python_fds = out.split("---\n")
    assert shell_fds.split() == ["0", "1", "2"]  # the command's own shell, pid 1: nothing but stdio
    links = json.loads(python_fds)
    assert sorted(links) == ["0", "1", "2", "3"], links  # 3: the listing's own (closed) handle
    assert links["0"] == "/dev/null" and links["1"].startswith("pipe:") and links["2"].startswith("pipe:")
    assert links["3"] is None
    assert leaks(text, secrets) == []


@needs_mount
async def test_every_fd_of_every_sandbox_process_stays_inside(episode):
    world, _ = episode
    await run(world, f"python3 - <<'EOF'\n{WALKER}\nEOF")
    seen = json.loads((world.workspace / ".walk-fds").read_text())["fds"]
    assert seen
    inside = ("/dev/null", "pipe:", "anon_inode:", "socket:", "/proc/", "/workspace/", "/tmp/")
    outside = {f"{pid}:{fd} -> {target}" for pid, links in seen.items() for fd, target in links.items()
               if not target.startswith(inside)}
    assert outside == set()


@needs_mount
async def test_the_workspace_byte_budget_stops_a_filling_loop(tmp_path, monkeypatch):
    monkeypatch.setattr(world_mod, "WORKSPACE_BYTES", 8 * 1024**2)
    cache = WorldCache(tmp_path / "cache")
    try:
        world, _ = cache.fork(FakeTask)
        text = await run(world, "for i in $(seq 100); do head -c 2M /dev/zero > f$i; done; du -sk . | cut -f1")
        out = text.split("--- stdout ---\n", 1)[1].split("\n--- stderr ---", 1)[0]
        assert "No space left on device" in text
        assert int(out.split()[-1]) <= 8 * 1024
        written = sum(p.stat().st_size for p in world.workspace.iterdir())
        assert written <= 8 * 1024**2
    finally:
        cache.close()


@needs_mount
async def test_the_workspace_file_budget_stops_a_file_storm(tmp_path, monkeypatch):
    monkeypatch.setattr(world_mod, "WORKSPACE_FILES", 50)
    cache = WorldCache(tmp_path / "cache")
    try:
        world, _ = cache.fork(FakeTask)
        text = await run(world, "for i in $(seq 200); do : > f$i; done 2>&1 | sort -u | head -3")
        assert "No space left on device" in text
        assert len(list(world.workspace.iterdir())) < 50
    finally:
        cache.close()


def test_every_familys_workspace_fits_the_budget_many_times_over(tmp_path):
    from longhorizon.core.world import World
    from longhorizon.tasks.registry import families

    sizes = {}
    for fam in families():
        built = World.build(tmp_path / fam.name, fam.generate(0).build)
        sizes[fam.name] = sum(p.stat().st_size for p in built.workspace.rglob("*") if p.is_file())
    assert max(sizes.values()) * 100 < world_mod.WORKSPACE_BYTES, max(sizes.items(), key=lambda kv: kv[1])
    files = max(sum(1 for _ in (tmp_path / name / "workspace").rglob("*")) for name in sizes)
    assert files * 100 < world_mod.WORKSPACE_FILES


def test_the_package_is_hidden_when_installed_under_a_system_folder(monkeypatch):
    """Installed under /usr (a system pip install), graders and oracles would be readable
    through the read-only system bind: that folder is covered."""
    from longhorizon.apps.shell import sandbox

    monkeypatch.setattr(longhorizon, "__file__", "/usr/lib/python3/dist-packages/longhorizon/__init__.py")
    assert sandbox.project_code_in_sandbox() == ["/usr/lib/python3/dist-packages/longhorizon"]
    monkeypatch.setattr(longhorizon, "__file__", "/opt/venv/lib/python3.11/site-packages/longhorizon/__init__.py")
    assert sandbox.project_code_in_sandbox() == []


async def test_a_covered_system_folder_is_empty_and_read_only_inside(tmp_path, monkeypatch):
    from longhorizon.apps.shell import sandbox

    shown = sorted(os.listdir("/usr/share"))[:1]
    assert shown, "nothing under /usr/share to cover"
    target = f"/usr/share/{shown[0]}"
    monkeypatch.setattr(sandbox, "project_code_in_sandbox", lambda: [target])
    ws = tmp_path / "ws"
    ws.mkdir()
    res = await sandbox.run_sandboxed(f"ls -A {target} | wc -l; touch {target}/x 2>&1 || echo refused", ws, 30)
    assert res.exit_code == 0
    lines = res.stdout.split()
    assert lines[0] == "0" and "refused" in res.stdout
