"""Fuzz: thousands of malformed tool calls across every app, through the Episode loop and the
Gymnasium env. Nothing raises, every answer is a readable error that names the problem, every
Trajectory round-trips through the run store, and each episode still answers a valid call.

The generator is seeded: a failure names the app, the case number and its category, and the
same seed replays it.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import subprocess
from dataclasses import dataclass
from typing import Any

import gymnasium
import pytest

import longhorizon.env.gym_env  # noqa: F401  registers longhorizon/Task-v0
from longhorizon.apps import APPS
from longhorizon.core.trajectory import Trajectory
from longhorizon.core.world import World
from longhorizon.env.episode import Episode, Limits, play
from longhorizon.rollout.store import RunStore
from longhorizon.tasks.registry import families

SEED = 20261201
CASES_PER_APP = 130  # x 16 apps = 2,080 through the Episode loop
GYM_CASES = 120      # x 2 tasks through gymnasium.make
SHELL_RUNS = 8       # shell calls that pass validation spawn bubblewrap (~30 ms each): keep them few

VALID = {  # a call each app answers in any World that has it, for "the episode still works"
    "files": ("files__list_dir", {}), "sheets": ("sheets__create_workbook", {"path": "after-fuzz.xlsx"}),
    "mail": ("mail__list_folders", {}), "calendar": ("calendar__list_people", {}),
    "shell": ("shell__run", {"command": "echo still-here"}), "docs": ("docs__list_documents", {}),
    "slides": ("slides__create_deck", {"path": "after-fuzz.pptx"}), "crm": ("crm__list_users", {}),
    "tickets": ("tickets__list_projects", {}), "store": ("store__get_store_info", {}),
    "chat": ("chat__list_channels", {}), "wiki": ("wiki__list_pages", {}), "search": ("search__list_sources", {}),
    "sql": ("sql__list_tables", {}), "travel": ("travel__get_policy", {}), "user": ("user__get_support_policy", {}),
}
SURROGATES = ["\ud800", "\udbff", "\udc00", "\udfff", "\ud83d"]
BARE_SDK = re.compile(r"\s*(Error:\s*)?Error executing tool \w+:?\s*")


@dataclass
class Case:
    category: str
    message: Any
    expect: tuple[str, ...] = ()   # substrings the answer must hold (the problem, named)
    error: bool = True             # the call must be refused (False: it may also succeed)
    call_id: str | None = None     # the id the record must carry, when the case sets one


# -- values, shaped by a tool's input schema ----------------------------------------------------

def _types(spec: dict) -> list[str]:
    if "anyOf" in spec:
        return [t for s in spec["anyOf"] for t in _types(s)]
    t = spec.get("type")
    return t if isinstance(t, list) else [t or "string"]


def plausible(rng: random.Random, spec: dict) -> Any:
    kind = next((t for t in _types(spec) if t != "null"), "string")
    return {
        "string": lambda: rng.choice(["", "x", "Downloads", "report.txt", "a.xlsx", "INV-1", "alice@example.com",
                                      "2026-03-10", "2026-03-10T09:00:00", "Sheet1", "A1", "general", "SELECT 1"]),
        "integer": lambda: rng.choice([0, 1, 2, 7, 100]),
        "number": lambda: rng.choice([0, 1.5, 99.99]),
        "boolean": lambda: rng.choice([True, False]),
        "array": lambda: rng.choice([[], ["x"], [["a", 1]]]),
        "object": lambda: rng.choice([{}, {"A1": "x"}]),
    }.get(kind, lambda: "x")()


def plausible_args(rng: random.Random, schema: dict, required_only: bool = False) -> dict:
    props = schema.get("properties") or {}
    required = set(schema.get("required") or [])
    return {k: plausible(rng, v) for k, v in props.items() if k in required or (not required_only and rng.random() < .5)}


def wrong_type(rng: random.Random, spec: dict) -> Any:
    """A value no type of the property accepts (pydantic's lax mode coerces some others)."""
    kinds = set(_types(spec))
    pool = []
    if not kinds & {"array"}:
        pool.append([1, {"x": None}])
    if not kinds & {"object"}:
        pool.append({"nested": {"x": 1}})
    if not kinds & {"string", "integer", "number", "array", "object"} and "null" not in kinds:
        pool.append("not-a-boolean")
    if kinds <= {"integer", "null"}:
        pool += ["twelve", 1.5]
    return rng.choice(pool)


PATHS = ["a\x00b.txt", "../../etc/passwd", "/etc/passwd", "../" * 40 + "x", "a/" * 3000 + "x", "/" + "y" * 5000,
         "~/x", "C:\\Windows\\system32", "./../.", "Downloads/../../..", "\\\\server\\share", "con", "...",
         "a" * 300, " " * 10, "\n"]
STRINGS = ["", " ", "\t\n", "\x00", "\x01\x1b[31mred\x1b[0m", "x" * 150_000, "é" * 5000, "🙂" * 2000,
           "'; DROP TABLE t; --", "%s%n%x", "{{7*7}}", "${HOME}", "\u202eevil", "null", "NaN", "-1"]
INTS = [-1, -(2 ** 63), 2 ** 63 - 1, 2 ** 64 - 1, -(2 ** 64) + 1, 10 ** 18, 0, 2 ** 31]


def shaped_value(rng: random.Random, name: str, spec: dict) -> Any:
    kinds = set(_types(spec))
    if "string" in kinds:
        pathlike = any(w in name for w in ("path", "file", "folder", "dest", "source", "src", "dst", "dir", "slug"))
        return rng.choice(PATHS if pathlike and rng.random() < .7 else STRINGS)
    if kinds & {"integer", "number"}:
        return rng.choice(INTS + ([1e308, -1e-308, 0.1] if "number" in kinds else []))
    if "array" in kinds:
        return rng.choice([[None] * 50, ["x" * 1000] * 100, [[1, 2]] * 20, [{"a": "b"}], list(range(2000))])
    if "object" in kinds:
        return rng.choice([{"": 1}, {"A1": None, "ZZZ99999": "x"}, {str(i): i for i in range(500)}])
    return rng.choice([None, 0, "x"])


def typo(rng: random.Random, name: str) -> str:
    if len(name) > 3 and rng.random() < .5:
        i = rng.randrange(len(name) - 1)
        return name[:i] + name[i + 1] + name[i] + name[i + 2:] if name[i] != name[i + 1] else name[:-1]
    return rng.choice([name[:-1], name + "s", name.upper(), name.replace("_", "")]) or "x"


def nested_dict(depth: int) -> dict:
    top = cur = {}
    for _ in range(depth):
        cur["k"] = {}
        cur = cur["k"]
    return top


# -- the generator --------------------------------------------------------------------------------

def message(name: Any, arguments: Any, call_id: Any = "f", content: Any = "") -> dict:
    return {"role": "assistant", "content": content,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}


def _prop(rng, schema, kinds=None):
    props = schema.get("properties") or {}
    names = [k for k, v in props.items() if kinds is None or set(_types(v)) & kinds]
    return rng.choice(names) if names else None


def categories(rng: random.Random, tool: dict, all_names: list[str]):
    """Each category: a function making one Case for ``tool`` (an OpenAI tool dict)."""
    name = tool["function"]["name"]
    schema = tool["function"]["parameters"]
    base = lambda: plausible_args(rng, schema, required_only=True)  # noqa: E731
    key = lambda: _prop(rng, schema) or "path"  # noqa: E731

    def surrogate_value():
        k = _prop(rng, schema, {"string"}) or key()
        s = rng.choice(SURROGATES)
        if rng.random() < .5:
            return Case("surrogate in a value", message(name, {**base(), k: f"a{s}b"}), ("not valid Unicode",))
        return Case("surrogate in a value (JSON escape)",
                    message(name, json.dumps({**base(), k: "x"}).replace('"x"', f'"a\\u{ord(s):04x}"')),
                    ("not valid Unicode",))

    def surrogate_name():
        return Case("surrogate in the tool name", message(name + rng.choice(SURROGATES), "{}"), ("unknown tool",))

    def surrogate_id():
        cid = "id-" + rng.choice(SURROGATES)
        return Case("surrogate in the call id", message(name, "{oops", call_id=cid), ("not valid JSON",),
                    call_id=cid.encode("utf-8", "backslashreplace").decode())

    return [
        surrogate_value,
        lambda: Case("surrogate in an argument name",
                     message(name, {**base(), "k" + rng.choice(SURROGATES): 1}), ("argument name", "Unicode")),
        surrogate_name,
        surrogate_id,
        lambda: Case("surrogate in the content", message(name, "[]", content="hm " + rng.choice(SURROGATES) * 3),
                     ("must be a JSON object",)),
        lambda: Case("deep JSON text", message(name, '{"%s": ' % key() + "[" * (d := rng.randint(40, 6000))
                                               + "]" * d + "}"), ("nest",)),
        lambda: Case("deep parsed dict", message(name, {key(): nested_dict(rng.randint(33, 3000))}), ("nest",)),
        lambda: Case("huge integer text", message(name, '{"%s": %s}' % (key(), "9" * rng.randint(4301, 8000))),
                     ("4,300 digits",)),
        lambda: Case("huge parsed integer", message(name, {**base(), key(): 10 ** rng.randint(20, 6000)}),
                     ("digits", "64-bit range")),
        lambda: Case("non-finite JSON text", message(name, '{"%s": %s}' % (
            key(), rng.choice(["NaN", "Infinity", "-Infinity", "1e999", "-1e999"]))), ("not a JSON number",)),
        lambda: Case("non-finite parsed float", message(name, {**base(), key(): rng.choice(
            [float("nan"), float("inf"), float("-inf")])}), ("not a JSON number",)),
        lambda: Case("null tool name", message(None, "{}"), ("must be a string", "got null")),
        lambda: Case("non-string tool name", message(rng.choice([42, 1.5, True, ["x"], {"n": name}]), "{}"),
                     ("must be a string",)),
        lambda: Case("function not an object", {"role": "assistant", "content": "", "tool_calls": [
            {"id": "f", "type": "function", "function": rng.choice([name, None, 7, [name], ""])}]},
            ("'function' object",)),
        lambda: Case("tool_calls not a list", {"role": "assistant", "content": "", "tool_calls": rng.choice([
            {"id": "f", "function": {"name": name, "arguments": "{}"}}, name, 7, True, 2.5])}, ("must be a list",)),
        lambda: Case("call not an object", {"role": "assistant", "content": "", "tool_calls": [
            rng.choice([name, 7, None, [name, "{}"], True])]}, ("must be an object",)),
        lambda: Case("raw non-object JSON", message(name, rng.choice(['[1, 2]', '"text"', "12", "null", "true",
                                                                     "-3.5", "[]", '[{"path": "x"}]'])),
                     ("must be a JSON object",)),
        lambda: Case("parsed non-object", message(name, rng.choice([[1], 5, None, True, ["{}"]])),
                     ("must be a JSON object",)),
        lambda: Case("invalid JSON text", message(name, rng.choice(
            ['{"a": ', "{not json", '{"a": 1,}', "{'a': 1}", '{"a": 1} trailing', "\x00", '{"a": "\\ud8"}',
             '{"a" 1}', "{" * 3])), ("not valid JSON",)),
        lambda: misspelled(rng, name, schema, base()),
        lambda: Case("extra argument", message(name, {**base(), (extra := f"bogus_{rng.randrange(99)}"): 1}),
                     ("unknown argument", extra)),
        lambda: Case("unknown tool", message(rng.choice([typo(rng, name), name.split("__")[0] + "__nope", "",
                                                         "__", name.upper()]), "{}"), ("unknown tool",)),
        lambda: missing_required(rng, name, schema),
        lambda: wrong_typed(rng, name, schema, base()),
        lambda: shaped(rng, name, schema, base()),
        lambda: shaped(rng, name, schema, base()),
        lambda: shaped(rng, name, schema, base()),
    ]


def misspelled(rng, name, schema, args):
    props = list(schema.get("properties") or {})
    if not props:
        return Case("extra argument", message(name, {"path": "x"}), ("unknown argument 'path'",))
    k = rng.choice(props)
    bad = typo(rng, k)
    if bad in props:
        bad = k + "_"
    args.pop(k, None)
    args[bad] = plausible(rng, schema["properties"][k])
    return Case("misspelled argument", message(name, args), ("unknown argument", bad))


def missing_required(rng, name, schema):
    required = list(schema.get("required") or [])
    if not required:
        return Case("raw non-object JSON", message(name, "[]"), ("must be a JSON object",))
    args = plausible_args(rng, schema, required_only=True)
    drop = rng.choice(required)
    del args[drop]
    return Case("missing required argument", message(name, args), (f"missing required argument '{drop}'",))


def wrong_typed(rng, name, schema, args):
    k = _prop(rng, schema)
    if k is None:
        return Case("extra argument", message(name, {"x": 1}), ("unknown argument 'x'",))
    args[k] = wrong_type(rng, schema["properties"][k])
    return Case("wrong type", message(name, args), (f"argument '{k}'",))


def shaped(rng, name, schema, args):
    """Schema-shaped but wrong: huge strings, bad paths, negative or 64-bit ints, odd arrays.
    The tool may refuse or accept it; either way the answer must be readable."""
    k = _prop(rng, schema)
    if k is not None:
        args[k] = shaped_value(rng, k, schema["properties"][k])
    return Case("schema-shaped value", message(name, json.dumps(args) if rng.random() < .5 else args), error=False)


def per_tool(rng: random.Random, tool: dict) -> list:
    """Schema-shaped but wrong, for every tool: wrong types, a missing required argument, extra
    and misspelled names, and values of the right type that no tool should choke on."""
    name, schema = tool["function"]["name"], tool["function"]["parameters"]
    base = lambda: plausible_args(rng, schema, required_only=True)  # noqa: E731
    return [lambda: wrong_typed(rng, name, schema, base()), lambda: missing_required(rng, name, schema),
            lambda: misspelled(rng, name, schema, base())] + [lambda: shaped(rng, name, schema, base())] * 4


def fuzz_cases(rng: random.Random, tools: list[dict], n: int, app: str) -> list[Case]:
    """``per_tool`` for each tool, then every category in turn on random tools, until there are
    at least ``n`` cases and each category has come up at least 3 times."""
    names = [t["function"]["name"] for t in tools]
    cases: list[Case] = []
    runs = 0

    def add(case: Case) -> None:
        nonlocal runs
        if app == "shell" and not case.error:  # would spawn the sandbox
            if runs >= SHELL_RUNS:
                return
            runs += 1
        cases.append(case)

    for tool in tools:
        for make in per_tool(rng, tool):
            add(make())
    i = 0
    n_categories = len(categories(rng, tools[0], names))
    while len(cases) < n or i < 3 * n_categories:
        tool = tools[rng.randrange(len(tools))]
        add(categories(rng, tool, names)[i % n_categories]())
        i += 1
    return cases


# -- checks ----------------------------------------------------------------------------------------

def check_answer(case: Case, text: Any, is_error: bool, where: str, secrets: list[str]) -> None:
    assert isinstance(text, str), where
    text.encode("utf-8")  # valid UTF-8 under the writer's (strict) policy
    assert "Traceback" not in text, where
    assert not any(s in text for s in secrets), f"{where}: the World's host path leaked: {text[:300]!r}"
    if case.error:
        assert is_error, f"{where}: expected an error, got {text[:300]!r}"
    if is_error:
        assert text.strip() and text.startswith("Error"), where
        assert not BARE_SDK.fullmatch(text), f"{where}: the bare SDK text {text!r}"
    for want in case.expect:
        assert want in text, f"{where}: {want!r} not in {text[:400]!r}"


def check_round_trip(traj: Trajectory, store: RunStore) -> None:
    store.add_trajectory(traj)
    raw = (store.dir / "trajectories.jsonl").read_bytes().decode("utf-8")
    row = json.loads(raw.splitlines()[-1], parse_constant=lambda c: pytest.fail(f"non-strict JSON: {c}"))
    back = Trajectory.from_dict(row)
    assert json.loads(back.to_json()) == row
    assert len(back.tool_calls) == len(traj.tool_calls) and back.status == traj.status
    assert store.trajectories()[-1] == row


def family_for(app: str):
    """The training family using ``app`` with the fewest other apps (a small World to build)."""
    return min((f for f in families() if app in f.apps and not f.holdout_family),
               key=lambda f: (len(f.apps), f.name))


class FuzzPolicy:
    name = "fuzz"

    def __init__(self, replies):
        self.replies = list(replies)

    def describe(self):
        return {"policy": self.name}

    async def act(self, messages, tools, ctx):
        return self.replies.pop(0) if self.replies else {"role": "assistant", "content": "done"}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = RunStore(tmp_path_factory.mktemp("fuzz") / "run")
    s.open({"fuzz": SEED})
    return s


@pytest.fixture
def world_dir(tmp_path):
    """Where a fuzzed World lives. Fuzzed paths can leave folders thousands deep, which
    ``shutil.rmtree`` (pytest's clean-up) cannot remove: ``rm -rf`` can."""
    yield tmp_path / "world"
    subprocess.run(["rm", "-rf", str(tmp_path / "world")], check=True)


@pytest.mark.parametrize("app", APPS)
def test_malformed_calls_to_every_app_through_the_episode(app, world_dir, store):
    rng = random.Random(f"{SEED}-{app}")
    task = family_for(app).generate(1)
    world = World.build(world_dir, task.build)

    async def tools():
        async with Episode(task, world) as ep:
            return [t for t in ep.tools if t["function"]["name"].startswith(app + "__")]

    app_tools = asyncio.run(tools())
    cases = fuzz_cases(rng, app_tools, CASES_PER_APP, app)
    assert len(cases) >= CASES_PER_APP
    valid_name, valid_args = VALID[app]
    replies = [c.message for c in cases] + [message(valid_name, json.dumps(valid_args), call_id="valid")]
    limits = Limits(max_turns=len(replies) + 2, max_tool_calls=10 * len(replies), max_wall_s=300)
    traj = asyncio.run(play(task, FuzzPolicy(replies), world, limits=limits))  # nothing may raise

    assert traj.status == "completed" and traj.grade is not None
    assert len(traj.tool_calls) == len(cases) + 1
    secrets = [str(world.root.resolve()), str(world_dir)]
    for k, (case, rec) in enumerate(zip(cases, traj.tool_calls)):
        where = f"{app} case {k} ({case.category}, seed {SEED})"
        check_answer(case, rec.result, rec.is_error, where, secrets)
        assert isinstance(rec.name, str) and isinstance(rec.id, str) and rec.id.encode("utf-8"), where
        if case.call_id:
            assert rec.id == case.call_id, where
    last = traj.tool_calls[-1]
    assert not last.is_error, f"{app}: the valid call after the fuzz failed: {last.result[:300]}"
    check_round_trip(traj, store)
    assert {c.category for c in cases} >= {"deep JSON text", "huge parsed integer", "tool_calls not a list",
                                           "surrogate in a value", "misspelled argument", "schema-shaped value"}


GYM_TASKS = [family_for("files").generate(2).id, family_for("mail").generate(2).id]


@pytest.mark.parametrize("task_id", GYM_TASKS)
def test_malformed_calls_through_the_gymnasium_env(task_id, store):
    env = gymnasium.make("longhorizon/Task-v0", task_id=task_id, limits=Limits(max_turns=1000, max_tool_calls=5000))
    try:
        obs, info = env.reset(seed=0)
        app = env.unwrapped.task.apps[0]
        tools = [t for t in info["tools"] if t["function"]["name"].startswith(app + "__")]
        rng = random.Random(f"{SEED}-gym-{task_id}")
        cases = fuzz_cases(rng, tools, GYM_CASES, app)
        secrets = [str(env.unwrapped.world.root.resolve())]
        for k, case in enumerate(cases):
            obs, reward, terminated, truncated, info = env.step(case.message)  # never raises
            assert not terminated and not truncated and reward == 0.0
            answer = obs[-1]
            assert answer["role"] == "tool"
            rec = env.unwrapped.trajectory.tool_calls[-1]
            check_answer(case, answer["content"], rec.is_error, f"gym {task_id} case {k} ({case.category})", secrets)
        valid_name, valid_args = VALID[app]
        obs, reward, terminated, truncated, info = env.step(message(valid_name, json.dumps(valid_args)))
        assert not env.unwrapped.trajectory.tool_calls[-1].is_error
        obs, reward, terminated, truncated, info = env.step({"role": "assistant", "content": "done"})
        assert terminated and "grade" in info
        check_round_trip(info["trajectory"], store)
    finally:
        env.close()
