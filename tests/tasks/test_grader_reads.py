"""Graders read what the agent wrote within a budget (tasks/common.py): a file over it fails
the criterion that reads it, with a note, without being read. Sizes are apparent sizes: the
agent's shell can make a sparse file of gigabytes that costs no disk."""

import gzip

import pytest

from longhorizon.core.world import World
from longhorizon.env.handoff import grade_world
from longhorizon.tasks.common import GRADE_READ_BYTES, OutputTooLarge, output_bytes, output_text, same_bytes
from longhorizon.tasks.registry import get_family


def sparse(path, size, head=b""):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        f.write(head)
        f.truncate(size)


def test_output_bytes_refuses_a_file_over_the_budget_without_reading_it(tmp_path):
    sparse(tmp_path / "out.csv", 250 * 2**20, head=b"a,b\n")
    with pytest.raises(OutputTooLarge, match="over the 33,554,432 a grader reads"):
        output_bytes(tmp_path / "out.csv")
    assert output_bytes(tmp_path / "out.csv", limit=250 * 2**20)[:4] == b"a,b\n"


def test_output_text_reads_as_path_read_text_does(tmp_path):
    p = tmp_path / "out.csv"
    p.write_bytes("\ufeffa,b\r\n1,2\rx\n".encode())
    for encoding in ("utf-8", "utf-8-sig"):
        assert output_text(p, encoding=encoding) == p.read_text(encoding=encoding)
    p.write_bytes(b"ok \xff\r\n")
    assert output_text(p, errors="replace") == p.read_text(errors="replace")


def test_same_bytes_compares_sizes_before_reading(tmp_path):
    sparse(tmp_path / "seed.txt", 4 * GRADE_READ_BYTES, head=b"hello")
    assert not same_bytes(tmp_path / "seed.txt", b"hello")
    (tmp_path / "seed.txt").write_bytes(b"hello")
    assert same_bytes(tmp_path / "seed.txt", b"hello") and not same_bytes(tmp_path / "gone.txt", b"hello")
    (tmp_path / "link.txt").symlink_to(tmp_path / "seed.txt")
    assert not same_bytes(tmp_path / "link.txt", b"hello")


def test_sparse_outputs_fail_their_criteria_with_a_note(tmp_path):
    """`grade --world` on a World whose two reports are sparse files over the budget."""
    family = get_family("log_error_summary")
    task = family.generate(0)
    world = World.build(tmp_path / "w", task.build)
    for rel in ("reports/error_summary.csv", "reports/repeat_failures.txt"):
        sparse(world.file(rel), GRADE_READ_BYTES + 2**20, head=b"service,errors,top_error\n")
    report = grade_world(task, world.root)
    notes = {c["id"]: c["note"] for c in report["criteria"] if c["passed"] is False}
    assert "a grader reads" in notes["summary_csv"] and "a grader reads" in notes["repeat_request_ids"]


def test_a_gzip_bomb_is_not_inflated_by_the_rotation_grader():
    from longhorizon.tasks.scripting.report_rotation import _gunzips_to

    bomb = gzip.compress(b"\0" * (16 * 2**20))
    assert not _gunzips_to(bomb, b"report\n")
    assert _gunzips_to(gzip.compress(b"report\n"), b"report\n")
    assert not _gunzips_to(gzip.compress(b"report\n") + gzip.compress(b"more"), b"report\n")
