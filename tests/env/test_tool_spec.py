"""The tools an agent is offered are the apps' own, written compactly and losing nothing."""

from __future__ import annotations

import asyncio
import inspect
import json

import mcp

from longhorizon.apps import APPS, build_server
from longhorizon.core.policy import assistant, tool_call
from longhorizon.core.world import World
from longhorizon.env.episode import play_task
from longhorizon.env.tool_spec import compact_schema, openai_tool
from longhorizon.policies.scripted import ReplayPolicy
from longhorizon.tasks.registry import get_family


def _keys(schema) -> set[str]:
    """Every key used as a JSON-schema keyword (property names excluded)."""
    if isinstance(schema, list):
        return set().union(*map(_keys, schema)) if schema else set()
    if not isinstance(schema, dict):
        return set()
    out = set(schema)
    for key, value in schema.items():
        if key in ("properties", "$defs") and isinstance(value, dict):
            out |= set().union(*map(_keys, value.values())) if value else set()
        else:
            out |= _keys(value)
    return out


def _every_tool(tmp_path):
    async def listed(app):
        world = World.build(tmp_path / app, lambda root: None)
        async with mcp.Client(build_server(app, world), mode="legacy") as c:
            return (await c.list_tools()).tools

    return [(app, t) for app in APPS for t in asyncio.run(listed(app))]


def test_every_tool_keeps_its_arguments_types_and_required_list_without_titles_or_null_options(tmp_path):
    tools = _every_tool(tmp_path)
    collapsed = unions = 0
    for app, tool in tools:
        raw, spec = tool.input_schema, openai_tool(app, tool)["function"]
        params = spec["parameters"]
        assert spec["name"] == f"{app}__{tool.name}"
        assert spec["description"] == inspect.cleandoc(tool.description or "")
        assert "title" not in _keys(params), tool.name
        assert params.get("required", []) == raw.get("required", []), tool.name
        assert params.get("additionalProperties") == raw.get("additionalProperties"), tool.name
        assert list(params.get("properties", {})) == list(raw.get("properties", {})), tool.name
        for name, prop in raw.get("properties", {}).items():
            seen = params["properties"][name]
            options = prop.get("anyOf", [])
            if {"type": "null"} in options and prop.get("default", 0) is None and len(options) == 2:
                (other,) = [o for o in options if o != {"type": "null"}]
                assert seen["type"] == other["type"] and "default" not in seen, (tool.name, name)
                assert name not in params.get("required", [])
                collapsed += 1
            elif {"type": "null"} in options and prop.get("default", 0) is None and all(set(o) == {"type"}
                                                                                         for o in options):
                assert seen == {"type": [o["type"] for o in options if o != {"type": "null"}]}, (tool.name, name)
                assert name not in params.get("required", [])
                unions += 1
            else:
                assert seen.get("type") == prop.get("type") and seen.get("default") == prop.get("default"), name
    assert len(tools) > 100 and collapsed > 20  # the suite's apps have many optional arguments
    assert unions >= 3  # the tracker's sprint: a name or an id (search, create, update)


def test_a_property_named_title_is_an_argument_not_a_title():
    schema = {"type": "object", "title": "Args", "required": ["title"],
              "properties": {"title": {"type": "string", "title": "Title"},
                             "note": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None,
                                      "title": "Note", "description": "optional"},
                             "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 5}}}
    assert compact_schema(schema) == {
        "type": "object", "required": ["title"],
        "properties": {"title": {"type": "string"},
                       "note": {"type": "string", "description": "optional"},
                       # a null that is not the default stays a choice the schema offers
                       "limit": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": 5}}}


def test_an_optional_union_of_plain_types_is_a_type_list_and_a_richer_union_is_kept():
    union = {"anyOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}], "default": None,
             "description": "a name or an id"}
    assert compact_schema(union) == {"type": ["string", "integer"], "description": "a name or an id"}
    rich = {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "integer"}, {"type": "null"}], "default": None}
    assert compact_schema(rich) == rich  # a constraint on one option cannot be said as a type list


async def test_an_optional_argument_works_left_out_and_sent_as_an_explicit_null():
    task = get_family("sprint_planning").instance(0, 1)
    policy = ReplayPolicy(assistant("", [tool_call("c1", "tickets__list_users", json.dumps({}))]),
                          assistant("", [tool_call("c2", "tickets__list_users", json.dumps({"team": None}))]))
    traj = await play_task(task, policy)
    offered = next(t for t in traj.tools if t["function"]["name"] == "tickets__list_users")
    assert offered["function"]["parameters"]["properties"]["team"] == {"type": "string"}
    results = [c.result for c in traj.tool_calls]
    assert len(results) == 2 and not any(c.is_error for c in traj.tool_calls)
    assert json.loads(results[0]) == json.loads(results[1]) and len(json.loads(results[0])) > 1


async def test_a_type_list_argument_takes_each_of_its_types():
    task = get_family("sprint_planning").instance(0, 1)
    calls = [{"project": "PAY", "sprint": "backlog"}, {"project": "PAY", "sprint": 10_000}, {"project": "PAY"}]
    policy = ReplayPolicy(*(assistant("", [tool_call(f"c{i}", "tickets__search_tickets", json.dumps(a))])
                            for i, a in enumerate(calls)))
    traj = await play_task(task, policy)
    offered = next(t for t in traj.tools if t["function"]["name"] == "tickets__search_tickets")
    assert offered["function"]["parameters"]["properties"]["sprint"] == {"type": ["string", "integer"]}
    assert len(traj.tool_calls) == 3 and not traj.tool_calls[0].is_error
    # an id is read as an id (no such sprint: an error the agent can read, not a schema refusal)
    assert traj.tool_calls[1].is_error and "no sprint 10000" in traj.tool_calls[1].result
    assert json.loads(traj.tool_calls[2].result)["total"] > json.loads(traj.tool_calls[0].result)["total"]
