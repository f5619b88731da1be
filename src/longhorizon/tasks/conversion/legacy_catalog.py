"""Data conversion: three legacy product exports merged into one normalised catalogue workbook.

The exports are what old systems produce: a Latin-1, semicolon-separated CSV with CRLF line
ends, decimal commas, EUR prices, grams and DD.MM.YYYY dates (and quoted names that contain
semicolons); a fixed-width ASCII report in pounds and MM/DD/YYYY with a title, a rule and a
footer; JSON lines with unit-tagged weights, prices in cents and timestamps with UTC offsets.
A spec says how every field is normalised, which records are rejected and why (bad SKU,
price or date, and duplicates: the latest record of a SKU wins), and where rejects go.
"""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path

from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.common import (
    blank,
    norm_path,
    norm_text,
    output_bytes,
    output_text,
    read_table,
    rng_and_faker,
    sha256,
    to_number,
    workspace_files,
)

OUT = "catalog/migration/products.xlsx"
REJECTS = "catalog/migration/rejected.csv"
SPEC = "catalog/migration/spec.md"
WORK = "catalog/migration/work"
LEGACY = "catalog/legacy"
NORTH, SOUTH, WEB = f"{LEGACY}/north_export.csv", f"{LEGACY}/south_export.txt", f"{LEGACY}/webshop.jsonl"
HEADER = ["SKU", "Name", "Category", "Weight (kg)", "Price (USD)", "Updated", "Source"]
LB, OZ = 0.45359237, 0.028349523125
REASONS = ("bad_sku", "bad_price", "bad_date", "duplicate_sku")

# new category -> (north, south, webshop) spellings
CATEGORIES = {
    "Tools": ("Werkzeug", "TL", "tools"),
    "Garden": ("Garten", "GD", "garden"),
    "Kitchen": ("Küche", "KT", "kitchen"),
    "Lighting": ("Beleuchtung", "LT", "lighting"),
    "Office": ("Büro", "OF", "office-supplies"),
    "Outdoor": ("Freizeit", "OD", "outdoor"),
}
PREFIX = {"Tools": ["TLS", "HND", "PWR"], "Garden": ["GRD", "PLT"], "Kitchen": ["KIT", "CKW"],
          "Lighting": ["LMP", "LED"], "Office": ["OFF", "DSK"], "Outdoor": ["OUT", "CMP"]}
NORTH_NAMES = {
    "Tools": ["Schraubendreher-Set, 6-tlg.", "Hammer mit Fiberglasstiel", "Akku-Bohrschrauber 18 V",
              "Wasserwaage 60 cm", "Zange; isoliert", "Steckschlüssel-Satz ½ Zoll"],
    "Garden": ["Gartenschere Profi", "Gießkanne 10 l", "Rasensprenger Öko", "Pflanzkübel Ø 40 cm",
               "Laubrechen verzinkt"],
    "Kitchen": ["Küchenwaage Digital", "Brotmesser Edelstahl", "Crêpe-Pfanne 28 cm", "Gewürzmühle Keramik",
                "Schneidebrett Eiche"],
    "Lighting": ["LED-Leuchte Ø 30 cm", "Stehlampe Messing", "Lichterkette 20 m", "Leseleuchte flexibel"],
    "Office": ["Bürostuhl Komfort", "Aktenordner A4; breit", "Schreibtischlampe Größe M", "Tacker Metall"],
    "Outdoor": ["Campingstuhl faltbar", "Kühlbox 24 l", "Wanderrucksack 30 l", "Isomatte selbstaufblasend"],
}
ENGLISH_NAMES = {
    "Tools": ["Claw Hammer 16 oz", "Cordless Drill 20V", "Precision Screwdriver Kit", "Tape Measure 25 ft",
              "Socket Wrench Set", "Utility Knife"],
    "Garden": ["Pruning Shears", "Garden Hose 50 ft", "Leaf Blower", "Raised Bed Kit", "Watering Can 2 gal"],
    "Kitchen": ["Chef Knife 8 in", "Cast Iron Skillet", "Cafe Mug Set", "Digital Kitchen Scale", "Salad Spinner"],
    "Lighting": ["Desk Lamp LED", "String Lights 33 ft", "Floor Lamp Arc", "Motion Sensor Light"],
    "Office": ["Ergonomic Chair", "Stapler Heavy Duty", "Monitor Stand", "Label Maker", "Paper Shredder"],
    "Outdoor": ["Camping Lantern", "Folding Table", "Hiking Backpack 40 L", "Sleeping Bag 3 Season"],
}
WEB_EXTRA = {"Kitchen": ["Crème Brûlée Torch", "Café Espresso Cups", "Smörgås Board"],
             "Lighting": ["Piñata Party Lights", "Lumière Wall Sconce"]}


_PY_HEAD = "python3 - <<'PY'\nimport csv, io, json, re\nfrom datetime import datetime\n"
CHECKS = {
    "north": _PY_HEAD + f"""rows = list(csv.reader(open('{NORTH}', encoding='latin-1', newline=''), delimiter=';'))
for r in rows[1:]:
    bad = []
    if not re.fullmatch(r'[a-z]{{3}}-?[0-9]{{4}}', r[1].strip().lower()):
        bad.append('sku')
    try:
        if float(r[5].replace('.', '').replace(',', '.')) <= 0:
            bad.append('price')
    except ValueError:
        bad.append('price')
    try:
        datetime.strptime(r[6], '%d.%m.%Y')
    except ValueError:
        bad.append('date')
    if bad:
        print(r[0], bad, r)
PY""",
    "south": _PY_HEAD + f"""for line in open('{SOUTH}').read().splitlines()[3:]:
    if not re.match(r'[0-9]{{6}}', line):
        continue
    rec, sku, price, upd = line[0:6], line[6:15].strip(), line[58:69].strip(), line[69:79].strip()
    bad = []
    if not re.fullmatch(r'[A-Z]{{3}}-?[0-9]{{4}}', sku):
        bad.append('sku')
    try:
        if float(price.replace('$', '').replace(',', '')) <= 0:
            bad.append('price')
    except ValueError:
        bad.append('price')
    try:
        datetime.strptime(upd, '%m/%d/%Y')
    except ValueError:
        bad.append('date')
    if bad:
        print(rec, bad, repr(line))
PY""",
    "webshop": _PY_HEAD + f"""for line in open('{WEB}', encoding='utf-8'):
    r = json.loads(line)
    bad = []
    if not re.fullmatch(r'[A-Z]{{3}}-[0-9]{{4}}', str(r.get('sku') or '').strip().upper()):
        bad.append('sku')
    if not isinstance(r.get('price_cents'), int) or r['price_cents'] <= 0:
        bad.append('price')
    try:
        datetime.fromisoformat(r.get('updated_at') or '')
    except ValueError:
        bad.append('date')
    if bad:
        print(r.get('id'), bad, line.strip())
PY""",
    "dups": _PY_HEAD + f"""from collections import defaultdict
seen = defaultdict(list)
for r in list(csv.reader(open('{NORTH}', encoding='latin-1', newline=''), delimiter=';'))[1:]:
    seen[r[1].strip().upper()].append(('north', r[0], r[6]))
for line in open('{SOUTH}').read().splitlines()[3:]:
    if re.match(r'[0-9]{{6}}', line):
        s = line[6:15].strip()
        seen[s[:3] + '-' + s[3:] if '-' not in s else s].append(('south', line[:6], line[69:79].strip()))
for line in open('{WEB}', encoding='utf-8'):
    r = json.loads(line)
    seen[str(r.get('sku') or '').upper()].append(('webshop', r['id'], r.get('updated_at')))
for sku, recs in sorted(seen.items()):
    if len(recs) > 1:
        print(sku, recs)
PY""",
}


def _north_num(x: float, decimals: int) -> str:
    """1234.5 -> '1.234,50' (German style)."""
    s = f"{x:,.{decimals}f}"
    return s.replace(",", "_").replace(".", ",").replace("_", ".")


@register
class LegacyCatalogConversion(TaskFamily):
    name = "legacy_catalog_conversion"
    category = "data conversion"
    apps = ("files", "shell", "sheets")
    description = ("Convert three legacy product exports (Latin-1 semicolon CSV, fixed-width report, JSON lines) "
                   "into one normalised xlsx catalogue per a spec, with a rejected-rows file.")

    levels = 3
    """1: a clean record from each export, a SKU in two records and one broken record, read in one
    go, the spec's category table cut to the categories they use; 2: ten clean records per export besides every duplicate and broken one; 3 (default): 38-46
    per export."""
    toolsets = {1: (
        "files__read_file", "files__write_file", "shell__run", "sheets__create_workbook", "sheets__read_range",
        "sheets__write_rows",
    )}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        rate = round(rng.uniform(1.04, 1.16), 4)
        base_day = date(2025, 1, 1) + timedelta(days=rng.randrange(300))
        used_skus: set[str] = set()

        def new_sku(cat: str) -> str:
            while True:
                s = f"{rng.choice(PREFIX[cat])}-{rng.randint(1000, 9999)}"
                if s not in used_skus:
                    used_skus.add(s)
                    return s

        def some_day() -> date:
            return base_day + timedelta(days=rng.randint(0, 120))

        # -- the records, clean values first -------------------------------------------------------
        records: list[dict] = []
        counters = {"north": 0, "south": 0, "webshop": 0}

        def record(source: str, cat: str, sku: str, name: str, updated: date, defect: str | None = None) -> dict:
            counters[source] += 1
            n = counters[source]
            rid = str(n) if source == "north" else f"{n * 7 + 100:06d}" if source == "south" else f"w-{n * 3 + 11:05d}"
            kg = {"north": rng.randint(40, 9000) / 1000, "south": None, "webshop": None}[source]
            r = {"source": source, "id": rid, "cat": cat, "sku": sku, "name": name, "updated": updated,
                 "defect": defect}
            if source == "north":
                r["grams"] = round(kg * 1000, 1) if rng.random() < 0.2 else round(kg * 1000)
                r["kg"] = round(r["grams"] / 1000, 3)
                r["eur"] = round(rng.uniform(2, 400) if rng.random() < 0.9 else rng.uniform(1000, 2500), 2)
                r["usd"] = round(r["eur"] * rate + 1e-9, 2)
            elif source == "south":
                r["lb"] = round(rng.uniform(0.1, 25), 2)
                r["kg"] = round(r["lb"] * LB, 3)
                r["usd"] = round(rng.uniform(2, 450) if rng.random() < 0.9 else rng.uniform(1000, 3000), 2)
            else:
                unit = rng.choice(["g", "kg", "kg", "lb", "oz"])
                value = {"g": rng.randint(30, 8000), "kg": round(rng.uniform(0.1, 20), 2),
                         "lb": round(rng.uniform(0.2, 30), 2), "oz": round(rng.uniform(1, 60), 1)}[unit]
                r["unit"], r["value"] = unit, value
                r["kg"] = round(value * {"g": 0.001, "kg": 1.0, "lb": LB, "oz": OZ}[unit], 3)
                r["cents"] = rng.randint(199, 60000)
                r["usd"] = r["cents"] / 100
                r["offset"] = rng.choice([-8, -7, -5, -4, 0, 1, 2, 9])
                r["utc_time"] = time(rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59))
            records.append(r)
            return r

        def pick_name(source: str, cat: str) -> str:
            if source == "north":
                return rng.choice(NORTH_NAMES[cat])
            if source == "webshop" and cat in WEB_EXTRA and rng.random() < 0.5:
                return rng.choice(WEB_EXTRA[cat])
            return rng.choice(ENGLISH_NAMES[cat])

        cats = list(CATEGORIES)
        for source in ("north", "south", "webshop"):
            for _ in range(rng.randint(38, 46)):
                cat = rng.choice(cats)
                record(source, cat, new_sku(cat), pick_name(source, cat), some_day())
        # duplicates: the same product again, in another export or the same one
        dup_pairs = [("north", "webshop", True), ("south", "webshop", rng.random() < 0.5),
                     ("north", "south", rng.random() < 0.5), ("webshop", "webshop", rng.random() < 0.5),
                     ("north", "north", rng.random() < 0.5)]
        for first_src, second_src, second_newer in dup_pairs:
            orig = rng.choice([r for r in records if r["source"] == first_src and r["defect"] is None])
            shift = timedelta(days=rng.randint(2, 40))
            when = orig["updated"] + shift if second_newer else orig["updated"] - shift
            record(second_src, orig["cat"], orig["sku"], orig["name"] if first_src == second_src
                   else pick_name(second_src, orig["cat"]), when)
        # a SKU twice where the other record is broken: not a duplicate, just a reject
        orig = rng.choice([r for r in records if r["source"] == "north" and r["defect"] is None])
        record("south", orig["cat"], orig["sku"], pick_name("south", orig["cat"]), some_day(), "bad_price")
        # broken records
        for source in ("north", "south", "webshop"):
            for defect in rng.sample(["bad_sku", "bad_price", "bad_date", "bad_price", "bad_date"], 4):
                cat = rng.choice(cats)
                record(source, cat, new_sku(cat), pick_name(source, cat), some_day(), defect)

        # a webshop timestamp near midnight: its local date differs from the UTC date
        def crossing(r: dict) -> bool:
            local = datetime.combine(r["updated"], r["utc_time"]) + timedelta(hours=r["offset"])
            return local.date() != r["updated"]

        shuffled: dict[str, list[dict]] = defaultdict(list)
        for r in records:
            shuffled[r["source"]].append(r)
        # records appear in each export in id order; duplicates were appended last, so mix them in
        for source, rs in shuffled.items():
            rng.shuffle(rs)
            counters[source] = 0
            for r in rs:
                counters[source] += 1
                n = counters[source]
                r["id"] = str(n) if source == "north" else f"{n * 7 + 100:06d}" if source == "south" \
                    else f"w-{n * 3 + 11:05d}"
        records = [r for s in ("north", "south", "webshop") for r in shuffled[s]]
        if level < self.levels:  # the same draws as the default, then fewer records
            records = _fewer(rng, records, level)

        truth = _convert(records, None)
        kept_web = [r for r in records if r["source"] == "webshop" and r["id"] in truth["kept_ids"]]
        if not any(crossing(r) for r in kept_web):
            r = rng.choice(kept_web)
            r["offset"], r["utc_time"] = -6, time(rng.randint(0, 4), rng.randint(0, 59))
        truth = _convert(records, None)

        # -- render the exports ----------------------------------------------------------------------
        north_bytes = _render_north(rng, [r for r in records if r["source"] == "north"])
        south_text = _render_south(rng, [r for r in records if r["source"] == "south"], base_day)
        web_text = _render_web(rng, [r for r in records if r["source"] == "webshop"])
        old_north = _render_north(rng, [dict(r, eur=round(r["eur"] * 0.93, 2), updated=r["updated"] - timedelta(days=400))
                                        for r in records if r["source"] == "north"][:15])
        readme = _readme()
        spec = _spec(rate, {r["cat"] for r in records} if level == 1 else None)
        legacy = {NORTH: north_bytes, SOUTH: south_text.encode(), WEB: web_text.encode(),
                  f"{LEGACY}/README.txt": readme.encode(), f"{LEGACY}/old/north_export_2023.csv": old_north}
        legacy_hash = {p: sha256(b) for p, b in legacy.items()}
        spec_bytes = spec.encode()

        def build(root: Path) -> None:
            ws = root / "workspace"
            for rel, data in {**legacy, SPEC: spec_bytes}.items():
                (ws / rel).parent.mkdir(parents=True, exist_ok=True)
                (ws / rel).write_bytes(data)
            (ws / WORK).mkdir(parents=True)

        requester = fake.first_name()
        w = phrasing_rng(self.name, seed)
        context = say(w, "Hi! We're finally moving the product catalogue off the three old systems.",
                      "Hello, the product catalogue is finally leaving the three old systems.",
                      "Hi there, we're at last migrating the product catalogue away from the three old systems.")
        sources = say(w, f"Their exports are in {LEGACY}/ (the README there explains each format) and {SPEC} "
                         f"describes exactly what the new catalogue has to look like.",
                      f"{SPEC} describes exactly what the new catalogue has to look like; the three exports are in "
                      f"{LEGACY}/, and the README there explains each format.",
                      f"You'll find their exports in {LEGACY}/, with a README explaining each format, and the exact "
                      f"shape of the new catalogue in {SPEC}.")
        ask = say(w, f"Could you build {OUT} and the rejected-rows file the spec asks for?",
                  f"Can you build {OUT}, plus the rejected-rows file the spec asks for?",
                  f"Please build {OUT} and the rejected-rows file that the spec asks for.")
        limits = in_some_order(w, [
            say(w, f"Use {WORK}/ for anything intermediate.", f"Anything intermediate goes in {WORK}/.",
                f"Keep any intermediate files in {WORK}/."),
            say(w, "Please don't modify the exports themselves.", "The exports themselves must stay unmodified.",
                "Leave the exports themselves as they are."),
            say(w, "Ignore the old/ folder, that's a superseded export.",
                "The old/ folder holds a superseded export: ignore it.",
                "Don't use the old/ folder; it's a superseded export."),
        ])
        verify = say(w, "Once the workbook is written, read it back and check it against the spec before you call "
                        "it done.",
                     "Before you call it done, read the written workbook back and check it against the spec.",
                     "When the workbook is written, please read it back and verify it against the spec before "
                     "calling it done.")
        instruction = " ".join([context, sources, ask, *limits, verify,
                                say(w, f"Thanks, {requester}", f"Thank you! {requester}", f"Cheers, {requester}")])

        # -- oracle ------------------------------------------------------------------------------
        n_north = sum(r["source"] == "north" for r in records)
        n_south = sum(r["source"] == "south" for r in records)
        n_web = sum(r["source"] == "webshop" for r in records)

        def solve():
            if level == 1:
                return (yield from solve_short())
            yield ToolCall("files__list_dir", {"path": "catalog", "recursive": True}, "See what there is.")
            yield ToolCall("files__read_file", {"path": SPEC}, "Read the target format and the reject rules.")
            yield ToolCall("files__read_file", {"path": f"{LEGACY}/README.txt"}, "Read how each export is laid out.")
            yield ToolCall("shell__run", {"command": f"file {LEGACY}/*.* && wc -l {LEGACY}/*.*"},
                           "Check encodings, line ends and sizes.")
            north_cmd = f"iconv -f latin1 -t utf-8 {NORTH} | tr -d '\\r'"
            for start in range(1, n_north + 2, 25):
                yield ToolCall("shell__run", {"command": f"{north_cmd} | sed -n '{start},{start + 24}p'"},
                               f"Read the north export (Latin-1) as UTF-8, lines {start}-{start + 24}.")
            for start in range(1, n_south + 6, 25):
                yield ToolCall("shell__run", {"command": f"sed -n '{start},{start + 24}p' {SOUTH}"},
                               f"Read the fixed-width south report, lines {start}-{start + 24}.")
            for start in range(1, n_web + 1, 20):
                yield ToolCall("shell__run", {"command": f"sed -n '{start},{start + 19}p' {WEB}"},
                               f"Read webshop records {start}-{start + 19}.")
            for source, note in (("north", "north records whose SKU, price or date is broken"),
                                 ("south", "south records whose SKU, price or date is broken"),
                                 ("webshop", "webshop records whose SKU, price or timestamp is broken"),
                                 ("dups", "SKUs that are in more than one record, with their dates")):
                yield ToolCall("shell__run", {"command": CHECKS[source]}, f"List {note}.")
            yield ToolCall("shell__run", {"command": (
                f"echo north $(( $(iconv -f latin1 -t utf-8 {NORTH} | tr -d '\\r' | wc -l) - 1 )); "
                f"echo south $(grep -cE '^[0-9]{{6}}' {SOUTH}); echo webshop $(grep -c . {WEB}); "
                f"tail -n 2 {SOUTH}")},
                "Count the records in each export, to check that kept plus rejected adds up.")
            rows = truth["rows"]
            yield ToolCall("sheets__create_workbook", {"path": OUT, "sheets": ["Products"]}, "Create the workbook.")
            chunk = 40
            yield ToolCall("sheets__write_rows", {"path": OUT, "sheet": "Products", "start_cell": "A1",
                                                  "rows": [HEADER] + rows[:chunk]},
                           "Write the header and first rows.")
            for i in range(chunk, len(rows), chunk):
                yield ToolCall("sheets__write_rows", {"path": OUT, "sheet": "Products", "start_cell": f"A{i + 2}",
                                                      "rows": rows[i:i + chunk]}, f"Write rows {i + 2}-{i + 1 + len(rows[i:i + chunk])}.")
            yield ToolCall("sheets__list_sheets", {"path": OUT},
                           f"Check the sheet holds the header plus {len(rows)} product rows.")
            yield ToolCall("files__write_file", {"path": REJECTS, "content": _rejects_csv(truth["rejects"])},
                           "Write the rejects.")
            for start in range(1, len(rows) + 2, 60):
                yield ToolCall("sheets__read_range", {"path": OUT, "sheet": "Products",
                                                      "range": f"A{start}:G{min(start + 59, len(rows) + 1)}"},
                               "Read the catalogue back to check it.")
            yield ToolCall("files__read_file", {"path": REJECTS}, "Check the rejected-rows file.")
            return (f"Built {OUT} with {len(rows)} products and {REJECTS} with {len(truth['rejects'])} rejected "
                    f"records ({n_north} north + {n_south} south + {n_web} webshop records in all).")

        def solve_short():
            """Level 1: the exports are a few lines each: read them in one go, write both outputs,
            read the workbook back."""
            yield ToolCall("files__read_file", {"path": SPEC}, "Read the target format and the reject rules.")
            yield ToolCall("files__read_file", {"path": f"{LEGACY}/README.txt"}, "Read how each export is laid out.")
            yield ToolCall("shell__run", {"command": f"iconv -f latin1 -t utf-8 {NORTH} | tr -d '\\r'; echo; "
                                                     f"cat {SOUTH}; echo; cat {WEB}"},
                           "Read the three exports (north as UTF-8).")
            yield ToolCall("sheets__create_workbook", {"path": OUT, "sheets": ["Products"]}, "Create the workbook.")
            yield ToolCall("sheets__write_rows", {"path": OUT, "sheet": "Products", "start_cell": "A1",
                                                  "rows": [HEADER] + truth["rows"]},
                           "Write the header and the products.")
            yield ToolCall("files__write_file", {"path": REJECTS, "content": _rejects_csv(truth["rejects"])},
                           "Write the rejects.")
            yield ToolCall("sheets__read_range", {"path": OUT, "sheet": "Products"},
                           "Read the catalogue back to check it.")
            return (f"Built {OUT} with {len(truth['rows'])} products and {REJECTS} with {len(truth['rejects'])} "
                    f"rejects.")

        # -- grading -----------------------------------------------------------------------------
        want = {r[0]: r for r in truth["rows"]}

        def table(w):
            t = read_table(w.file(OUT), "Products")
            if t is None:
                return None, f"{OUT} or its Products sheet is missing"
            head, body = t
            body = [list(r) + [None] * (7 - len(r)) for r in body if not all(blank(v) for v in r)]
            return (head, body), ""

        def by_sku(w):
            t, why = table(w)
            if t is None:
                return None, why
            out = {}
            for r in t[1]:
                out.setdefault(str(r[0] or "").strip().upper(), r)
            return out, ""

        def layout(w, tr):
            t, why = table(w)
            if t is None:
                return False, why
            head = [norm_text(h) for h in t[0][:7]]
            return head == [h.lower() for h in HEADER], f"header {t[0][:7]}"

        def products_set(w, tr):
            t, why = table(w)
            if t is None:
                return False, why
            got = [str(r[0] or "").strip().upper() for r in t[1]]
            if len(got) != len(set(got)):
                return False, "a SKU appears on more than one row"
            missing, extra = sorted(set(want) - set(got)), sorted(set(got) - set(want))
            return not missing and not extra, f"missing {missing[:5]}, unexpected {extra[:5]}"

        def column(check_fn, label: str, only=None):
            def check(w, tr):
                rows, why = by_sku(w)
                if rows is None:
                    return False, why
                bad = []
                for sku, exp in want.items():
                    if only is not None and sku not in only:
                        continue
                    r = rows.get(sku)
                    if r is None or not check_fn(r, exp):
                        bad.append(f"{sku}: {r[1:7] if r else 'missing'}")
                return not bad, f"{label} wrong for {len(bad)}: {bad[:3]}" if bad else ""
            return check

        def same_name(r, e):
            return " ".join(str(r[1] or "").split()).casefold() == e[1].casefold() and norm_text(r[2]) == e[2].lower()

        def near(idx: int, tol: float):
            def f(r, e):
                v = to_number(r[idx])
                return v is not None and abs(v - e[idx]) <= tol
            return f

        def same_date(r, e):
            v = r[5]
            text = v.date().isoformat() if isinstance(v, datetime) else v.isoformat() if isinstance(v, date) \
                else str(v or "").strip()[:10]
            return text == e[5]

        dup_skus = truth["dup_skus"]

        def dup_ok(r, e):
            return same_date(r, e) and norm_text(r[6]) == e[6]

        def sorted_rows(w, tr):
            t, why = table(w)
            if t is None:
                return False, why
            got = [str(r[0] or "").strip().upper() for r in t[1]]
            if sorted(set(got)) != sorted(want):
                return False, "the SKUs are not the expected ones"
            return got == sorted(got), "rows are not sorted by SKU"

        def rejects_ok(w, tr):
            p = w.file(REJECTS)
            if p.is_symlink() or not p.is_file():
                return False, f"{REJECTS} is missing"
            text = output_text(p, encoding="utf-8-sig")
            rows = [r for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r)]
            if not rows or [norm_text(h) for h in rows[0][:3]] != ["source", "record", "reason"]:
                return False, f"header {rows[0] if rows else None}"
            got = sorted((_norm_source(r[0]), _norm_id(r[1]), r[2].strip().lower()) for r in rows[1:] if len(r) >= 3)
            exp = sorted((s, _norm_id(i), why) for s, i, why in truth["rejects"])
            if got != exp:
                missing = sorted(set(exp) - set(got))
                extra = sorted(set(got) - set(exp))
                return False, f"missing {missing[:4]}, unexpected {extra[:4]}"
            return True, ""

        def legacy_untouched(w, tr):
            bad = []
            for rel, h in legacy_hash.items():
                p = w.file(rel)
                if p.is_symlink() or not p.is_file() or sha256(output_bytes(p)) != h:
                    bad.append(rel)
            return not bad, f"changed or missing: {bad}" if bad else ""

        def no_stray(w, tr):
            allowed = set(legacy) | {SPEC, OUT, REJECTS}
            extra = sorted(f for f in workspace_files(w) if f not in allowed and not f.startswith(WORK + "/"))
            return not extra, f"unexpected files: {extra}" if extra else ""

        def verified(w, tr):
            last_write = max((i for i, c in enumerate(tr.tool_calls) if not c.is_error and c.app == "sheets"
                              and isinstance(c.arguments, dict) and norm_path(c.arguments.get("path")) == OUT
                              and c.tool in ("write_rows", "write_cells", "clear_range", "create_workbook")),
                             default=None)
            if last_write is None:
                return False, "the workbook was never written"
            later = [c for c in tr.tool_calls[last_write + 1:] if c.name == "sheets__read_range" and not c.is_error
                     and isinstance(c.arguments, dict) and norm_path(c.arguments.get("path")) == OUT]
            return bool(later), "" if later else "the workbook was not read back after its last write"

        criteria = [
            Criterion("workbook_layout", f"{OUT} has a Products sheet headed {', '.join(HEADER)}", "final_state", layout,
                      requires=("products_set",)),
            Criterion("products_set", "exactly the valid, de-duplicated SKUs (normalised to ABC-1234), one row each",
                      "final_state", products_set, 2.0),
            Criterion("names_categories", "names trimmed with accents intact; categories mapped to the new names",
                      "final_state", column(same_name, "name/category")),
            Criterion("weights", "weights in kg to 3 decimals (grams, pounds and ounces converted)", "final_state",
                      column(near(3, 0.0011), "weight"), 2.0),
            Criterion("prices", "prices in USD to the cent (north's EUR converted at the spec's rate)", "final_state",
                      column(near(4, 0.011), "price"), 2.0),
            Criterion("dates", "Updated as YYYY-MM-DD (webshop timestamps taken as the UTC date)", "final_state",
                      column(same_date, "date")),
            Criterion("duplicates_resolved", "for a SKU in several records, the row is the latest record's",
                      "final_state", column(dup_ok, "duplicate", only=dup_skus)),
            Criterion("sorted_by_sku", "rows are sorted by SKU", "final_state", sorted_rows),
            Criterion("rejected_file", f"{REJECTS} lists every rejected record (source, record id, reason code)",
                      "final_state", rejects_ok, 2.0),
            Criterion("legacy_untouched", "every legacy export (and the old one) is byte-identical", "final_state",
                      legacy_untouched, guard=True),
            Criterion("no_stray_files", f"no new files outside {WORK}/ besides the two outputs", "final_state",
                      no_stray, guard=True),
            Criterion("verified_output", "the workbook was read back after it was last written", "process", verified,
                      requires=("products_set",)),
        ]
        # -- perturbations: a conversion rule broken (``_convert``'s variants) is the oracle writing
        # that data in its own calls; the rest change what it does around them
        write = perturb.on("sheets__write_rows", path=OUT)

        def writing(mistake: str) -> perturb.Oracle:
            res = _convert(records, mistake)

            def rows(a: dict) -> dict:  # each write gets its slice of the wrong rows (the last one: the rest)
                head = a["rows"][:1] if a["start_cell"] == "A1" else []
                i, n = int(a["start_cell"][1:]) + len(head) - 2, len(a["rows"]) - len(head)
                return {**a, "rows": head + res["rows"][i:None if i + n >= len(truth["rows"]) else i + n]}
            rejects = perturb.on("files__write_file", path=REJECTS)
            return perturb.change(perturb.change(solve, write, rows, count=None), rejects,
                                  content=_rejects_csv(res["rejects"]))

        readme = perturb.on("files__read_file", path=f"{LEGACY}/README.txt")
        loose_head = ["SKU", "Name", "Category", "Weight", "Price (USD)", "Updated", "Source"]  # no unit on Weight
        perturbations = {
            "workbook_layout": perturb.change(solve, perturb.on("sheets__write_rows", path=OUT, start_cell="A1"),
                                              lambda a: {**a, "rows": [loose_head] + a["rows"][1:]}),
            **{c: writing(m) for c, m in (("products_set", "sku_nodash"), ("names_categories", "mojibake"),
                                          ("weights", "lb_as_kg"), ("prices", "eur"), ("dates", "local_date"),
                                          ("duplicates_resolved", "dup_first"), ("sorted_by_sku", "unsorted"),
                                          ("rejected_file", "no_dup_rejects"))},
            "legacy_untouched": perturb.insert(solve, ToolCall("shell__run", {
                "command": f"iconv -f latin1 -t utf-8 {NORTH} > {WORK}/n.csv && mv {WORK}/n.csv {NORTH}"},
                "Convert north to UTF-8."), after=readme),
            "no_stray_files": perturb.insert(solve, ToolCall("shell__run", {
                "command": f"iconv -f latin1 -t utf-8 {NORTH} | tr -d '\\r' > {LEGACY}/north_utf8.csv"},
                "Keep a UTF-8 copy of the north export."), after=readme),
            "verified_output": perturb.drop(solve, perturb.on("sheets__read_range", path=OUT), count=None),
        }
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations=perturbations,
            data={"rate": rate, "products": len(truth["rows"]), "rejects": truth["rejects"],
                  "duplicate_skus": sorted(dup_skus)},
        )


def _fewer(rng, records: list[dict], level: int) -> list[dict]:
    """A lower level's records, renumbered in each export. Level 2: every duplicate and broken
    record, and ten clean ones per export. Level 1: a clean record of each export (north's with
    an accent), a SKU in two records where the first is the older, and one broken record, picked
    so that the rows would not come out sorted without sorting."""
    by_sku: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by_sku[r["sku"]].append(r)
    single = [r for r in records if r["defect"] is None and len(by_sku[r["sku"]]) == 1]
    if level == 2:
        keep = {id(r) for r in records if r["defect"] or len(by_sku[r["sku"]]) > 1}
        for source in ("north", "south", "webshop"):
            keep |= {id(r) for r in [r for r in single if r["source"] == source][:10]}
    else:
        clean = [[r for r in rs if r["defect"] is None] for rs in by_sku.values()]
        pair = next([rs[0], max(rs, key=lambda r: r["updated"])] for rs in clean
                    if len(rs) > 1 and max(rs, key=lambda r: r["updated"]) is not rs[0])
        broken = rng.choice([r for r in records if r["defect"] and len(by_sku[r["sku"]]) == 1])
        for _ in range(100):
            picked = [rng.choice([r for r in single if r["source"] == s]) for s in ("north", "south", "webshop")]
            keep = {id(r) for r in pair + picked + [broken]}
            out = [r for r in records if id(r) in keep]
            if _convert(out, None)["rows"] != _convert(out, "unsorted")["rows"]:
                break
    out = [r for r in records if id(r) in keep]
    norths = [r for r in out if r["source"] == "north" and r["defect"] is None and len(by_sku[r["sku"]]) == 1]
    if not any(not r["name"].isascii() for r in norths):  # the mojibake check needs an accent in north
        norths[0]["name"] = rng.choice([n for n in NORTH_NAMES[norths[0]["cat"]] if not n.isascii()])
    counters = {"north": 0, "south": 0, "webshop": 0}
    for r in out:
        counters[r["source"]] += 1
        n = counters[r["source"]]
        r["id"] = str(n) if r["source"] == "north" else f"{n * 7 + 100:06d}" if r["source"] == "south" \
            else f"w-{n * 3 + 11:05d}"
    return out


def _rejects_csv(rejects: list[tuple[str, str, str]]) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([["source", "record", "reason"], *rejects])
    return buf.getvalue()


# -- conversion rules (the ground truth and its flawed variants) ----------------------------------


def _convert(records: list[dict], flaw: str | None) -> dict:
    valid = [r for r in records if r["defect"] is None]
    rejects = [(r["source"], r["id"], r["defect"]) for r in records if r["defect"]]

    def sku(r):
        if flaw == "sku_nodash" and r["source"] == "south":
            return r["sku"].replace("-", "")
        return r["sku"]

    def updated(r):
        if flaw == "local_date" and r["source"] == "webshop":
            return (datetime.combine(r["updated"], r["utc_time"]) + timedelta(hours=r["offset"])).date()
        return r["updated"]

    groups: dict[str, list[dict]] = defaultdict(list)
    for r in valid:
        groups[sku(r)].append(r)
    kept = []
    dup_skus = set()
    for s, rs in groups.items():
        if len(rs) > 1:
            dup_skus.add(s)
        best = rs[0] if flaw == "dup_first" else max(rs, key=updated)
        kept.append(best)
        if flaw != "no_dup_rejects":
            rejects += [(r["source"], r["id"], "duplicate_sku") for r in rs if r is not best]
    rows = []
    for r in kept:
        name = r["name"]
        if flaw == "mojibake" and r["source"] == "north":
            name = name.encode("ascii", "replace").decode()
        kg = r["lb"] if flaw == "lb_as_kg" and r["source"] == "south" else r["kg"]
        usd = r["eur"] if flaw == "eur" and r["source"] == "north" else r["usd"]
        rows.append([sku(r), name, r["cat"], kg, usd, updated(r).isoformat(), r["source"]])
    if flaw != "unsorted":
        rows.sort(key=lambda x: x[0])
    order = {"north": 0, "south": 1, "webshop": 2}
    rejects.sort(key=lambda x: (order[x[0]], x[1]))
    return {"rows": rows, "rejects": rejects, "kept_ids": {r["id"] for r in kept}, "dup_skus": dup_skus}


def _norm_source(v: str) -> str:
    s = v.strip().lower()
    for name in ("north", "south", "webshop"):
        if s.startswith(name):
            return name
    return s


def _norm_id(v: str) -> str:
    s = v.strip().lower()
    return str(int(s)) if s.isdigit() else s


# -- rendering the exports ------------------------------------------------------------------------


def _render_north(rng, rs: list[dict]) -> bytes:
    buf = io.StringIO()
    w = csv.writer(buf, delimiter=";", lineterminator="\r\n")
    w.writerow(["Nr", "Artikelnr", "Bezeichnung", "Kategorie", "Gewicht_g", "Preis_EUR", "Stand"])
    for r in rs:
        sku = r["sku"].lower()
        if rng.random() < 0.25:
            sku = f" {sku} "
        price = _north_num(r["eur"], 2)
        stand = r["updated"].strftime("%d.%m.%Y")
        if r["defect"] == "bad_sku":
            sku = rng.choice(["", "xx-12", "kit_4411"])
        elif r["defect"] == "bad_price":
            price = rng.choice(["", "k.A.", "-3,50", "0,00"])
        elif r["defect"] == "bad_date":
            stand = rng.choice(["31.02.2025", "", "00.00.0000", "29.02.2025"])
        grams = r["grams"]
        g = _north_num(grams, 1) if isinstance(grams, float) and not float(grams).is_integer() else str(int(grams))
        name = r["name"] if rng.random() < 0.8 else f"  {r['name']} "
        w.writerow([r["id"], sku, name, CATEGORIES[r["cat"]][0], g, price, stand])
    return buf.getvalue().encode("latin-1")


SOUTH_COLS = [("REC", 6), ("SKU", 9), ("NAME", 30), ("CAT", 4), ("WT_LB", 9), ("PRICE", 11), ("UPDATED", 10)]


def _render_south(rng, rs: list[dict], day: date) -> str:
    def line(values: list[str]) -> str:
        out = ""
        for (name, width), v in zip(SOUTH_COLS, values):
            v = v[:width]
            out += v.rjust(width) if name in ("WT_LB", "PRICE") else v.ljust(width)
        return out.rstrip()

    lines = [f"SOUTH WAREHOUSE - ARTICLE MASTER EXTRACT   RUN {day:%m/%d/%Y}",
             line([n for n, _ in SOUTH_COLS]), "-" * sum(w for _, w in SOUTH_COLS)]
    for r in rs:
        sku = r["sku"].replace("-", "")
        price = f"${r['usd']:,.2f}"
        upd = r["updated"].strftime("%m/%d/%Y")
        if r["defect"] == "bad_sku":
            sku = rng.choice(["", "AB123", "12345"])
        elif r["defect"] == "bad_price":
            price = rng.choice(["N/A", "$-4.00", "", "$0.00"])
        elif r["defect"] == "bad_date":
            upd = rng.choice(["02/30/2025", f"13/{rng.randint(1, 28):02d}/2025", "00/00/0000"])
        name = r["name"] if rng.random() < 0.8 else r["name"].replace(" ", "  ", 1)
        lines.append(line([r["id"], sku, name, CATEGORIES[r["cat"]][1], f"{r['lb']:.2f}", price, upd]))
    lines += ["*** END OF REPORT", f"RECORDS: {len(rs)}"]
    return "\n".join(lines) + "\n"


def _render_web(rng, rs: list[dict]) -> str:
    out = []
    for r in rs:
        local = datetime.combine(r["updated"], r["utc_time"]).replace(tzinfo=timezone.utc) \
            .astimezone(timezone(timedelta(hours=r["offset"])))
        obj: dict = {"id": r["id"], "sku": r["sku"], "title": r["name"], "category": CATEGORIES[r["cat"]][2],
                     "weight": {"value": r["value"], "unit": r["unit"]}, "price_cents": r["cents"],
                     "updated_at": local.isoformat()}
        if r["defect"] == "bad_sku":
            choice = rng.choice(["missing", "null", "short"])
            if choice == "missing":
                del obj["sku"]
            else:
                obj["sku"] = None if choice == "null" else "WB-77"
        elif r["defect"] == "bad_price":
            obj["price_cents"] = rng.choice([None, -500, 0])
        elif r["defect"] == "bad_date":
            obj["updated_at"] = rng.choice(["2025-02-30T10:00:00+00:00", "", "not set"])
        if rng.random() < 0.3:
            obj = {k: obj[k] for k in rng.sample(list(obj), len(obj))}
        out.append(json.dumps(obj, ensure_ascii=False))
    return "\n".join(out) + "\n"


def _readme() -> str:
    cols = []
    pos = 1
    for name, width in SOUTH_COLS:
        cols.append(f"  {name:<8} {pos}-{pos + width - 1}")
        pos += width
    return (
        "Legacy exports for the catalogue migration\n"
        "==========================================\n\n"
        "north_export.csv  - North warehouse (old German ERP). ISO-8859-1 (Latin-1), semicolon-separated,\n"
        "                    Windows line ends, fields with a semicolon are double-quoted. Weight in grams,\n"
        "                    price in EUR, both with a decimal comma (and a dot for thousands).\n"
        "                    Stand = last change, DD.MM.YYYY.\n"
        "south_export.txt  - South warehouse report, fixed-width ASCII. Columns by character position\n"
        "                    (1-based, inclusive):\n" + "\n".join(cols) + "\n"
        "                    WT_LB is pounds, PRICE is USD, UPDATED is MM/DD/YYYY. The first three lines\n"
        "                    are a title, the column names and a rule; the report ends with an END line\n"
        "                    and a record count. SKUs are written without the dash.\n"
        "webshop.jsonl     - Web shop, one JSON object per line (UTF-8): weight has its own unit (g, kg,\n"
        "                    lb or oz), price_cents is USD cents, updated_at is ISO 8601 with a UTC offset.\n\n"
        "old/              - superseded exports, kept for reference only.\n"
    )


def _spec(rate: float, cats: set[str] | None = None) -> str:
    """The spec; ``cats`` (level 1) keeps only those rows of the category table."""
    table = "".join(f"| {new} | {n} | {s} | {w} |\n" for new, (n, s, w) in CATEGORIES.items()
                    if cats is None or new in cats)
    return f"""# Catalogue migration: target format

## Output

{OUT}, one sheet named "Products", header in row 1:

    {" | ".join(HEADER)}

One row per product, sorted by SKU (A to Z).

## Fields

- **SKU**: upper case, no spaces: three letters, a dash, four digits (ABC-1234). The old systems
  write it in lower case, with stray spaces or without the dash; normalise those. Anything that
  still doesn't fit, or a missing SKU: reject the record as `bad_sku`.
- **Name**: as exported, trimmed, runs of spaces collapsed to one. Keep accents and umlauts.
- **Category**: the new name from the table below.
- **Weight (kg)**: in kilograms, 3 decimals. 1 lb = 0.45359237 kg, 1 oz = 0.028349523125 kg.
- **Price (USD)**: 2 decimals. North prices are in EUR: convert at the migration rate
  1 EUR = {rate:.4f} USD, then round to the cent. A missing, non-numeric, zero or negative price:
  reject as `bad_price`.
- **Updated**: YYYY-MM-DD. Webshop timestamps carry a UTC offset: use the date in UTC. An
  impossible or unreadable date: reject as `bad_date`.
- **Source**: `north`, `south` or `webshop`, the export the row comes from.

## Duplicates

Validate every record first (rejects above). If a SKU is then left in more than one record (in
one export or across exports), keep the record with the latest Updated date and reject the
others as `duplicate_sku`.

## Rejected records

{REJECTS}: comma-separated, header `source,record,reason`, one line per rejected record: the
export (`north`, `south`, `webshop`), the record's id in it (north: Nr, south: REC, webshop: id)
and the reason code (`bad_sku`, `bad_price`, `bad_date`, `duplicate_sku`).

## Categories

| New category | north (Kategorie) | south (CAT) | webshop (category) |
|---|---|---|---|
{table}"""
