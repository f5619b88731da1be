"""The suite as a verifiers environment (verifiers 0.4, ``import verifiers.v1 as vf``).

    env = load_environment(split="train", families=["downloads_cleanup"], seeds=2)
    ctx = vf.ModelContext(model=MODEL, client=vf.EvalClientConfig(base_url=URL))
    async with env.serving():
        episode = await env.run_episode(next(iter(env.taskset)), ctx)
    episode.traces[0].reward, episode.traces[0].metrics["passed"]

    python -m longhorizon.adapters.verifiers longhorizon_verifiers -m MODEL --client.base-url URL   # vf-eval

verifiers 0.4 is a rewrite (no MultiTurnEnv/ToolEnv/Rubric any more): an environment is an
``Env`` over a ``Taskset`` (config in, ``Task`` objects out), each task played by a ``Harness``
(the agent program) whose every model call goes through verifiers' interception server, an
OpenAI-compatible endpoint that records the turns on the ``Trace`` and relays them to the run's
client. Rewards are the Task's ``@vf.reward`` methods, metrics its ``@vf.metric`` ones.

- ``LonghorizonTaskset`` yields one ``LonghorizonTask`` per instance of a split (train unless
  told; a held-out task only with ``allow_holdout=True``: the CLI's firewall).
- ``LonghorizonHarness`` plays the task as a real Episode, in process: the task's World forked
  from a cache, one MCP session per app, the tool schemas the Episode shows (``APP__TOOL``),
  our limits and grader (``rollout.runner.LocalEpisodes``, the path ``longhorizon run`` takes),
  with ``OpenAIPolicy`` pointed at the interception endpoint as the model. A malformed tool
  call comes back as a tool error the model can read (env/episode.py).
- The reward ``grade`` is the Grade's dense reward; metrics ``passed`` (1.0 when every
  criterion is met) and ``tool_calls``; ``trace.info`` holds the whole Grade and the status.
- ``LonghorizonEnv`` is the single-agent env with a local runtime by default (verifiers'
  default is a remote sandbox; nothing of ours runs there).

The taskset id is ``longhorizon_verifiers``: verifiers finds tasksets by top-level module
name, which the top-level package ``longhorizon_verifiers`` (a re-export of this module) gives
to plain ``vf-eval``; importing this module registers the name too (``main`` does).

Needs verifiers 0.4.0 in an environment of its own: it pins ``mcp==2.0.0`` and we need 2.3
(its code runs on 2.3), so ``make venv-verifiers`` (.venvs/verifiers) installs it with
``--no-deps`` plus its other requirements.
"""

from __future__ import annotations

import sys
from typing import Any

import verifiers.v1 as vf
from verifiers.v1.runtimes import ProgramResult

from longhorizon.core.errors import UsageError
from longhorizon.env.episode import SYSTEM_PROMPT, Limits

TASKSET_ID = "longhorizon_verifiers"
if __name__ != "__main__":  # (``python -m`` imports the module under its own name in ``main``)
    sys.modules.setdefault(TASKSET_ID, sys.modules[__name__])


class LonghorizonTaskData(vf.TaskData):
    """One instance: ``id`` is our task id; the prompt is its instruction."""

    family: str = ""
    category: str = ""
    split: str = "train"
    apps: list[str] = []


class LonghorizonTask(vf.Task[LonghorizonTaskData, vf.State, vf.TaskConfig]):
    """Scored from the Grade the harness recorded on the trace (our grader, run once)."""

    @property
    def key(self) -> str:
        return self.data.id or self.hash

    @vf.reward
    async def grade(self, trace) -> float:
        """The Grade's dense reward (weighted fraction of criteria met)."""
        return float(_grade(trace)["reward"])

    @vf.metric
    async def passed(self, trace) -> float:
        """1.0 when every criterion is met."""
        return 1.0 if _grade(trace)["passed"] else 0.0

    @vf.metric
    async def tool_calls(self, trace) -> float:
        return float(trace.info.get("tool_calls", 0))


def _grade(trace) -> dict:
    grade = trace.info.get("grade")
    if grade is None:
        raise RuntimeError(f"no Grade on trace {trace.id}: the longhorizon harness did not play it")
    return grade


class LonghorizonTasksetConfig(vf.TasksetConfig):
    id: str = TASKSET_ID
    split: str = "train"
    seeds: int | None = None
    """Instances per family (None: the suite's size)."""
    families: list[str] | None = None
    task_ids: list[str] | None = None
    """These tasks, in this order, instead of the split's."""
    allow_holdout: bool = False
    """The firewall: a held-out task is refused unless this is set."""


class LonghorizonTaskset(vf.Taskset[LonghorizonTask, LonghorizonTasksetConfig]):
    def load(self):
        for task in _tasks(self.config):
            data = LonghorizonTaskData(
                id=task.id, name=task.id, prompt=task.instruction, system_prompt=SYSTEM_PROMPT,
                family=task.family, category=task.category, split=task.split, apps=list(task.apps))
            yield LonghorizonTask(data, self.config.task)


def _tasks(config: LonghorizonTasksetConfig) -> list:
    from longhorizon.tasks.registry import get_task, tasks_for

    if config.task_ids:
        tasks = [get_task(t) for t in config.task_ids]
    else:
        tasks = tasks_for(config.split, config.seeds, config.families)
    held = sorted({t.split for t in tasks} - {"train"})
    if held and not config.allow_holdout:
        raise UsageError(f"not serving {', '.join(held)} tasks as a verifiers environment unless asked: its rewards "
                         "train policies (prime-rl), and training rewards must come from the train split "
                         "(pass allow_holdout=True, or --env.taskset.allow-holdout true, to evaluate on it; "
                         "never train on it)")
    return tasks


class LonghorizonHarnessConfig(vf.HarnessConfig):
    id: str = TASKSET_ID
    max_turns: int = Limits.max_turns
    max_tool_calls: int = Limits.max_tool_calls
    max_wall_s: float | None = Limits.max_wall_s
    max_result_chars: int = Limits.max_result_chars
    max_call_s: float | None = Limits.max_call_s
    max_grade_s: float | None = Limits.max_grade_s

    def limits(self) -> Limits:
        return Limits(max_turns=self.max_turns, max_tool_calls=self.max_tool_calls, max_wall_s=self.max_wall_s,
                      max_result_chars=self.max_result_chars, max_call_s=self.max_call_s,
                      max_grade_s=self.max_grade_s)


class LonghorizonHarness(vf.Harness[LonghorizonHarnessConfig]):
    """Plays a task as our Episode in this process; every model call goes to ``endpoint``."""

    APPENDS_SYSTEM_PROMPT = True
    SUPPORTS_MCP = False  # its tools are the Episode's own sessions, not servers verifiers launches
    EXECUTES_CODE = False  # nothing runs in verifiers' runtime: the shell app has its own bubblewrap sandbox
    NEEDS_CONTAINER = False

    def __init__(self, config: LonghorizonHarnessConfig) -> None:
        super().__init__(config)
        self._cache = None

    def _episodes(self, policy):
        from longhorizon.core.world import WorldCache
        from longhorizon.rollout.runner import LocalEpisodes

        if self._cache is None:  # one cache per harness: each Task's World built once, forked per rollout
            self._cache = WorldCache()
        return LocalEpisodes(policy, self.config.limits(), cache=self._cache)

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, **kwargs: Any) -> ProgramResult:
        from longhorizon.tasks.registry import get_task
        from longhorizon.policies.openai_client import OpenAIPolicy

        task = get_task(data.id)
        # no sampling of our own (verifiers' client sets the run's) and no retries (its retry config owns them)
        async with OpenAIPolicy(base_url=endpoint, model=ctx.model, api_key=secret, temperature=None,
                                max_retries=0) as policy:
            traj = await self._episodes(policy).play(task, 0)
        trace.info.update(task_id=task.id, status=traj.status, tool_calls=len(traj.tool_calls),
                          world_hash=traj.provenance.get("world_hash"), grade=traj.grade.to_dict())
        return ProgramResult(exit_code=0, stdout=f"{task.id}: {traj.status}, reward {traj.grade.reward:.3f}",
                             stderr="")


class LonghorizonEnvConfig(vf.SingleAgentEnvConfig):
    """One agent seat whose runtime is local by default (verifiers' own default is a remote
    Prime sandbox; the Episode runs in this process whatever the runtime)."""

    agent: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())


class LonghorizonEnv(vf.Env[LonghorizonEnvConfig]):
    """The single-agent env (``SingleAgentEnv``'s ``run``) with the local default above."""

    async def run(self, task, agents) -> None:
        await agents.agent.run(task)


def load_environment(split: str = "train", *, seeds: int | None = None, families: list[str] | None = None,
                     task_ids: list[str] | None = None, allow_holdout: bool = False,
                     limits: Limits = Limits(), **agent: Any) -> LonghorizonEnv:
    """A verifiers env over ``split``'s tasks (or ``task_ids``), played by
    ``LonghorizonHarness`` under ``limits``, rewarded by our Grade. ``agent`` sets the seat's
    other ``vf.AgentConfig`` fields (``model``, ``client``, ``sampling``, ``runtime``, ...)."""
    taskset = LonghorizonTasksetConfig(split=split, seeds=seeds, families=families, task_ids=task_ids,
                                       allow_holdout=allow_holdout)
    _tasks(taskset)  # the firewall and unknown ids fail here, not at the first rollout
    agent.setdefault("runtime", vf.SubprocessConfig())
    seat = vf.AgentConfig(harness=LonghorizonHarnessConfig(**limits.to_dict()), **agent)
    return LonghorizonEnv(LonghorizonEnvConfig(taskset=taskset, agent=seat))


def main(argv: list[str] | None = None) -> None:
    """``vf-eval`` with this taskset registered (verifiers finds tasksets by module name):
    ``python -m longhorizon.adapters.verifiers longhorizon_verifiers -m MODEL --client.base-url URL``.
    Nothing is uploaded unless ``--push`` is given."""
    from verifiers.v1.cli.eval.main import main as vf_eval

    argv = list(sys.argv[1:] if argv is None else argv)
    if not any(a.startswith(("--push", "--no-push")) for a in argv) and "-h" not in argv and "--help" not in argv:
        argv.append("--no-push")
    try:
        vf_eval(argv)
    except UsageError as exc:  # one line, as our CLI says it (the holdout firewall, an unknown task id)
        print(f"longhorizon: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


__all__ = ["LonghorizonEnv", "LonghorizonHarness", "LonghorizonTaskset", "load_environment"]


if __name__ == "__main__":
    from longhorizon.adapters.verifiers import main as _main  # the module under its importable name

    _main()
