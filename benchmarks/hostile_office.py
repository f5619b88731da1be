"""Hostile office files and formulas: what each costs the app tool that reads it and the
grader that checks it, in time and peak memory.

Each case runs in its own child process; its peak memory (its own ru_maxrss) is compared
with a baseline child of the same kind and mode that reads a plain file through the same
code (same imports, same tool or reader), so "extra" is what the hostile input costs. Time is
the call itself (perf_counter in the child, imports excluded). Children run with a 4 GiB
address-space limit and a 300 s wall limit, so a regression cannot take the machine down.

Cases: zip bombs of each kind (the sizes reported, and worse), files at the edge of each
budget (the largest still opened: the real bound), a docx table cell spanning 10^8 columns,
an xlsx merge of A1:XFD1048576, and formulas (``=999999999^999999999``, a 26-cell ``=A1&A1``
doubling chain, a 20,000-cell reference chain, COUNTIF over megabytes of text).

Run: `.venv/bin/python benchmarks/hostile_office.py` (a minute or two). Prints a table.
"""

from __future__ import annotations

import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

TARGET_MIB = 256
CHILD_SECONDS = 300
CHILD_ADDRESS_SPACE = 4 << 30


# -- hostile files ---------------------------------------------------------------------------------

def _rezip(data: bytes, replace: dict[str, bytes] | None = None, add: dict[str, bytes | int] | None = None,
           stored: bool = False) -> bytes:
    """``testing.hostile_files.rezip`` deflated at level 9 (the tightest bombs), or ``stored``."""
    from longhorizon.testing.hostile_files import rezip

    return rezip(data, replace, add, method=zipfile.ZIP_STORED if stored else zipfile.ZIP_DEFLATED, compresslevel=9)


def plain(kind: str) -> bytes:
    from openpyxl import Workbook

    from longhorizon.apps.docs.state import build_document, document_bytes
    from longhorizon.apps.sheets.state import workbook_bytes
    from longhorizon.apps.slides.state import build_presentation, presentation_bytes

    if kind == "xlsx":
        wb = Workbook()
        wb.active.append(["Item", "Cost"])
        wb.active.append(["pens", 2])
        return workbook_bytes(wb)
    if kind == "docx":
        return document_bytes(build_document([("Title", "Plan"), "Body text.", {"table": [["a", "b"], ["c", "d"]]}]))
    return presentation_bytes(build_presentation([{"title": "Q3", "bullets": ["up"]}]))


def _inject(kind: str, part: str, marker: bytes, body: bytes, after: bool = True, stored: bool = False) -> bytes:
    data = plain(kind)
    xml = zipfile.ZipFile(io.BytesIO(data)).read(part)
    i = xml.index(marker) + (len(marker) if after else 0)
    return _rezip(data, replace={part: xml[:i] + body + xml[i:]}, stored=stored)


def xlsx_cells(n: int, stored: bool = False) -> bytes:
    """A sheet of ``n`` empty cells ``<c/>`` (openpyxl makes an object for each)."""
    per = 16_384
    rows = b"".join(b'<row r="%d">' % (r + 3) + b"<c/>" * min(per, n - r * per) + b"</row>"
                    for r in range((n + per - 1) // per))
    return _inject("xlsx", "xl/worksheets/sheet1.xml", b"</row>", rows, stored=stored)


def docx_paragraphs(n: int, stored: bool = False) -> bytes:
    return _inject("docx", "word/document.xml", b"<w:body>", b"<w:p/>" * n, stored=stored)


def pptx_paragraphs(n: int, stored: bool = False) -> bytes:
    return _inject("pptx", "ppt/slides/slide1.xml", b"<a:p>", b"<a:p/>" * n, after=False, stored=stored)


def zeros(kind: str) -> bytes:
    return _rezip(plain(kind), add={"customXml/item9.xml": 512})


def docx_span() -> bytes:
    return _inject("docx", "word/document.xml", b"<w:tc><w:tcPr>", b'<w:gridSpan w:val="100000000"/>')


def xlsx_merge() -> bytes:
    return _inject("xlsx", "xl/worksheets/sheet1.xml", b"</sheetData>",
                   b'<mergeCells count="1"><mergeCell ref="A1:XFD1048576"/></mergeCells>')


def xlsx_formulas(cells: dict[str, object]) -> bytes:
    """A workbook of these cells, stored (so that repetitive text passes the ratio check)."""
    from openpyxl import Workbook

    from longhorizon.apps.sheets.state import workbook_bytes

    wb = Workbook()
    for coord, value in cells.items():
        wb.active[coord] = value
    return _rezip(workbook_bytes(wb), stored=True)


def cases() -> list[tuple[str, str, callable]]:
    """(name, kind, make bytes)."""
    from longhorizon.core.office_budget import BUDGETS, check_package

    # the most elements that still fit the markup budget, next to the plain file's own markup
    edge = {k: BUDGETS[f".{k}"].markup - check_package(plain(k), f".{k}").markup - 1_000 + 100
            for k in ("xlsx", "docx", "pptx")}
    return [
        ("xlsx 4M cells (zip ~20 KB)", "xlsx", lambda: xlsx_cells(4_000_000)),
        ("xlsx 40M cells (zip ~200 KB)", "xlsx", lambda: xlsx_cells(40_000_000)),
        ("xlsx 512 MiB of zeros", "xlsx", lambda: zeros("xlsx")),
        ("xlsx 3,000 parts", "xlsx", lambda: _rezip(plain("xlsx"), add={f"x/p{i}.xml": b"" for i in range(3000)})),
        ("xlsx merge A1:XFD1048576", "xlsx", xlsx_merge),
        (f"xlsx at the budget ({edge['xlsx'] - 100:,} cells)", "xlsx", lambda: xlsx_cells(edge["xlsx"] - 100, True)),
        ("docx 20M paragraphs (zip ~130 KB)", "docx", lambda: docx_paragraphs(20_000_000)),
        ("docx 512 MiB of zeros", "docx", lambda: zeros("docx")),
        ("docx cell spanning 10^8 columns", "docx", docx_span),
        (f"docx at the budget ({edge['docx'] - 100:,} paras)", "docx",
         lambda: docx_paragraphs(edge["docx"] - 100, True)),
        ("pptx 20M paragraphs (zip ~120 KB)", "pptx", lambda: pptx_paragraphs(20_000_000)),
        ("pptx 512 MiB of zeros", "pptx", lambda: zeros("pptx")),
        (f"pptx at the budget ({edge['pptx'] - 100:,} paras)", "pptx",
         lambda: pptx_paragraphs(edge["pptx"] - 100, True)),
        ("=999999999^999999999", "xlsx", lambda: xlsx_formulas({"A1": "=999999999^999999999", "A2": "=A1+1"})),
        ("26 cells of =A1&A1 (20 chars)", "xlsx",
         lambda: xlsx_formulas({"A1": "x" * 20} | {f"A{r}": f"=A{r - 1}&A{r - 1}" for r in range(2, 27)})),
        ("20,000-cell reference chain", "xlsx",
         lambda: xlsx_formulas({f"A{r}": f"=A{r + 1}+1" for r in range(1, 20_000)} | {"A20000": 1})),
        ("COUNTIFs over 8 MiB of text", "xlsx",
         lambda: xlsx_formulas({f"A{r}": "y" * 32_000 for r in range(1, 257)}
                               | {f"B{r}": '=COUNTIF(A1:A256,"*y*z")' for r in range(1, 2001)})),
    ]


# -- the child: one tool call or one grade ---------------------------------------------------------

TOOLS = {"xlsx": ("sheets", "read_range", {"sheet": "Sheet"}), "docx": ("docs", "read_document", {}),
         "pptx": ("slides", "list_slides", {})}


def child(mode: str, kind: str, root: str) -> None:
    import asyncio

    from longhorizon.apps.docs.server import make_app as docs_app
    from longhorizon.apps.docs.state import read_blocks
    from longhorizon.apps.sheets.server import make_app as sheets_app
    from longhorizon.apps.slides.server import make_app as slides_app
    from longhorizon.apps.slides.state import read_deck
    from longhorizon.core.grade import Criterion
    from longhorizon.core.task import Task
    from longhorizon.core.world import World
    from longhorizon.tasks.common import read_table

    world = World(root)
    name = f"f.{kind}"
    t = time.perf_counter()
    if mode == "tool":
        app, tool, args = TOOLS[kind]
        make = {"sheets": sheets_app, "docs": docs_app, "slides": slides_app}[app]
        session = make(world).session()
        r = asyncio.run(session.call_tool(tool, {"path": name, **args}))
        outcome = ("error: " if r.is_error else "ok: ") + r.content[0].text
    else:
        read = {"xlsx": lambda w: read_table(w.file(name), "Sheet"), "docx": lambda w: read_blocks(w.file(name)),
                "pptx": lambda w: read_deck(w.file(name))}[kind]
        crit = Criterion("reads", "reads the file", "final_state", lambda w, tr: (read(w) is not None, "read"))
        task = Task("t", "t", "c", "train", 1, "", (), lambda r: None, lambda: iter(()), [crit])
        res = task.grade(world, None).results[0]
        outcome = ("passed: " if res.passed else "failed: ") + res.note
    seconds = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(json.dumps({"seconds": seconds, "rss_mib": peak, "outcome": outcome}))


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="hostile-office-"))
    base: dict[tuple[str, str], float] = {}
    for kind in ("xlsx", "docx", "pptx"):
        for mode in ("tool", "grade"):
            _, rss, _ = _measure(mode, kind, plain(kind), tmp)
            base[(mode, kind)] = rss
    print(f"baseline children (plain file, peak RSS MiB): "
          + ", ".join(f"{k} {m} {v:.0f}" for (m, k), v in base.items()))
    print(f"\n{'case':<34} {'zip KB':>7} | {'tool s':>7} {'+MiB':>6} | {'grade s':>7} {'+MiB':>6} | outcome (tool)")
    worst_s, worst_mib = 0.0, 0.0
    for name, kind, make in cases():
        data = make()
        cells = []
        outcome = ""
        for mode in ("tool", "grade"):
            secs, rss, text = _measure(mode, kind, data, tmp)
            extra = rss - base[(mode, kind)]
            cells.append((secs, extra))
            worst_mib = max(worst_mib, extra)
            worst_s = max(worst_s, secs if secs is not None else float("inf"))
            if mode == "tool":
                outcome = text
        fmt = lambda s: f"{s:>7.2f}" if s is not None else f"{'DNF':>7}"  # noqa: E731
        print(f"{name:<34} {len(data) / 1024:>7.0f} | {fmt(cells[0][0])} {cells[0][1]:>6.0f} | "
              f"{fmt(cells[1][0])} {cells[1][1]:>6.0f} | {outcome[:90]}")
    print(f"\nworst: {worst_s:.2f} s, +{worst_mib:.0f} MiB (target: a few seconds, +{TARGET_MIB} MiB)")


def _measure(mode: str, kind: str, data: bytes, tmp: Path) -> tuple[float | None, float, str]:
    from longhorizon.core.world import World

    world = World.build(tmp / f"w{time.perf_counter_ns()}", lambda root: None)
    world.file(f"f.{kind}").write_bytes(data)

    def limits() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (CHILD_ADDRESS_SPACE, CHILD_ADDRESS_SPACE))

    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1] / "src"))
    p = subprocess.Popen([sys.executable, __file__, "--child", mode, kind, str(world.root)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, preexec_fn=limits, env=env)
    try:
        out, err = p.communicate(timeout=CHILD_SECONDS)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return None, float("nan"), f"killed after {CHILD_SECONDS} s"
    if not out:
        lines = err.decode(errors="replace").strip().splitlines() or ["(no output)"]
        return None, float("nan"), "crashed: " + lines[-1][:80]
    rec = json.loads(out)
    return rec["seconds"], rec["rss_mib"], rec["outcome"].replace("\n", " ")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(*sys.argv[2:5])
    else:
        main()
