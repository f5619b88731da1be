"""The shell app through a real in-process MCP session: a real bash, confined to the workspace."""

import asyncio
import os
import socket
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from mcp import Client

import longhorizon
from longhorizon.apps.shell import sandbox
from longhorizon.apps.shell.server import build_server


async def run(world, command, **kw):
    async with Client(build_server(world)) as c:
        r = await c.call_tool("run", {"command": command, **kw})
        return r.content[0].text, r.is_error


def stdout_of(text):
    return text.split("--- stdout ---\n", 1)[1].split("\n--- stderr ---", 1)[0]


def stderr_of(text):
    return text.split("--- stderr ---\n", 1)[1]


async def test_runs_in_workspace_and_sees_its_files(world):
    (world.workspace / "data.txt").write_text("b\na\nc\n")
    text, err = await run(world, "pwd; sort data.txt; echo made > out.txt")
    assert not err and text.startswith("exit code: 0")
    assert stdout_of(text).split() == ["/workspace", "a", "b", "c"]
    assert (world.workspace / "out.txt").read_text() == "made\n"


async def test_nonzero_exit_is_a_result_not_a_tool_error(world):
    text, err = await run(world, "echo partial; echo 'it broke' >&2; exit 3")
    assert not err
    assert text.startswith("exit code: 3")
    assert stdout_of(text).strip() == "partial" and stderr_of(text).strip() == "it broke"


@pytest.mark.parametrize("command, host_path", [
    ("touch /usr/lh_sandbox_probe", "/usr/lh_sandbox_probe"),
    ("echo x > /tmp/../etc/lh_sandbox_probe", "/etc/lh_sandbox_probe"),
    ("echo x > /lh_sandbox_probe", "/lh_sandbox_probe"),
    ("echo x > /workspace/../lh_sandbox_probe2", "/lh_sandbox_probe2"),
])
async def test_cannot_write_outside_the_workspace(world, command, host_path):
    existed = os.path.exists(host_path)
    text, err = await run(world, command)
    assert not err and not text.startswith("exit code: 0"), text
    if not existed:
        assert not os.path.exists(host_path)


async def test_cannot_reach_the_worlds_state_folder(world):
    (world.state / "app.sqlite").write_text("secret")
    text, err = await run(world, f"cat {world.state}/app.sqlite; echo x > {world.state}/planted; ls {world.root}")
    assert not err and "secret" not in stdout_of(text)
    assert "No such file or directory" in stderr_of(text)
    assert sorted(p.name for p in world.state.iterdir()) == ["app.sqlite"]
    # /tmp inside is a private tmpfs, never the host's (where the World may live).
    marker = f"lh-{uuid.uuid4().hex}"
    text, _ = await run(world, f"touch /tmp/{marker}")
    assert not Path("/tmp", marker).exists()


async def test_cannot_see_the_project_or_its_environment(world, monkeypatch):
    monkeypatch.setenv("LH_HOST_SECRET", "do-not-leak")
    src = Path(longhorizon.__file__).resolve().parent
    text, err = await run(world, f"ls {src}; ls {sys.prefix}; env")
    out = stdout_of(text)
    assert not err and "do-not-leak" not in out and "VIRTUAL_ENV" not in out
    assert "task.py" not in out and "__init__.py" not in out
    assert "HOME=/workspace" in out
    assert stderr_of(text).count("No such file or directory") == 2


async def test_has_no_network(world):
    with socket.create_server(("127.0.0.1", 0)) as srv:
        port = srv.getsockname()[1]
        script = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5)"
        text, err = await run(world, f'python3 -c "{script}"')
    assert not err and not text.startswith("exit code: 0")
    assert "ConnectionRefusedError" in stderr_of(text)
    text, _ = await run(world, "tail -n +3 /proc/net/dev | cut -d: -f1")
    assert stdout_of(text).split() == ["lo"]


async def test_timeout_kills_every_process_it_started(world):
    marker = f"lh-sleep-{uuid.uuid4().hex}"
    text, err = await run(world, f"(exec -a {marker} sleep 1000) & exec -a {marker} sleep 1000", timeout_s=1)
    assert err and "timed out after 1 s" in text
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                alive.append(pid)
        except OSError:
            pass
    assert alive == []


async def test_a_file_larger_than_the_limit_cannot_be_written(world, monkeypatch):
    monkeypatch.setattr(sandbox, "FILE_SIZE_LIMIT_BYTES", 1024**2)
    text, err = await run(world, "head -c 5M /dev/zero > big.bin; echo exit=$?; ulimit -H -f 999999999")
    assert not err
    assert (world.workspace / "big.bin").stat().st_size == 1024**2
    assert "exit=153" in stdout_of(text)  # killed by SIGXFSZ at the limit
    assert not text.startswith("exit code: 0")  # and it cannot raise its hard limit


async def test_memory_beyond_the_limit_cannot_be_allocated(world, monkeypatch):
    monkeypatch.setattr(sandbox, "MEMORY_LIMIT_BYTES", 200 * 1024**2)
    fits, err = await run(world, "x=$(head -c 20M /dev/zero | tr '\\0' a); echo ${#x}")
    assert not err and stdout_of(fits).strip() == str(20 * 1024**2)
    text, err = await run(world, "x=$(head -c 400M /dev/zero | tr '\\0' a); echo ${#x}")
    assert not err and not text.startswith("exit code: 0")
    assert "cannot allocate" in stderr_of(text) or stdout_of(text).strip() != str(400 * 1024**2)


async def test_huge_output_is_truncated_keeping_head_and_tail(world):
    text, err = await run(world, "seq 1 1000000")
    assert not err and len(text) < 20_000
    out = stdout_of(text)
    assert out.startswith("1\n2\n3\n") and out.rstrip().endswith("999999\n1000000")
    assert "output truncated" in out


async def test_concurrent_commands_do_not_block_each_other(world):
    # The reader blocks until the writer opens the FIFO: run one at a time, it would hang.
    os.mkfifo(world.workspace / "pipe")
    async with Client(build_server(world)) as c:
        reader, writer = await asyncio.gather(
            c.call_tool("run", {"command": "cat pipe", "timeout_s": 60}),
            c.call_tool("run", {"command": "echo through-the-fifo > pipe", "timeout_s": 60}),
        )
    assert not reader.is_error and not writer.is_error
    assert stdout_of(reader.content[0].text).strip() == "through-the-fifo"


@pytest.mark.parametrize("args, message", [
    ({"command": "   "}, "non-empty"),
    ({"command": "echo a\x00b"}, "NUL"),
    ({"command": "true", "timeout_s": 0}, "between 1 and 120"),
    ({"command": "true", "timeout_s": 10_000}, "between 1 and 120"),
    ({"command": "true", "timeout_s": "soon"}, "timeout_s"),
])
async def test_bad_arguments_are_readable_tool_errors(world, args, message):
    async with Client(build_server(world)) as c:
        r = await c.call_tool("run", args)
    assert r.is_error and message in r.content[0].text


async def test_missing_bubblewrap_refuses_instead_of_running_unsandboxed(world, monkeypatch):
    monkeypatch.setattr(sandbox, "find_bwrap", lambda: None)
    text, err = await run(world, "echo ran > ran.txt")
    assert err and "sandbox unavailable: install bubblewrap" in text
    assert not (world.workspace / "ran.txt").exists()


@pytest.mark.parametrize("command", ["cp /dev/zero big.bin", "cat /dev/urandom > big.bin", "cat /dev/zero > /tmp/x; cp /tmp/x big.bin"])
async def test_copying_a_device_writes_at_most_the_file_size_limit(world, monkeypatch, command):
    monkeypatch.setattr(sandbox, "FILE_SIZE_LIMIT_BYTES", 1024**2)
    text, err = await run(world, command)
    assert not err and any(m in stderr_of(text) for m in ("File size limit exceeded", "File too large"))
    assert (world.workspace / "big.bin").stat().st_size == 1024**2


@pytest.mark.parametrize("folder, limit", [("/tmp", "TMP_BYTES"), ("/dev/shm", "SHM_BYTES")])
async def test_scratch_folders_are_sized(world, monkeypatch, folder, limit):
    monkeypatch.setattr(sandbox, limit, 2 * 1024**2)
    text, err = await run(world, f"head -c 1M /dev/zero > {folder}/a; head -c 5M /dev/zero > {folder}/b; "
                                 f"du -sk {folder} | cut -f1")
    assert not err and "No space left on device" in stderr_of(text)
    assert int(stdout_of(text).split()[-1]) <= 2 * 1024


async def test_the_rest_of_dev_is_read_only(world):
    text, err = await run(world, "echo x > /dev/planted; mkdir /dev/d; echo fine > /dev/null && echo null-ok")
    assert not err and stderr_of(text).count("Read-only file system") == 2
    assert stdout_of(text).strip() == "null-ok"


def test_an_inherited_lower_hard_limit_is_kept_not_a_failure(world):
    """A caller already under a lower hard RLIMIT_AS / RLIMIT_FSIZE than our caps: commands
    still run, under the inherited limits (raising a hard limit is refused)."""
    memory, file_size = 3 * 1024**3, 64 * 1024**2
    assert memory < sandbox.MEMORY_LIMIT_BYTES and file_size < sandbox.FILE_SIZE_LIMIT_BYTES
    code = (
        "import asyncio, resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({memory}, {memory}))\n"
        f"resource.setrlimit(resource.RLIMIT_FSIZE, ({file_size}, {file_size}))\n"
        "from longhorizon.apps.shell import sandbox\n"
        "r = asyncio.run(sandbox.run_sandboxed('ulimit -H -v; ulimit -H -f; echo ran', sys.argv[1]))\n"
        "print(r.render())\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(world.workspace)], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("exit code: 0"), done.stdout
    assert stdout_of(done.stdout).split() == [str(memory // 1024), str(file_size // 1024), "ran"]


async def test_errors_never_name_the_workspaces_host_path(world):
    gone = world.root.parent / "gone"
    world.workspace.rename(gone)
    text, err = await run(world, "true")
    assert err and "workspace folder is missing" in text
    assert str(world.root) not in text


# -- processes and memory per command (a cgroup each where the host allows; see sandbox) ---------

LIMITS = sandbox.limits_in_force()
needs_process_limit = pytest.mark.skipif(LIMITS["processes"] is None, reason="no pids cgroup and a root uid: "
                                         "processes per command cannot be bounded here")
needs_memory_cgroup = pytest.mark.skipif(not str(LIMITS["memory"]).startswith("cgroup"),
                                         reason="no memory cgroup here: memory is bounded per process only")
FORKS = """python3 -c '
import os
r, w = os.pipe()
kids = []
for _ in range(100):
    try:
        pid = os.fork()
    except BlockingIOError:
        break
    if pid == 0:
        os.close(w); os.read(r, 1); os._exit(0)
    kids.append(pid)
print(len(kids))
os.close(w)
for k in kids:
    os.waitpid(k, 0)
'"""


@needs_process_limit
async def test_a_command_cannot_hold_more_processes_than_the_limit(world, monkeypatch):
    monkeypatch.setattr(sandbox, "PROCESS_LIMIT", 24)
    text, err = await run(world, FORKS)
    assert not err and text.startswith("exit code: 0"), text
    assert int(stdout_of(text)) < 24  # 100 were asked for; bash and python hold two of the 24
    assert "limit of 24 processes" in text.split("--- limits ---", 1)[1]


@needs_process_limit
def test_a_fork_bomb_ends_with_a_readable_result_and_leaves_no_process(world):
    """Run in a child process: if the sandbox failed to end the bomb, the subprocess timeout
    fails the test instead of hanging it."""
    marker = f"lh-bomb-{uuid.uuid4().hex}"
    code = (
        "import asyncio, sys\n"
        "from mcp import Client\n"
        "from longhorizon.apps.shell import sandbox\n"
        "from longhorizon.apps.shell.server import build_server\n"
        "from longhorizon.core.world import World\n"
        "sandbox.PROCESS_LIMIT = 32\n"
        "async def main():\n"
        "    async with Client(build_server(World(sys.argv[1]))) as c:\n"
        "        r = await c.call_tool('run', {'command': sys.argv[2], 'timeout_s': 2})\n"
        "    print(r.is_error); print(r.content[0].text)\n"
        "asyncio.run(main())\n"
    )
    bomb = f"exec -a {marker} bash -c 'f(){{ f|f& }}; f; sleep 1000'"
    done = subprocess.run([sys.executable, "-c", code, str(world.root), bomb], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    is_error, text = done.stdout.split("\n", 1)
    assert is_error == "True" and "timed out after 2 s" in text
    assert "limit of 32 processes" in text.split("--- limits ---", 1)[1]
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                alive.append(pid)
        except OSError:
            pass
    assert alive == []


@needs_memory_cgroup
async def test_memory_of_a_command_is_bounded_in_all_and_the_result_says_so(world, monkeypatch):
    monkeypatch.setattr(sandbox, "COMMAND_MEMORY_BYTES", 64 * 1024**2)  # far below each process's own cap
    text, err = await run(world, "python3 -c \"x = b'a' * (200 << 20); print(len(x))\"")
    assert not err and not text.startswith("exit code: 0"), text
    assert str(200 << 20) not in stdout_of(text)
    assert "memory limit of 64 MiB" in text.split("--- limits ---", 1)[1]


@needs_process_limit
def test_command_cgroups_a_dead_process_left_are_removed():
    from longhorizon.apps.shell import cgroups

    dead = subprocess.Popen(["true"])
    dead.wait()
    parent = cgroups.parents_here()[0].folder
    stale = parent / f"{cgroups.PREFIX}{dead.pid}-test"
    stale.mkdir()
    try:
        assert stale in cgroups.sweep_stale(parent)
        assert not stale.exists()
    finally:
        if stale.exists():
            stale.rmdir()
