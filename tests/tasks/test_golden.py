"""Golden hashes of the suite: per family and seed (0, 1, 100000), the built World's hash, the
instruction's hash and the criteria ids, recorded in golden_hashes.json with SUITE_VERSION.

A refactor (the family kit, a shared builder) must keep every instance byte for byte; a change
to a family's World, instruction or criteria is made on purpose: bump ``SUITE_VERSION`` (every
Trajectory records it) and rewrite the file:

    LONGHORIZON_WRITE_GOLDEN=1 .venv/bin/pytest tests/tasks/test_golden.py
"""

import hashlib
import json
import os
from pathlib import Path

import pytest

from longhorizon.core.task import HOLDOUT_SEED_BASE, SUITE_VERSION
from longhorizon.core.world import World
from longhorizon.tasks.registry import families

GOLDEN = Path(__file__).with_name("golden_hashes.json")
SEEDS = (0, 1, HOLDOUT_SEED_BASE)


def fingerprint(task, folder: Path) -> dict:
    return {"world": World.build(folder, task.build).hash(),
            "instruction": hashlib.sha256(task.instruction.encode()).hexdigest(),
            "criteria": [c.id for c in task.criteria]}


def current(tmp: Path) -> dict:
    return {t.id: fingerprint(t, tmp / t.id) for f in families() for t in (f.generate(s) for s in SEEDS)}


def test_every_instance_is_what_the_golden_file_records_for_this_suite_version(tmp_path):
    now = current(tmp_path)
    if os.environ.get("LONGHORIZON_WRITE_GOLDEN") == "1":
        GOLDEN.write_text(json.dumps({"suite_version": SUITE_VERSION, "tasks": now}, indent=1, sort_keys=True) + "\n")
    golden = json.loads(GOLDEN.read_text())
    assert golden["suite_version"] == SUITE_VERSION, (
        f"SUITE_VERSION is {SUITE_VERSION}, the golden file records {golden['suite_version']}: "
        "rewrite it (module docstring) in the commit that bumps the version")
    changed = sorted(k for k in now.keys() & golden["tasks"].keys() if now[k] != golden["tasks"][k])
    assert not changed, (f"{len(changed)} instances changed without a SUITE_VERSION bump: {changed[:10]} "
                         "(bump it on purpose and rewrite the golden file; module docstring)")
    assert sorted(now) == sorted(golden["tasks"]), "families or seeds added or removed: rewrite the golden file"


@pytest.mark.parametrize("what", ["world", "instruction", "criteria"])
def test_the_golden_check_sees_a_change_to_each_part(tmp_path, what):
    task = next(iter(families())).generate(0)
    base = fingerprint(task, tmp_path / "a")
    if what == "world":
        def build(root, _inner=task.build):
            _inner(root)
            (Path(root) / "workspace" / "extra.txt").write_text("x")
        task.build = build
    elif what == "instruction":
        task.instruction += " "
    else:
        task.criteria = task.criteria[:-1]
    assert fingerprint(task, tmp_path / "b")[what] != base[what]
