"""Shell scripting: a reusable script that merges a shop's daily order exports into one CSV.

A data request describes ``scripts/merge_orders.sh INPUT OUTPUT``: take every
``orders_YYYY-MM-DD.csv`` directly in INPUT, whose columns come in any order (names vary in case
and spacing), drop header rows (concatenated exports repeat them, sometimes in another column
order) and blank lines, keep one row per order id (the version with the latest ``updated_at``,
whatever file or line it came from; some exports write the timestamp with a space instead of
the ``T``), and write ``orders_merged.csv`` (canonical columns, sorted by id) and
``summary.json`` to OUTPUT. The agent writes it, runs it on three shops' folders and checks the
results.

The exports set the traps: a CRLF file, quoted customer names with commas, an in-file duplicate
whose second copy is older, an order re-sent with its old version in a later file, a late
update whose space-separated timestamp sorts before the older ``T`` one as plain text, a
``.partial`` upload and last month's files in ``old/``. The grader then runs the agent's script
itself, in the sandbox, on a hidden folder (other days, other ids, one more stray CSV whose name
does not match, an output folder that does not exist yet), so hard-coded output or a script
tailored to the visible folders does not pass.
"""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import date, datetime, timedelta
from pathlib import Path

from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import norm_path, rng_and_faker, write_files, written_paths
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.scripting import ScratchRuns, run_sandboxed_sync, snapshot

SCRIPT = "scripts/merge_orders.sh"
COLUMNS = ["order_id", "customer", "amount", "status", "updated_at"]
NAME_RE = re.compile(r"^orders_\d{4}-\d{2}-\d{2}\.csv$")
MERGED, SUMMARY = "orders_merged.csv", "summary.json"
STORES = ["north", "south", "east", "west", "harbour", "airport", "outlet", "online"]
HIDDEN_STORES = ["station", "campus", "mall", "riverside"]
STATUSES = ["pending", "paid", "shipped", "cancelled", "refunded"]
HEADER_STYLES = [
    lambda c: c, lambda c: c.upper(), lambda c: c.title(), lambda c: f" {c}", lambda c: f"{c} ",
    lambda c: c.capitalize(),
]


# -- the rules, in Python: what the script must produce ------------------------------------------


def merge_reference(files: dict[str, bytes]) -> tuple[list[dict], dict]:
    """(merged rows sorted by id, summary) for a folder's files (paths relative to it)."""
    names = sorted(n for n in files if "/" not in n and NAME_RE.match(n))
    best: dict[str, tuple[datetime, dict]] = {}
    rows_read = 0
    for name in names:
        header = None
        for rec in csv.reader(io.StringIO(files[name].decode("utf-8"), newline="")):
            cells = [c.strip() for c in rec]
            if not any(cells):
                continue
            low = [c.lower() for c in cells]
            if sorted(low) == sorted(COLUMNS):
                header = low
                continue
            row = dict(zip(header, cells))
            rows_read += 1
            ts = datetime.fromisoformat(row["updated_at"].replace(" ", "T"))
            if row["order_id"] not in best or ts >= best[row["order_id"]][0]:
                best[row["order_id"]] = (ts, row)
    merged = []
    for oid in sorted(best, key=int):
        ts, row = best[oid]
        merged.append({"order_id": oid, "customer": row["customer"], "amount": float(row["amount"]),
                       "status": row["status"], "updated_at": ts})
    by_status: dict[str, int] = {}
    for r in merged:
        by_status[r["status"]] = by_status.get(r["status"], 0) + 1
    summary = {"files": len(names), "rows_read": rows_read, "duplicates_removed": rows_read - len(merged),
               "orders": len(merged), "total_amount": round(sum(r["amount"] for r in merged), 2),
               "by_status": dict(sorted(by_status.items()))}
    return merged, summary


def _parse_ts(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text).strip().replace(" ", "T").rstrip("Z"))
    except ValueError:
        return None


def _float(text) -> float | None:
    try:
        return float(str(text).strip().replace(",", ""))
    except ValueError:
        return None


def read_merged(data: bytes | None) -> tuple[list[dict] | None, str]:
    """The agent's merged CSV as rows keyed by the canonical columns, or (None, why)."""
    if data is None:
        return None, f"{MERGED} is missing"
    try:
        recs = [r for r in csv.reader(io.StringIO(data.decode("utf-8-sig"), newline="")) if any(c.strip() for c in r)]
    except (UnicodeDecodeError, csv.Error) as exc:
        return None, f"{MERGED} is not readable CSV ({exc})"
    if not recs:
        return None, f"{MERGED} is empty"
    head = [c.strip().lower() for c in recs[0]]
    if head != COLUMNS:
        return None, f"header is {recs[0]}, expected {COLUMNS}"
    rows = []
    for r in recs[1:]:
        if len(r) != len(COLUMNS):
            return None, f"a row has {len(r)} fields: {r}"
        rows.append(dict(zip(COLUMNS, (c.strip() for c in r))))
    return rows, ""


def judge_ids(rows: list[dict], merged: list[dict]) -> tuple[bool, str]:
    got = [r["order_id"] for r in rows]
    want = [m["order_id"] for m in merged]
    if got == want:
        return True, ""
    if sorted(got) == sorted(want):
        return False, "the right orders, but not sorted by order_id"
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    dups = sorted({g for g in got if got.count(g) > 1})
    return False, f"missing {missing[:5]}, extra {extra[:5]}, repeated {dups[:5]}"


def judge_values(rows: list[dict], merged: list[dict], dup_ids: set[str]) -> tuple[bool, str]:
    want = {m["order_id"]: m for m in merged}
    have = {r["order_id"]: r for r in rows}
    absent = sorted(dup_ids - set(have))
    if absent:
        return False, f"duplicated orders missing: {absent[:5]}"
    bad = []
    for oid, r in have.items():
        m = want.get(oid)
        if m is None:
            continue
        amt = _float(r["amount"])
        ok = (r["customer"] == m["customer"] and amt is not None and abs(amt - m["amount"]) < 0.005
              and r["status"].lower() == m["status"] and _parse_ts(r["updated_at"]) == m["updated_at"])
        if not ok:
            bad.append(f"{oid}: {r}")
    return not bad, f"wrong values: {bad[:3]}" if bad else ""


def read_summary(data: bytes | None) -> tuple[dict | None, str]:
    if data is None:
        return None, f"{SUMMARY} is missing"
    try:
        obj = json.loads(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        return None, f"{SUMMARY} is not JSON ({exc})"
    return (obj, "") if isinstance(obj, dict) else (None, f"{SUMMARY} is not a JSON object")


def judge_counts(obj: dict, summary: dict) -> tuple[bool, str]:
    bad = [k for k in ("files", "rows_read", "duplicates_removed", "orders")
           if not (isinstance(obj.get(k), int) and not isinstance(obj.get(k), bool) and obj[k] == summary[k])]
    return not bad, f"wrong {bad}: {[obj.get(k) for k in bad]} (expected {[summary[k] for k in bad]})" if bad else ""


def judge_totals(obj: dict, summary: dict) -> tuple[bool, str]:
    total = obj.get("total_amount")
    total = _float(total) if isinstance(total, (str, int, float)) and not isinstance(total, bool) else None
    if total is None or abs(total - summary["total_amount"]) > 0.011:
        return False, f"total_amount {obj.get('total_amount')!r}, expected {summary['total_amount']}"
    got = obj.get("by_status")
    if not isinstance(got, dict):
        return False, "by_status is missing"
    got_n = {str(k).strip().lower(): v for k, v in got.items() if v not in (0, None)}
    if got_n != summary["by_status"]:
        return False, f"by_status {got}, expected {summary['by_status']}"
    return True, ""


# -- world generation ----------------------------------------------------------------------------


def make_folder(rng, fake, first_day: date, n_files: int, id_base: int, *, stray_csv: bool) -> tuple[dict, set]:
    """One shop's export folder (paths relative to it) with every edge case the request names,
    and the ids that appear more than once."""
    days = [first_day + timedelta(days=i) for i in range(n_files)]
    space_file = rng.randrange(1, n_files)
    crlf_file = rng.choice([i for i in range(n_files) if i != space_file])
    concat_file = rng.choice([i for i in range(n_files) if i != crlf_file])
    blank_file = rng.randrange(n_files)
    rows: list[list[tuple[str, str, float, str, datetime]]] = [[] for _ in days]
    versions: dict[str, list[tuple[str, str, float, str, datetime]]] = {}
    next_id = id_base

    def customer() -> str:
        r = rng.random()
        if r < 0.25:
            return f"{fake.last_name()}, {fake.first_name()}"
        if r < 0.45:
            return fake.company().replace(",", "") + rng.choice(["", ", Inc.", ", Ltd"])
        return f"{fake.first_name()} {fake.last_name()}"

    def stamp(d: date, lo: int, hi: int) -> datetime:
        return datetime.combine(d, datetime.min.time()) + timedelta(minutes=rng.randint(lo * 60, hi * 60 - 1),
                                                                   seconds=rng.randrange(60))

    def new_order(i: int, lo: int = 7, hi: int = 19) -> str:
        nonlocal next_id
        next_id += rng.randint(1, 9)
        oid = str(next_id)
        v = (oid, customer(), round(rng.uniform(8, 900), 2), "pending", stamp(days[i], lo, hi))
        versions[oid] = [v]
        rows[i].append(v)
        return oid

    def update(oid: str, i: int, when: datetime) -> tuple:
        old = versions[oid][-1]
        status = {"pending": "paid", "paid": "shipped", "shipped": rng.choice(["refunded", "shipped"])}.get(
            old[3], old[3])
        if rng.random() < 0.15:
            status = "cancelled"
        amount = old[2] if status != "refunded" else 0.0
        v = (oid, old[1], amount, status, when)
        versions[oid].append(v)
        rows[i].append(v)
        return v

    for i in range(n_files):
        for _ in range(rng.randint(4, 7)):
            new_order(i)
    # ordinary updates on a later day
    for _ in range(rng.randint(3, 5)):
        i = rng.randrange(1, n_files)
        oid = rng.choice([o for o, vs in versions.items() if vs[-1][4].date() < days[i]])
        update(oid, i, stamp(days[i], 7, 20))
    # a late update: written on the evening of day s-1 but exported in the space-format file s
    s = space_file
    late = new_order(s - 1, 6, 9)
    update(late, s, stamp(days[s - 1], 21, 23))
    # a re-sent stale row: an order updated on day j shows up again with its old version later
    j = rng.randrange(1, n_files - 1) if n_files > 2 else 1
    resent = new_order(j - 1)
    update(resent, j, stamp(days[j], 7, 12))
    if j + 1 < n_files:
        rows[j + 1].append(versions[resent][0])
    else:
        rows[j].append(versions[resent][0])
    # an in-file duplicate whose second copy is older
    k = rng.randrange(n_files)
    dup = new_order(k, 7, 10)
    newer = (dup, versions[dup][0][1], versions[dup][0][2], "paid", versions[dup][0][4] + timedelta(hours=3))
    versions[dup].append(newer)
    rows[k].remove(versions[dup][0])
    rows[k] += [newer, versions[dup][0]]
    new_order(rng.randrange(n_files))  # the highest id: an order seen once

    files: dict[str, bytes] = {}
    for i, d in enumerate(days):
        order = rng.sample(COLUMNS, len(COLUMNS))
        style = rng.choice(HEADER_STYLES)
        body = rows[i][:]
        rng.shuffle(body)
        if (dup_pair := [r for r in body if r[0] == dup]) and len(dup_pair) == 2:  # keep the newer copy first
            a, b = body.index(dup_pair[0]), body.index(dup_pair[1])
            if dup_pair[0][4] < dup_pair[1][4]:
                body[a], body[b] = body[b], body[a]
        sep = " " if i == space_file else "T"
        amount_fmt = (lambda x: f"{x:.2f}") if rng.random() < 0.6 else (lambda x: f"{x:g}")

        def line(r, cols):
            vals = {"order_id": r[0], "customer": r[1], "amount": amount_fmt(r[2]), "status": r[3],
                    "updated_at": r[4].strftime(f"%Y-%m-%d{sep}%H:%M:%S")}
            return [vals[c] for c in cols]

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\r\n" if i == crlf_file else "\n")
        w.writerow([style(c) for c in order])
        cut = len(body) // 2 if i == concat_file else len(body)
        for r in body[:cut]:
            w.writerow(line(r, order))
        if i == concat_file:
            order2 = rng.sample(COLUMNS, len(COLUMNS))
            while order2 == order:
                order2 = rng.sample(COLUMNS, len(COLUMNS))
            w.writerow([rng.choice(HEADER_STYLES)(c) for c in order2])
            for r in body[cut:]:
                w.writerow(line(r, order2))
        text = buf.getvalue()
        if i == blank_file:
            parts = text.split("\n")
            parts.insert(rng.randint(2, max(2, len(parts) - 2)), "")
            text = "\n".join(parts) + "\n"
        files[f"orders_{d.isoformat()}.csv"] = text.encode()
    # things that are not exports to merge
    tail = days[-1] + timedelta(days=1)
    some = rows[-1][:3]
    files[f"orders_{tail.isoformat()}.csv.partial"] = (
        ",".join(COLUMNS) + "\n" + "".join(f"{r[0]},{r[1].replace(',', '')},{r[2]:.2f},shipped,"
                                           f"{tail.isoformat()}T08:00:00\n" for r in some)).encode()
    prev = first_day - timedelta(days=rng.randint(25, 35))
    files[f"old/orders_{prev.isoformat()}.csv"] = (
        ",".join(COLUMNS) + "\n" + "".join(f"{id_base - rng.randint(10, 900)},{fake.first_name()} "
                                           f"{fake.last_name()},{rng.uniform(8, 500):.2f},shipped,"
                                           f"{prev.isoformat()}T1{n}:00:00\n" for n in range(4))).encode()
    files["README.md"] = (b"Daily exports from the shop's till system land here at 23:30. Files still uploading end in "
                          b".partial. Last month's exports are in old/.\n")
    if stray_csv:
        files["orders_backup.csv"] = (
            ",".join(COLUMNS) + "\n" + "".join(f"{r[0]},{r[1].replace(',', '')},1.00,cancelled,"
                                               f"{tail.isoformat()}T23:00:00\n" for r in rows[0][:3])).encode()
    dup_ids = {oid for oid, vs in versions.items() if len(vs) > 1}
    return dict(sorted(files.items())), dup_ids


def request_text(no: int, reporter: str) -> str:
    return f"""# DATA-{no}: one merged orders file per shop

Reporter: {reporter} (finance analytics)

The tills export orders once a day into exports/<shop>/daily/ and finance is tired of stitching
them together by hand. We want a reusable script, {SCRIPT}, run from the workspace root as

    bash {SCRIPT} <input folder> <output folder>

What it must do:

1. Read every file named `orders_YYYY-MM-DD.csv` directly in the input folder (not in
   sub-folders). Any other file is ignored, including other .csv files.
2. Each file is CSV with a header row. The columns are order_id, customer, amount, status and
   updated_at, but their order differs between files and the header names vary in case and
   surrounding spaces. Values may be quoted (customer names can contain commas). Some files have
   Windows (CRLF) line endings.
3. Some files are several exports pasted together, so a header row can appear again further down,
   possibly with a different column order; it applies to the rows below it. Header rows and
   blank lines are not data.
4. An order can appear several times (updates, re-sent rows, duplicates within a file). Keep only
   the version with the latest updated_at, wherever it appears. updated_at is an ISO timestamp
   (YYYY-MM-DDTHH:MM:SS); some exports write a space instead of the T.
5. Write <output folder>/{MERGED}: header `order_id,customer,amount,status,updated_at`, one row
   per order, sorted by order_id (ids are whole numbers), amount with two decimals, updated_at as
   YYYY-MM-DDTHH:MM:SS. Quote values that need it.
6. Write <output folder>/{SUMMARY}: an object with "files" (how many exports were read),
   "rows_read" (data rows across them), "duplicates_removed" (rows_read minus orders), "orders"
   (rows in the merged file), "total_amount" (sum of the merged amounts, rounded to cents) and
   "by_status" (number of merged orders per status).
7. Create the output folder if it does not exist; replace earlier outputs there. Never modify the
   input files.

Cron has bash, GNU coreutils and python3 (standard library only).
"""


# -- the reference script and its flawed variant -------------------------------------------------


def script_text(*, any_csv: bool = False) -> str:
    """The expert's script: a bash entry point, the parsing in standard-library Python.
    ``any_csv`` plants the flaw of taking every .csv in the folder."""
    pattern = r"^.+\.csv$" if any_csv else r"^orders_\d{4}-\d{2}-\d{2}\.csv$"
    return f'''#!/usr/bin/env bash
# merge_orders.sh - merge a shop's daily order exports into one CSV plus a summary.
# Usage: bash scripts/merge_orders.sh <input folder> <output folder>
set -euo pipefail
if [ $# -ne 2 ]; then
    echo "usage: $0 <input folder> <output folder>" >&2
    exit 2
fi
if [ ! -d "$1" ]; then
    echo "input folder $1 does not exist" >&2
    exit 1
fi
exec python3 - "$1" "$2" <<'PY'
import csv
import json
import os
import re
import sys
from datetime import datetime

src, out = sys.argv[1], sys.argv[2]
COLUMNS = ["order_id", "customer", "amount", "status", "updated_at"]
NAME = re.compile(r"{pattern}")

names = sorted(n for n in os.listdir(src) if NAME.match(n) and os.path.isfile(os.path.join(src, n)))
best = {{}}
rows_read = 0
for name in names:
    header = None
    with open(os.path.join(src, name), newline="", encoding="utf-8-sig") as fh:
        for lineno, rec in enumerate(csv.reader(fh), start=1):
            cells = [c.strip() for c in rec]
            if not any(cells):
                continue
            low = [c.lower() for c in cells]
            if sorted(low) == sorted(COLUMNS):
                header = low  # a (repeated) header: it applies to the rows below it
                continue
            if header is None or len(cells) != len(header):
                sys.exit(f"{{name}} line {{lineno}}: not a data row under a header: {{rec}}")
            row = dict(zip(header, cells))
            rows_read += 1
            ts = datetime.fromisoformat(row["updated_at"].replace(" ", "T"))
            key = row["order_id"]
            if key not in best or ts >= best[key][0]:
                best[key] = (ts, row)

os.makedirs(out, exist_ok=True)
ids = sorted(best, key=int)
by_status = {{}}
total = 0.0
with open(os.path.join(out, "orders_merged.csv"), "w", newline="", encoding="utf-8") as fh:
    w = csv.writer(fh, lineterminator="\\n")
    w.writerow(COLUMNS)
    for key in ids:
        ts, row = best[key]
        amount = float(row["amount"])
        total += amount
        by_status[row["status"]] = by_status.get(row["status"], 0) + 1
        w.writerow([key, row["customer"], f"{{amount:.2f}}", row["status"], ts.strftime("%Y-%m-%dT%H:%M:%S")])
summary = {{"files": len(names), "rows_read": rows_read, "duplicates_removed": rows_read - len(ids),
           "orders": len(ids), "total_amount": round(total, 2), "by_status": dict(sorted(by_status.items()))}}
with open(os.path.join(out, "summary.json"), "w", encoding="utf-8") as fh:
    json.dump(summary, fh, indent=2)
    fh.write("\\n")
print(f"{{src}}: {{len(names)}} files, {{rows_read}} rows, {{len(ids)}} orders -> {{out}}")
PY
'''


def _merged_csv(merged: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for m in merged:
        w.writerow([m["order_id"], m["customer"], f"{m['amount']:.2f}", m["status"],
                    m["updated_at"].strftime("%Y-%m-%dT%H:%M:%S")])
    return buf.getvalue()


def _row_line(m: dict) -> str:
    return _merged_csv([m]).split("\n", 1)[1].rstrip("\n")


# -- the family ----------------------------------------------------------------------------------

_RUNS = ScratchRuns()


@register
class CsvMergeScript(TaskFamily):
    name = "csv_merge_script"
    category = "shell scripting"
    apps = ("shell", "files")
    description = ("Write scripts/merge_orders.sh from a data request (merge daily CSV exports with shifting "
                   "columns, repeated headers and duplicates, keeping each order's latest version; write the "
                   "merged CSV and a JSON summary), run it for three shops; the grader reruns it on a hidden folder.")

    levels = 3
    """How many shops the script is run for: 1, 2 or 3 (default). The grader's hidden folder is
    the same at every level. Level 1 writes the script from the request alone (no listing, no
    syntax check or trial run) and checks the merged head and the summary."""
    toolsets = {1: ("files__read_file", "files__write_file", "shell__run")}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        task_id = self.task_id(seed, level)
        first_day = date(2026, 1, 5) + timedelta(days=rng.randrange(300))
        stores = sorted(rng.sample(STORES, 3))
        folders: dict[str, dict[str, bytes]] = {}
        dup_ids: dict[str, set[str]] = {}
        id_base = rng.randint(2, 6) * 100_000
        for n, s in enumerate(stores):
            folders[s], dup_ids[s] = make_folder(rng, fake, first_day, rng.randint(4, 5), id_base + n * 20_000,
                                                 stray_csv=False)
        expected = {s: merge_reference(folders[s]) for s in stores}
        h_store = rng.choice(HIDDEN_STORES)
        h_files, h_dups = make_folder(rng, fake, first_day + timedelta(days=rng.randint(20, 60)), rng.randint(5, 6),
                                      id_base + 90_000, stray_csv=True)
        h_expected = merge_reference(h_files)

        req_no = rng.randint(300, 990)
        request = f"requests/DATA-{req_no}.md"
        requester = fake.first_name()
        stores = stores[:level]  # the same draws as the default, then fewer shops
        in_dir = {s: f"exports/{s}/daily" for s in stores}
        out_dir = {s: f"reports/{s}" for s in stores}
        other_files = {
            request: request_text(req_no, fake.name()).encode(),
            f"requests/DATA-{req_no - rng.randint(5, 60)}.md": (
                f"# DATA: quarterly margin dashboard\n\nReporter: {fake.name()}\n\n"
                f"{fake.paragraph(nb_sentences=4)}\n\nStatus: done\n").encode(),
            "scripts/README.md": (b"# scripts/\n\nShared scripts. Cron runs them from the workspace root; take "
                                  b"folders as arguments rather than hard-coding them.\n"),
        }
        sources = {**other_files, **{f"{in_dir[s]}/{rel}": data for s in stores for rel, data in folders[s].items()}}

        def build(root: Path) -> None:
            ws = root / "workspace"
            for rel, data in sources.items():
                (ws / rel).parent.mkdir(parents=True, exist_ok=True)
                (ws / rel).write_bytes(data)

        shop_list = ", ".join(stores[:-1]) + f" and {stores[-1]}" if len(stores) > 1 else stores[0]
        shops, these = ("shops", f"these {['two', 'three'][len(stores) - 2]} folders") if len(stores) > 1 \
            else ("shop", "this folder")
        w = phrasing_rng(self.name, seed)
        opener = say(w, "Hi!", "Hello,", "Hi there,")
        ask = say(w, f"Finance asked for the script in {request}. Could you write it as {SCRIPT} and then run it for "
                     f"the {shop_list} {shops}: input exports/<shop>/daily, output reports/<shop>?",
                  f"Could you write the script Finance asked for in {request}? Save it as {SCRIPT}, then run it for "
                  f"the {shop_list} {shops} (input exports/<shop>/daily, output reports/<shop>).",
                  f"{request} is a request from Finance for a script. Please write it as {SCRIPT} and run it for the "
                  f"{shop_list} {shops}, reading exports/<shop>/daily and writing to reports/<shop>.",
                  f"Finance needs the script described in {request}: please put it in {SCRIPT} and run it for the "
                  f"{shop_list} {shops}, with exports/<shop>/daily as input and reports/<shop> as output.")
        why = say(w, f"They'll put it in cron for the other shops afterwards, so it needs to follow the request "
                     f"exactly, not just work for {these}.",
                  f"Afterwards they'll run it from cron for the other shops too, which means it has to follow the "
                  f"request exactly rather than just work for {these}.",
                  f"It must follow the request exactly, not merely work for {these}: they'll put it in cron for the "
                  f"other shops afterwards.")
        check = say(w, "Please check the outputs once it has run.",
                    "Once it has run, check the outputs, please.",
                    "When it has run, please check what it wrote.")
        limits = in_some_order(w, [
            say(w, "If you want to try it first, use a copy under /tmp and don't leave test files in the workspace.",
                "Any trial run goes on a copy under /tmp, and no test files should be left in the workspace.",
                "Should you want a trial run first, do it on a copy under /tmp; don't leave test files in the "
                "workspace."),
            say(w, "Don't touch the exports.", "Leave the exports as they are.",
                "The exports themselves must not be changed."),
        ])
        instruction = " ".join([opener, ask, why, check, *limits,
                                say(w, f"Thanks, {requester}", f"Thank you! {requester}", f"Cheers, {requester}")])

        # -- oracle ------------------------------------------------------------------------------
        brief = level == 1  # one shop: no export opened one by one, no trial run on a copy

        def trial(test_root: str) -> str:
            return (f"rm -rf {test_root} && mkdir -p {test_root} && cp -r {in_dir[stores[0]]} {test_root}/in && "
                    f"bash {SCRIPT} {test_root}/in {test_root}/out/new && head -n 5 {test_root}/out/new/{MERGED} && "
                    f"cat {test_root}/out/new/{SUMMARY} && diff -r {in_dir[stores[0]]} {test_root}/in && "
                    f"echo inputs unchanged")

        syntax_check = (f"chmod +x {SCRIPT} && bash -n {SCRIPT} && echo syntax ok; "
                        f"bash {SCRIPT}; echo \"rc=$?\"")

        def merge(s: str) -> str:
            return f"bash {SCRIPT} {in_dir[s]} {out_dir[s]}"

        def solve():
            yield ToolCall("files__read_file", {"path": request}, "Read the request for the exact rules.")
            if not brief:  # (level 1 writes the script from the request alone)
                yield ToolCall("files__list_dir", {"path": "exports", "recursive": True},
                               "See every shop's exports and what else is in those folders.")
                yield ToolCall("files__list_dir", {"path": "scripts"}, "What is already in scripts/.")
            for s in [] if brief else stores:
                for rel in folders[s]:
                    if "/" not in rel and NAME_RE.match(rel):
                        yield ToolCall("files__read_file", {"path": f"{in_dir[s]}/{rel}"},
                                       f"Look at {s}'s export {rel}: column order, header, quoting, timestamps.")
                yield ToolCall("shell__run", {"command": (
                    f"cd {in_dir[s]} && for f in orders_*.csv; do printf '%s crlf=%s headers=%s\\n' \"$f\" "
                    f"\"$(grep -c $'\\r' \"$f\")\" \"$(grep -ci 'order_id' \"$f\")\"; done")},
                    f"Which of {s}'s files have CRLF endings or repeated headers?")
            yield ToolCall("files__write_file", {"path": SCRIPT, "content": script_text()}, f"Write {SCRIPT}.")
            if not brief:
                yield ToolCall("shell__run", {"command": syntax_check},
                               "Syntax check, and a call without arguments must fail with the usage line.")
                yield ToolCall("shell__run", {"command": trial("/tmp/t")},
                               "Try it on a copy first, into a folder that does not exist yet.")
            for s in stores:
                yield ToolCall("shell__run", {"command": merge(s)}, f"Merge {s}'s exports.")
            for s in stores:
                yield ToolCall("shell__run", {"command": (
                    f"head -n 6 {out_dir[s]}/{MERGED}; echo ...; wc -l < {out_dir[s]}/{MERGED}; "
                    f"cat {out_dir[s]}/{SUMMARY}")}, f"Check {s}'s merged file and summary.")
                dup = sorted(dup_ids[s])[0]
                if brief:  # the merged head and the summary are the check
                    continue
                yield ToolCall("shell__run", {"command": (
                    f"grep -h '{dup}' {in_dir[s]}/orders_*.csv; echo '--- merged:'; grep '^{dup},' "
                    f"{out_dir[s]}/{MERGED}")}, f"Spot-check a duplicated order in {s}: the latest version won?")
            if not brief:
                yield ToolCall("shell__run", {"command": "find . -type f -not -path './exports/*' | sort"},
                               "Make sure nothing else was left in the workspace.")
            return (f"Wrote {SCRIPT} and ran it for {shop_list}: "
                    + "; ".join(f"{s}: {expected[s][1]['orders']} orders from {expected[s][1]['rows_read']} rows"
                                for s in stores) + ". Outputs are in reports/<shop>/.")

        # -- perturbations: edits of the oracle's calls ----------------------------------------------
        def shell(command: str, note: str) -> ToolCall:
            return ToolCall("shell__run", {"command": command}, note)

        def python(code: str, note: str) -> ToolCall:
            return shell(f"python3 -c {_sh_quote(code)}", note)

        s0, last = stores[0], stores[-1]
        merged0, summary0 = expected[s0]
        after_merges = perturb.on("shell__run", command=merge(last))

        def afterwards(*calls: ToolCall):
            """``calls`` right after the last merge, before the checks."""
            return perturb.insert(solve, *calls, after=after_merges)

        def edited_summary(change: str):
            return afterwards(python(f"import json; p = {f'{out_dir[s0]}/{SUMMARY}'!r}; d = json.load(open(p)); "
                                     f"{change}; json.dump(d, open(p, 'w'), indent=2)", "Adjust the summary."))

        def first_version_kept():
            oid = sorted(dup_ids[s0])[0]
            m = next(x for x in merged0 if x["order_id"] == oid)
            first = _first_version(folders[s0], oid, m["updated_at"])
            return afterwards(python(f"p = {f'{out_dir[s0]}/{MERGED}'!r}; s = open(p).read(); "
                                     f"open(p, 'w').write(s.replace({_row_line(m)!r}, {_row_line(first)!r}))",
                                     "Keep the first version of a duplicated order instead."))

        def by_hand():
            """The last shop's outputs written by hand instead of by the script."""
            merged, summary = expected[last]
            run_last = perturb.on("shell__run", command=merge(last))
            return perturb.drop(perturb.insert(solve, ToolCall(
                "files__write_file", {"path": f"{out_dir[last]}/{MERGED}", "content": _merged_csv(merged)},
                f"Write {last}'s merge."), ToolCall(
                "files__write_file", {"path": f"{out_dir[last]}/{SUMMARY}",
                                      "content": json.dumps(summary, indent=2) + "\n"}, f"Write {last}'s summary."),
                before=run_last), run_last)

        def trial_in_workspace():
            """The trial run's copy left in the workspace (tmp_test/ instead of /tmp/t)."""
            if brief:
                return perturb.insert(solve, shell(trial("tmp_test"), "Try it on a copy first."),
                                      after=perturb.on("files__write_file", path=SCRIPT))
            return perturb.change(solve, perturb.on("shell__run", command=trial("/tmp/t")), command=trial("tmp_test"))

        crlf = next((f"{in_dir[s]}/{rel}" for s in stores for rel, data in folders[s].items() if b"\r\n" in data),
                    None)
        flawed = {  # built only for the criteria an instance has
            "script_generalises": lambda: perturb.change(solve, perturb.on("files__write_file", path=SCRIPT),
                                                         content=script_text(any_csv=True)),
            "inputs_unchanged": lambda: perturb.insert(solve, shell(f"sed -i 's/\\r$//' {crlf}",
                                                                    "Normalise the CRLF export first."),
                                                       before=perturb.on("files__write_file", path=SCRIPT)),
            "workspace_clean": trial_in_workspace,
            "merged_by_script": by_hand,
            "merged_ids": lambda: afterwards(shell(f"sed -i '$d' {out_dir[s0]}/{MERGED}",
                                                   "Drop what looks like a trailing line.")),
            "latest_versions": first_version_kept,
            "summary_counts": lambda: edited_summary("d['duplicates_removed'] = 0"),
            "summary_totals": lambda: edited_summary("d['total_amount'] = round(d['total_amount'] + 10, 2)"),
            "checked_output": lambda: perturb.drop(solve, lambda c: c.name == "shell__run" and str(
                c.arguments.get("command", "")).startswith(("head -n 6 ", "grep -h ")), count=None),
        }

        # -- grading -----------------------------------------------------------------------------
        def outputs(w, s):
            t = snapshot(w.file(out_dir[s]))
            return t.files.get(MERGED), t.files.get(SUMMARY)

        def each_store(part: str):
            def check(w, tr):
                bad = []
                for s in stores:
                    merged, summary = expected[s]
                    m_bytes, s_bytes = outputs(w, s)
                    if part in ("ids", "values"):
                        rows, why = read_merged(m_bytes)
                        ok, note = (False, why) if rows is None else (
                            judge_ids(rows, merged) if part == "ids" else judge_values(rows, merged, dup_ids[s]))
                    else:
                        obj, why = read_summary(s_bytes)
                        ok, note = (False, why) if obj is None else (
                            judge_counts(obj, summary) if part == "counts" else judge_totals(obj, summary))
                    if not ok:
                        bad.append(f"{s}: {note}")
                return not bad, "; ".join(bad)
            return check

        def hidden_run(w):
            def work(ws):
                src = ws / "exports" / h_store / "daily"
                write_files(src, h_files)
                res = run_sandboxed_sync(f"bash {SCRIPT} exports/{h_store}/daily reports/{h_store}/merged "
                                         f">/dev/null 2>&1", ws, timeout_s=60)
                if res is None:
                    return None, "the script timed out (or the sandbox is unavailable)"
                return (snapshot(src), snapshot(ws / "reports" / h_store / "merged")), ""
            return _RUNS.run_scripts(w, task_id, SCRIPT, work)

        def generalises(w, tr):
            got, why = hidden_run(w)
            if got is None:
                return False, why
            src, out = got
            if src.files != h_files or src.odd:
                return False, "the script changed its input folder"
            merged, summary = h_expected
            rows, why = read_merged(out.files.get(MERGED))
            if rows is None:
                return False, f"hidden folder: {why}"
            obj, why = read_summary(out.files.get(SUMMARY))
            if obj is None:
                return False, f"hidden folder: {why}"
            bad = []
            parts = {"ids": judge_ids(rows, merged), "values": judge_values(rows, merged, h_dups),
                     "counts": judge_counts(obj, summary), "totals": judge_totals(obj, summary)}
            for name, (ok, note) in parts.items():
                if not ok:
                    bad.append(f"hidden folder ({name}): {note}")
            return not bad, "; ".join(bad)

        def run_calls(tr) -> list[tuple[int, str]]:
            return [(i, c.arguments.get("command", "")) for i, c in enumerate(tr.tool_calls)
                    if c.name == "shell__run" and not c.is_error and isinstance(c.arguments, dict)]

        def last_run(tr, s) -> int:
            idx = [i for i, cmd in run_calls(tr) if _runs_script_on(cmd, in_dir[s], out_dir[s])]
            return idx[-1] if idx else -1

        def by_script(w, tr):
            missing = [s for s in stores if last_run(tr, s) < 0]
            by_hand = []
            for c in tr.tool_calls:
                if c.app != "files":
                    continue
                for p in written_paths(c):
                    if any(p == out_dir[s] or p.startswith(out_dir[s] + "/") for s in stores) or p in (".", "reports"):
                        by_hand.append(f"{c.tool} {p}")
            if missing:
                return False, f"the script was never run for: {missing}"
            return not by_hand, f"outputs written by hand: {by_hand[:4]}" if by_hand else ""

        def last_output(tr, s) -> int:
            """The last call that produced a shop's outputs: a script run, or a write by hand."""
            last = last_run(tr, s)
            for i, c in enumerate(tr.tool_calls):
                if c.app == "files" and any(p.startswith(out_dir[s] + "/") for p in written_paths(c)):
                    last = max(last, i)
            return last

        def checked(w, tr):
            bad = []
            for s in stores:
                last = last_output(tr, s)
                if last < 0:
                    bad.append(f"{s}: no outputs were made")
                    continue
                seen = False
                for c in tr.tool_calls[last + 1:]:
                    if c.is_error or not isinstance(c.arguments, dict):
                        continue
                    if c.name == "files__read_file" and norm_path(c.arguments.get("path")).startswith(out_dir[s] + "/"):
                        seen = True
                    if c.name == "shell__run" and out_dir[s] in str(c.arguments.get("command", "")) \
                            and "merge_orders.sh" not in str(c.arguments.get("command", "")):
                        seen = True
                if not seen:
                    bad.append(f"{s}: outputs not looked at after the last run")
            return not bad, "; ".join(bad)

        def inputs_unchanged(w, tr):
            bad = []
            for s in stores:
                t = snapshot(w.file(in_dir[s]))
                if t.files != folders[s] or t.odd:
                    changed = sorted(k for k in set(t.files) | set(folders[s]) if t.files.get(k) != folders[s].get(k))
                    bad.append(f"{s}: {changed[:4] or t.odd[:4]}")
            return not bad, "; ".join(bad)

        def clean(w, tr):
            t = snapshot(w.workspace)
            allowed = set(sources) | {f"{out_dir[s]}/{n}" for s in stores for n in (MERGED, SUMMARY)}
            extra = sorted(r for r in list(t.files) + t.odd if r not in allowed and not r.startswith("scripts/"))
            return not extra, f"left behind: {extra[:6]}" if extra else ""

        criteria = [
            Criterion("merged_ids", f"each shop's {MERGED} has the canonical header and every order exactly once, "
                      "sorted by order_id", "final_state", each_store("ids"), 2.0),
            Criterion("latest_versions", "each merged row carries the order's latest version (by updated_at), "
                      "duplicated orders included", "final_state", each_store("values"), 2.0),
            Criterion("summary_counts", f"each {SUMMARY} has the right files, rows_read, duplicates_removed and "
                      "orders", "final_state", each_store("counts")),
            Criterion("summary_totals", f"each {SUMMARY} has the right total_amount and by_status", "final_state",
                      each_store("totals")),
            Criterion("script_generalises", f"{SCRIPT}, run by the grader in the sandbox on a hidden shop folder, "
                      "writes exactly the right merge and summary and leaves the inputs alone", "final_state",
                      generalises, 3.0),
            Criterion("merged_by_script", f"every shop was merged by running {SCRIPT} in the shell; no output was "
                      "written by hand", "process", by_script, requires=("merged_ids",)),
            Criterion("checked_output", "each shop's outputs were looked at after its last run", "process", checked,
                      requires=("merged_ids",)),
            Criterion("inputs_unchanged", "the exports are byte-identical (nothing added, changed or removed)",
                      "final_state", inputs_unchanged, guard=True),
            Criterion("workspace_clean", "no test copies or other stray files were left in the workspace",
                      "final_state", clean, guard=True),
        ]
        perturbations = {c.id: flawed[c.id]() for c in criteria}
        return Task(
            id=task_id, family=self.name, category=self.category, split=self.split_of(seed), seed=seed,
            instruction=instruction, apps=self.apps, build=build, oracle=solve, criteria=criteria,
            perturbations=perturbations,
            data={"stores": stores, "summaries": {s: expected[s][1] for s in stores},
                  "duplicated": {s: sorted(dup_ids[s]) for s in stores}, "hidden_store": h_store,
                  "hidden_summary": h_expected[1]},
        )


def _first_version(files: dict[str, bytes], oid: str, latest: datetime) -> dict:
    """An older version of ``oid`` from the exports (what keeping the wrong copy gives)."""
    merged_rows = []
    for name in sorted(files):
        if "/" in name or not NAME_RE.match(name):
            continue
        header = None
        for rec in csv.reader(io.StringIO(files[name].decode(), newline="")):
            cells = [c.strip() for c in rec]
            if not any(cells):
                continue
            if sorted(c.lower() for c in cells) == sorted(COLUMNS):
                header = [c.lower() for c in cells]
                continue
            row = dict(zip(header, cells))
            ts = datetime.fromisoformat(row["updated_at"].replace(" ", "T"))
            if row["order_id"] == oid and ts != latest:
                merged_rows.append({"order_id": oid, "customer": row["customer"], "amount": float(row["amount"]),
                                    "status": row["status"], "updated_at": ts})
    return merged_rows[0]


def _sh_quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"


def _runs_script_on(command: str, src: str, out: str) -> bool:
    """Whether a shell command runs the script on ``src`` into ``out`` (directly or in a loop over
    the shops); a run on a copy elsewhere (/tmp/...) does not count."""
    if "merge_orders.sh" not in command:
        return False
    q = r"[\"']?(?:\./|/workspace/)?"
    direct = (r"merge_orders\.sh[\"']?\s+" + q + re.escape(src) + r"/?[\"']?\s+" + q + re.escape(out)
              + r"/?[\"']?(?:\s|;|&|\||$)")
    loop = r"exports/(?:\"?\$\{?\w+\}?\"?)/daily/?[\"']?\s+[\"']?reports/(?:\"?\$\{?\w+\}?\"?)"
    return bool(re.search(direct, command) or re.search(loop, command))
