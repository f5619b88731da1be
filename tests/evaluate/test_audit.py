"""The firewall audit: planted overlaps with BFCL's real data are flagged, the suite's own text isn't.

BFCL's texts are read at test time from the bfcl-eval package in .venvs/bfcl (made by `make
bfcl-venv`); a few of its data files are copied into a temporary folder as the audit's source.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from longhorizon.cli import main
from longhorizon.evaluate import audit as A
from longhorizon.evaluate.bfcl import ensure_venv
from longhorizon.tasks.registry import tasks_for

FAMILY = "downloads_cleanup"
FILES = ("BFCL_v4_simple_python.json", "BFCL_v4_live_multiple.json")


@pytest.fixture(scope="module")
def bfcl_root(tmp_path_factory) -> Path:
    """A folder holding bfcl_eval/data/ with the first 40 entries of two of BFCL's data files."""
    py = ensure_venv(quiet=True)
    data = Path(subprocess.run([str(py), "-c", "import bfcl_eval, pathlib; print(pathlib.Path(bfcl_eval.__file__).parent / 'data')"],
                               capture_output=True, text=True, check=True).stdout.strip())
    root = tmp_path_factory.mktemp("bfcl")
    (root / "bfcl_eval" / "data").mkdir(parents=True)
    for name in FILES:
        lines = (data / name).read_text().splitlines()[:40]
        (root / "bfcl_eval" / "data" / name).write_text("\n".join(lines) + "\n")
    return root


@pytest.fixture(scope="module")
def bfcl(bfcl_root):
    return A.bfcl_external(bfcl_root)


def _question(docs, k: int = 5) -> A.Doc:
    return [d for d in docs if d.kind == "question" and len(A.words(d.text)) >= 15][k]


def _suite_docs() -> list[A.Doc]:
    return A.suite_texts(tasks_for("train", 1, [FAMILY]), worlds=True)


def test_a_lightly_edited_copy_of_a_bfcl_question_inside_a_world_file_is_flagged(bfcl):
    docs, _ = bfcl
    q = _question(docs)
    edited = q.text.replace("the ", "a ", 1) + " Thanks!"
    planted = A.Doc("internal", "suite", "world", "planted:notes.md",
                    "Meeting notes from Tuesday about the quarterly plan.\n" + edited + "\nNext steps: none.")
    rep = A.audit(_suite_docs() + [planted], docs, [], [])
    flagged = {(r["internal"]["ref"], r["external"]["ref"]) for r in rep["near_duplicates"]}
    assert ("planted:notes.md", q.ref) in flagged
    assert all(r["internal"]["ref"] == "planted:notes.md" for r in rep["near_duplicates"])
    assert not rep["passed"]


def test_a_shared_13_word_span_is_flagged_even_inside_a_long_text(bfcl):
    docs, _ = bfcl
    q = max((d for d in docs if d.kind == "question"), key=lambda d: len(A.words(d.text)))
    span = " ".join(A.words(q.text)[:13])
    filler = " ".join(f"word{i}" for i in range(300))
    planted = A.Doc("internal", "sft", "sft", "planted.jsonl:1", f"{filler} {span} {filler}")
    rep = A.audit([planted], docs, [], [])
    assert [(r["internal"]["ref"], r["external"]["ref"], r["span"]) for r in rep["verbatim_spans"]] == \
        [("planted.jsonl:1", q.ref, span)]


def test_the_suites_own_instructions_and_worlds_are_not_flagged_against_bfcl(bfcl):
    docs, tools = bfcl
    rep = A.audit(_suite_docs(), docs, A.suite_tools(), tools)
    assert rep["near_duplicates"] == [] and rep["verbatim_spans"] == [] and rep["identical_schemas"] == []
    assert rep["internal"]["texts"]["suite/world"] > 0 and rep["passed"]


def test_an_identical_tool_schema_is_flagged_and_a_same_name_alone_is_only_listed():
    ours = [t for t in A.suite_tools() if t.params][0]
    copy = A.Tool("bfcl", "entry_1", ours.name, dict(ours.params), "anything")
    renamed_param = A.Tool("bfcl", "entry_2", ours.name, {"other": "string"}, "anything")
    rep = A.tool_overlap([ours], [copy, renamed_param])
    assert [(r["internal"], r["external"]) for r in rep["identical_schemas"]] == [(ours.ref, "bfcl:entry_1")]
    assert [r["name"] for r in rep["identical_names"]] == [ours.name]


def test_audit_command_exits_1_on_planted_sft_data_and_0_without(bfcl_root, tmp_path, capsys):
    docs, _ = A.bfcl_external(bfcl_root)
    sft = tmp_path / "sft.jsonl"
    sft.write_text(json.dumps({"messages": [{"role": "user", "content": _question(docs).text}]}) + "\n")
    base = ["audit", "--benchmarks", "bfcl", "--bfcl", str(bfcl_root), "--family", FAMILY, "--seeds", "1",
            "--no-worlds", "--quiet", "--format", "json"]
    assert main(base + ["--sft-data", str(sft), "--out", str(tmp_path / "a")]) == 1
    rep = json.loads((tmp_path / "a" / "audit.json").read_text())
    assert rep["near_duplicates"][0]["internal"]["ref"] == "sft.jsonl:1"
    assert "FAILED" in (tmp_path / "a" / "audit.md").read_text()
    capsys.readouterr()
    assert main(base) == 0
    assert json.loads(capsys.readouterr().out)["passed"] is True


def test_tau2_tools_are_read_from_toolkit_sources_with_their_typed_parameters(tmp_path):
    src = tmp_path / "tau2" / "domains" / "shop"
    src.mkdir(parents=True)
    (src / "tools.py").write_text(
        "class Tools:\n"
        "    @is_tool(ToolType.READ)\n"
        "    def get_order(self, order_id: str, verbose: bool) -> dict:\n"
        "        '''Get an order by its id.'''\n"
        "    def helper(self, x: int):\n"
        "        pass\n")
    _, tools = A.tau2_external(tmp_path)
    assert [(t.name, t.params, t.description) for t in tools] == \
        [("get_order", {"order_id": "string", "verbose": "boolean"}, "Get an order by its id.")]
