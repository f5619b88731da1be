"""The `shell` app: a real bash in a bubblewrap sandbox over the World's workspace.

Only the workspace is visible and writable (at ``/workspace``); the World's ``state/`` and
the project are not mounted at all. A failing command is a normal result the agent reads;
a timeout or a missing sandbox is a tool error. Without bubblewrap nothing runs. Processes and
memory per command are bounded where the host allows (see ``sandbox``): a limit that stopped
something is named under ``--- limits ---`` in the result.
"""

from __future__ import annotations

from mcp.server.mcpserver.exceptions import ToolError

from longhorizon.apps.common import ACT, AppServer, server_builder
from longhorizon.apps.shell import sandbox

INSTRUCTIONS = (
    "A bash shell in a sandbox. The working directory /workspace holds the shared files; "
    "everything else is read-only, /tmp is scratch that is wiped after each command, and "
    "there is no network. Each call is a fresh shell: cd and variables do not carry over."
)


def make_app(world):
    ws = world.workspace
    srv = AppServer("shell", instructions=INSTRUCTIONS)

    @srv.tool(ACT)
    async def run(command: str, timeout_s: int = 30) -> str:
        """Run a bash command (`bash -c`) in a sandboxed Linux shell and return its exit code,
        stdout and stderr.

        The working directory is /workspace, the shared files (write results there). Available:
        coreutils, grep, sed, awk, sort, uniq, find, gzip/zcat, tar, python3 (standard library).
        No network. Outside /workspace the system is read-only and /tmp is wiped after each call.
        Each call is a fresh shell (cd and variables do not persist). timeout_s: 1-120 seconds;
        the command and everything it started is killed after that. A command may run at most
        256 processes at once and use 4 GiB of memory in all. Long output is cut in the
        middle: redirect it to a file and use head/tail/grep."""
        if not isinstance(command, str) or not command.strip():
            raise ToolError("command must be a non-empty string")
        if "\x00" in command:
            raise ToolError("command contains a NUL byte")
        if len(command) > sandbox.MAX_COMMAND_CHARS:
            raise ToolError(
                f"command is {len(command)} characters (limit {sandbox.MAX_COMMAND_CHARS}); "
                "write long scripts to a file in pieces and run the file"
            )
        if not 1 <= timeout_s <= sandbox.MAX_TIMEOUT_S:
            raise ToolError(f"timeout_s must be between 1 and {sandbox.MAX_TIMEOUT_S} seconds, got {timeout_s}")
        try:
            result = await sandbox.run_sandboxed(command, ws, timeout_s)
        except sandbox.SandboxUnavailable as exc:
            raise ToolError(str(exc)) from None
        except sandbox.SandboxTimeout as exc:
            raise ToolError(
                f"command timed out after {exc.timeout_s} s and was killed with everything it "
                f"started; use a larger timeout_s (max {sandbox.MAX_TIMEOUT_S}) or a quicker "
                f"command. Output so far:\n{exc.partial.render()}"
            ) from None
        return result.render()

    return srv


build_server = server_builder(make_app)
