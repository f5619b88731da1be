"""Runs one bash command in a bubblewrap sandbox whose only writable place is a workspace.

The sandbox sees a read-only system (``/usr`` and the ``/bin``/``/lib`` links or binds), a
minimal ``/etc``, a private ``/proc``, ``/dev`` and ``/tmp``, and the workspace at
``/workspace``. It has no network (its own empty network namespace), no capabilities, an
unprivileged uid, a clean environment, and cannot create further user namespaces. Nothing
else of the host (the World's ``state/``, the project, its venv) is mounted, so it cannot be
read or written. There is no fallback: without bubblewrap a command is refused.

Nothing in the sandbox names the host's paths: bubblewrap reads its arguments from a pipe
(``--args``) and starts with an empty environment, the command itself is pid 1 of the pid
namespace (``--as-pid-1``: no bubblewrap process, argv or memory inside to read), no host fd
is inherited, and a World forked by ``WorldCache`` has its workspace on a tmpfs of its own, so
``/proc/self/mountinfo`` shows its root as ``/`` (a plain folder shows its path within its
filesystem there: see ``WorldCache``). Errors never quote the host path either.

Resources are bounded too: the timeout kills everything the command started; hard rlimits
(which the command cannot raise, and never above what the caller inherited) cap each
process's memory, the size of any file it writes, and core dumps; ``/tmp`` and ``/dev/shm``
are sized tmpfs and the rest of ``/dev`` is read-only, and the workspace's own tmpfs
(``WorldCache``) caps its bytes and files. So a runaway command cannot exhaust the host's
memory or disk through files.

Processes and memory per command, all the command's processes together: where this process
may make cgroups (root with a writable cgroup fs, v1 or v2, or a delegated v2 subtree) each
command runs in a cgroup of its own (``cgroups``) with ``pids.max`` = ``PROCESS_LIMIT`` and a
memory limit of ``COMMAND_MEMORY_BYTES`` (what it writes to its tmpfs counts too). A fork bomb
then holds at most ``PROCESS_LIMIT`` processes until its timeout kills them all, and a memory
hog is killed by the kernel at the limit; the agent reads which limit it hit under
``--- limits ---``. Without cgroups, RLIMIT_NPROC (``ulimit -u``) caps the processes of the
sandbox's uid in its own user namespace, which binds when the host uid is not root (for root
the kernel exempts it), and memory stays capped per process only. ``limits_in_force()`` says
which applies here. Cost (``benchmarks/hostile_shell.py``; root, cgroup v1, 2 vCPUs shared at
load ~5): per ``true`` command +1.9 ms CPU (13.6 vs 11.7 ms, ratio 1.16) and +11.6 ms wall
(35.5 vs 23.9 ms, 1.48); the wall part is mostly the kernel waiting out an RCU grace period
while the command moves into its cgroup (a sleep in the child, not CPU; the event loop runs
on). A fork bomb peaked at 256 processes (37 MiB) until its 5 s timeout; a four-process hog of
6 GiB was stopped at 4 GiB by OOM kills; neither left a process behind.

Pure asyncio, no MCP: the shell app's server wraps it, benchmarks can call it directly.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

from longhorizon.apps.shell import cgroups

MAX_TIMEOUT_S = 120
OUTPUT_BUDGET_CHARS = 16_000
"""stdout + stderr shown to the agent; stays under the episode's 20k cap with the labels."""
CAPTURE_BYTES = 64 * 1024
"""Head and tail kept per stream while reading, so a runaway command cannot eat memory."""
MAX_COMMAND_CHARS = 100_000
SANDBOX_UID = 1000
MEMORY_LIMIT_BYTES = 4 * 1024**3
"""Address space per process (RLIMIT_AS): far above what shell tools need, far below the host."""
PROCESS_LIMIT = 256
"""Processes (and threads) one command may hold at once: its cgroup's ``pids.max``, else
RLIMIT_NPROC. Shell pipelines use a handful; ``xargs -P``/``make -j`` a few dozen."""
COMMAND_MEMORY_BYTES = 4 * 1024**3
"""Memory of all of one command's processes together, and what it writes to tmpfs (its
cgroup's memory limit): the per-process address-space cap, now for the whole command."""
FILE_SIZE_LIMIT_BYTES = 256 * 1024**2
"""Largest file a command may write (RLIMIT_FSIZE); the suite's files are kilobytes."""
TMP_BYTES = 512 * 1024**2
"""Size of the sandbox's private ``/tmp`` (a tmpfs that lives for one command)."""
SHM_BYTES = 64 * 1024**2
"""Size of its ``/dev/shm`` (POSIX shared memory, semaphores); the rest of ``/dev`` is read-only."""
SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"

# System paths the sandbox may read. /bin, /lib... are symlinks into /usr on merged-/usr
# systems (recreated as links) and real folders elsewhere (bound read-only).
_TOP_LEVEL = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
_ETC_ENTRIES = (
    "alternatives",  # Debian: /usr/bin/awk -> /etc/alternatives/awk -> mawk
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "nsswitch.conf",
    "mime.types",
)
_ETC_DATA = {
    "/etc/passwd": "root:x:0:0:root:/root:/usr/sbin/nologin\n"
    f"agent:x:{SANDBOX_UID}:{SANDBOX_UID}:agent:/workspace:/bin/bash\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
    "/etc/group": f"root:x:0:\nagent:x:{SANDBOX_UID}:\nnogroup:x:65534:\n",
    "/etc/hostname": "sandbox\n",
    "/etc/hosts": "127.0.0.1 localhost sandbox\n::1 localhost\n",
}


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot build the sandbox here: never run unsandboxed instead."""


class SandboxTimeout(RuntimeError):
    """The command ran past its timeout; every process it started has been killed."""

    def __init__(self, timeout_s: int, partial: "RunResult"):
        super().__init__(f"command timed out after {timeout_s} s")
        self.timeout_s = timeout_s
        self.partial = partial


@dataclass(frozen=True)
class RunResult:
    exit_code: int | None
    stdout: str
    stderr: str
    limits: str = ""
    """Which limit stopped something (processes, memory), for the agent; '' when none did."""
    usage: cgroups.Usage | None = None
    """What the command used, where it ran in a cgroup (for benchmarks and tests)."""

    def render(self) -> str:
        """The text an agent reads: exit code, then each stream under a clear label."""
        return (
            f"exit code: {'none (killed)' if self.exit_code is None else self.exit_code}\n"
            f"--- stdout ---\n{self.stdout or '(empty)'}\n"
            f"--- stderr ---\n{self.stderr or '(empty)'}"
            + (f"\n--- limits ---\n{self.limits}" if self.limits else "")
        )


def limits_in_force() -> dict[str, str | None]:
    """How processes and memory of one command are bounded on this host (None: not at all)."""
    controllers = {c for p in cgroups.parents_here() for c in p.controllers}
    version = {c: f"cgroup v{p.version}" for p in cgroups.parents_here() for c in p.controllers}
    processes = version["pids"] if "pids" in controllers else ("RLIMIT_NPROC" if os.geteuid() != 0 else None)
    memory = version["memory"] if "memory" in controllers else "RLIMIT_AS per process"
    return {"processes": processes, "memory": memory}


def find_bwrap() -> str | None:
    """Path of the bubblewrap binary, or None (looked up at call time so tests can hide it)."""
    found = shutil.which("bwrap")
    if found:
        return found
    return "/usr/bin/bwrap" if os.access("/usr/bin/bwrap", os.X_OK) else None


def bwrap_options(workspace: Path, *, info_fd: int, data_fds: dict[str, int]) -> list[str]:
    """bubblewrap's options (fed to it through ``--args``, so no process ever shows them)."""
    argv = [
        "--unshare-all",  # net, pid, ipc, uts, cgroup, user: no network, no host processes
        "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID),
        "--disable-userns",  # no nested user namespace to regain capabilities in
        "--cap-drop", "ALL",
        "--die-with-parent",
        "--new-session",  # no TIOCSTI into the caller's terminal
        "--as-pid-1",  # the command is pid 1: no bubblewrap reaper whose argv or memory it could read
        "--hostname", "sandbox",
        "--info-fd", str(info_fd),
        "--ro-bind", "/usr", "/usr",
    ]
    for name in _TOP_LEVEL:
        host = Path("/") / name
        if host.is_symlink():
            argv += ["--symlink", os.readlink(host), f"/{name}"]
        elif host.is_dir():
            argv += ["--ro-bind", str(host), f"/{name}"]
    argv += ["--dir", "/etc"]
    for name in _ETC_ENTRIES:
        argv += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
    for dest, fd in data_fds.items():
        argv += ["--ro-bind-data", str(fd), dest]
    for hidden in project_code_in_sandbox():
        argv += ["--tmpfs", hidden, "--remount-ro", hidden]
    argv += [
        "--proc", "/proc",
        "--dev", "/dev",
        "--size", str(SHM_BYTES), "--tmpfs", "/dev/shm",
        "--remount-ro", "/dev",  # else /dev is a tmpfs of half the host's memory (not recursive: /dev/shm stays)
        "--size", str(TMP_BYTES), "--tmpfs", "/tmp",
        "--bind", str(workspace), "/workspace",
        "--remount-ro", "/",  # the sandbox's own root (and /etc) too: only /workspace, /tmp, /dev/shm take writes
        "--chdir", "/workspace",
        "--clearenv",
        "--setenv", "PATH", SANDBOX_PATH,
        "--setenv", "HOME", "/workspace",
        "--setenv", "LANG", "C.UTF-8",
        "--setenv", "TMPDIR", "/tmp",
        "--setenv", "USER", "agent",
    ]
    return argv


def project_code_in_sandbox() -> list[str]:
    """Folders of this package (graders, oracles, task generators) that the read-only system
    binds would show, e.g. when it is installed under /usr: each gets covered by an empty
    tmpfs. An editable or venv install outside /usr is not mounted at all."""
    import longhorizon

    visible = ("/usr",) + tuple(f"/{n}" for n in _TOP_LEVEL if Path(f"/{n}").is_dir() and not Path(f"/{n}").is_symlink())
    pkg = str(Path(os.path.realpath(longhorizon.__file__)).parent)
    return [pkg] if any(pkg == v or pkg.startswith(v + "/") for v in visible) else []


class _Capture:
    """Reads one stream to EOF keeping only its first and last ``limit`` bytes."""

    def __init__(self, limit: int = CAPTURE_BYTES):
        self.limit = limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.limit - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.limit:
                del self.tail[: len(self.tail) - self.limit]

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self.feed(chunk)

    def text(self, budget: int) -> str:
        """Decoded output; if longer than ``budget`` characters, head and tail with a note."""
        dropped = self.total - len(self.head) - len(self.tail)
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        if not dropped and len(head) + len(tail) <= budget:
            return head + tail
        if not dropped:
            head, tail = head + tail, ""
            keep_h, keep_t = budget // 2, budget - budget // 2
            head, tail = head[:keep_h], head[len(head) - keep_t:]
        else:
            head, tail = head[: budget // 2], tail[len(tail) - (budget - budget // 2):]
        omitted = self.total - len(head.encode()) - len(tail.encode())
        return (
            f"{head}\n... [output truncated: about {max(omitted, 0)} bytes omitted from the middle; "
            f"redirect to a file and inspect it with head, tail or grep] ...\n{tail}"
        )


def _split_budget(a: int, b: int, total: int) -> tuple[int, int]:
    """Share ``total`` characters between two streams; a short one leaves room to the other."""
    if a + b <= total:
        return a, b
    half = total // 2
    if a <= half:
        return a, total - a
    if b <= half:
        return total - b, b
    return half, total - half


def _capped(limit: int, which: int) -> int:
    """``limit``, or the hard limit this process inherited when that is lower (raising a hard
    limit is refused, so ``ulimit`` would fail and the command with it)."""
    hard = resource.getrlimit(which)[1]
    return limit if hard == resource.RLIM_INFINITY else min(limit, hard)


def limited_bash(command: str) -> list[str]:
    """``bash -c command`` under hard rlimits, set by a bash that then execs it (``ulimit``
    counts in KiB; ``-H -S``: the command can neither raise them nor have them lowered for it).
    ``-u`` counts the sandbox uid's processes in its own user namespace (see the module docstring)."""
    kib = lambda n: str(n // 1024)  # noqa: E731  rounded down: never above an inherited hard limit
    memory = _capped(MEMORY_LIMIT_BYTES, resource.RLIMIT_AS)
    file_size = _capped(FILE_SIZE_LIMIT_BYTES, resource.RLIMIT_FSIZE)
    processes = _capped(PROCESS_LIMIT, resource.RLIMIT_NPROC)
    limits = (f'ulimit -H -S -v {kib(memory)} -f {kib(file_size)} -u {processes} -c 0 '
              '&& exec /bin/bash -c "$1"')
    return ["/bin/bash", "-c", limits, "limits", command]


def _pipe_with(data: str) -> int:
    """A pipe holding ``data`` (read end returned) for ``--ro-bind-data`` and ``--args``."""
    raw = data.encode()
    if len(raw) > 60_000:  # a pipe holds 64 KiB: more would block before bwrap starts reading
        raise SandboxUnavailable("sandbox unavailable: bubblewrap's arguments are too long")
    r, w = os.pipe()
    try:
        os.write(w, raw)
    finally:
        os.close(w)
    return r


def _read_child_pid(fd: int) -> int | None:
    """bwrap's ``--info-fd`` JSON names the pid (on the host) of the sandbox's init."""
    os.set_blocking(fd, False)
    try:
        raw = os.read(fd, 4096)
    except (BlockingIOError, OSError):
        return None
    try:
        return int(json.loads(raw.decode())["child-pid"])
    except (ValueError, KeyError, TypeError):
        return None


def _kill_init(proc: asyncio.subprocess.Process, info_r: int) -> int | None:
    """SIGKILL the sandbox's init (pid 1 of its pid namespace); returns its host pid.

    The kernel then kills every process in that namespace before bwrap sees init exit, so
    once bwrap is reaped nothing the command started is left.
    """
    child = _read_child_pid(info_r) if proc.returncode is None else None
    if child:
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return child


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def _kill(proc: asyncio.subprocess.Process, info_r: int) -> None:
    """Kill everything the command started and reap bwrap (its process group as fallback)."""
    child = _kill_init(proc, info_r)
    try:
        await asyncio.wait_for(proc.wait(), 10)
    except TimeoutError:
        pass
    if proc.returncode is None or not child:
        _kill_group(proc)
        await proc.wait()


async def run_sandboxed(command: str, workspace: Path | str, timeout_s: int = 30) -> RunResult:
    """Run ``bash -c command`` in the sandbox over ``workspace``.

    Returns the exit code and (capped) outputs; raises SandboxTimeout after ``timeout_s``
    (everything killed) and SandboxUnavailable when bubblewrap is missing or fails.
    """
    bwrap = find_bwrap()
    if not bwrap:
        raise SandboxUnavailable("sandbox unavailable: install bubblewrap (apt-get install bubblewrap)")
    ws = Path(os.path.realpath(workspace))
    if not ws.is_dir():  # never name the host path: the agent reads this
        raise SandboxUnavailable("sandbox unavailable: the workspace folder is missing")

    group = cgroups.create(PROCESS_LIMIT, COMMAND_MEMORY_BYTES)
    data_fds = {dest: _pipe_with(text) for dest, text in _ETC_DATA.items()}
    info_r, info_w = os.pipe()
    args_r = None
    try:
        options = bwrap_options(ws, info_fd=info_w, data_fds=data_fds)
        args_r = _pipe_with("\0".join(options) + "\0")
        proc = await asyncio.create_subprocess_exec(
            *(group.join_argv() if group else ()), bwrap, "--args", str(args_r), *limited_bash(command),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            pass_fds=(info_w, args_r, *data_fds.values()),  # bwrap closes each once read
            env={},  # nothing of ours in bwrap's environment (it needs none)
            start_new_session=True,
        )
    except BaseException as exc:
        os.close(info_r)
        if group:
            group.remove()
        if isinstance(exc, OSError):
            raise SandboxUnavailable(f"sandbox unavailable: cannot start bubblewrap ({exc})") from exc
        raise
    finally:
        os.close(info_w)
        for fd in (args_r, *data_fds.values()):
            if fd is not None:
                os.close(fd)

    out, err = _Capture(), _Capture()
    readers = asyncio.gather(out.drain(proc.stdout), err.drain(proc.stderr))
    timed_out = False
    usage = None
    try:
        try:
            await asyncio.wait_for(asyncio.shield(readers), timeout_s)
            await proc.wait()
        except TimeoutError:
            timed_out = True
            await _kill(proc, info_r)
            try:
                await asyncio.wait_for(readers, 10)
            except TimeoutError:
                readers.cancel()
        except BaseException:  # cancelled (episode ended): kill without awaiting, then leave
            _kill_init(proc, info_r)
            _kill_group(proc)
            if group:
                group.kill()
            readers.cancel()
            raise
    finally:
        os.close(info_r)
        if group:
            usage = group.usage()
            group.kill()  # nothing is left once bwrap is reaped (pid namespace); kept as a backstop
            group.remove()

    note = usage.note() if usage else ""
    if timed_out:
        raise SandboxTimeout(timeout_s, _result(None, out, err, OUTPUT_BUDGET_CHARS // 4, note, usage))
    if proc.returncode == 125 and cgroups.JOIN_FAILED in err.head:
        raise SandboxUnavailable("sandbox unavailable: the command could not join its cgroup")
    if proc.returncode != 0 and bytes(err.head).startswith(b"bwrap: ") and not out.total:
        reason = err.head.decode("utf-8", "replace").strip().replace(str(ws), "/workspace")
        raise SandboxUnavailable(f"sandbox unavailable: bubblewrap could not build the sandbox: {reason[:500]}")
    return _result(proc.returncode, out, err, OUTPUT_BUDGET_CHARS, note, usage)


def _result(code: int | None, out: _Capture, err: _Capture, budget: int, limits: str = "",
            usage: cgroups.Usage | None = None) -> RunResult:
    b_out, b_err = _split_budget(out.total, err.total, budget)
    return RunResult(code, out.text(b_out), err.text(b_err), limits, usage)
