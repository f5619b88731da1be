"""Spreadsheet cleanup: consolidate a messy monthly stock count (one sheet per warehouse).

Each site typed its count its own way: different column names and order, SKUs in lower case,
with spaces or without the dash, its own spelling of the item names, quantities in eaches,
dozens or cases (case sizes live in the catalog, whose old sheet has stale pack sizes), dates
as date cells or text in four styles (one European site writes day/month/year), recounts
listed next to the superseded count, aisle subtotal rows in the middle, blank rows, and stock
of discontinued items. The README holds the rules; the agent adds one clean consolidated sheet
to the same workbook and leaves the signed-off site sheets exactly as they were.

The default level draws its trap mix per seed (``TRAP_ODDS``): recounts listed next to the
superseded count, pack sizes that changed since the catalog's old sheet, and a European site
writing day/month/year are each there or not (recounts or changed pack sizes always; the
discontinued stock, subtotal rows and typed descriptions always). A trap that is there names the
SKUs it shows on in ``Task.data`` (``recounted``, ``stale_case``, ``day_first_dates``) and has its
own criterion (``recounts_used``, ``current_case_sizes``, ``day_first_dates``); an absent one has
neither. Levels 1-2 keep every trap. The README's rules are the same either way.
"""

from __future__ import annotations

import io
import re
from datetime import date, datetime, timedelta
from functools import partial
from itertools import combinations
from pathlib import Path

import openpyxl
from openpyxl import Workbook

from longhorizon.apps.sheets.state import read_workbook
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register
from longhorizon.tasks.kit import files as files_kit
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.common import (
    Files,
    blank,
    norm_path,
    norm_text,
    parse_json,
    read_table,
    rng_and_faker,
    to_number,
    write_files,
)

US_SITES = ["Reno", "Dallas", "Columbus", "Atlanta", "Memphis", "Phoenix", "Newark"]
EU_SITES = ["Dublin", "Rotterdam", "Leeds"]
SHEET_SUFFIX = ["", " WH", " DC", " Warehouse"]
LAYOUTS = [
    {"sku": "SKU", "item": "Item", "qty": "Qty", "unit": "Unit", "date": "Counted"},
    {"sku": "Item Code", "item": "Description", "qty": "Count", "unit": "UoM", "date": "Count Date"},
    {"sku": "SKU", "item": "Description", "unit": "Unit", "qty": "Qty", "date": "Last Count"},
]
LAYOUT_ORDER = [["sku", "item", "qty", "unit", "date"], ["sku", "item", "qty", "unit", "date"],
                ["sku", "item", "unit", "qty", "date"]]
PREFIXES = ["BRK", "CBL", "FLT", "GSK", "HNG", "LMP", "PMP", "VLV", "WSH", "BLT", "CLP", "NZL"]
THINGS = {
    "BRK": "Bracket", "CBL": "Cable", "FLT": "Filter", "GSK": "Gasket", "HNG": "Hinge", "LMP": "Lamp",
    "PMP": "Pump Seal", "VLV": "Valve", "WSH": "Washer", "BLT": "Bolt", "CLP": "Clamp", "NZL": "Nozzle",
}
MATERIALS = ["Stainless", "Galvanised", "Brass", "Nylon", "Aluminium", "Steel", "Copper", "Rubber"]
ABBREV = {"Stainless": "SS", "Galvanised": "Galv.", "Aluminium": "Alu", "Copper": "Cu"}
SIZES = ["6mm", "8mm", "10mm", "12mm", "16mm", "20mm", "25mm", "1/4in", "1/2in", "3/4in", "1in", "Large", "Small"]
CASE_QTYS = [6, 10, 12, 20, 24, 25, 48, 50]
EACH_UNITS = ["ea", "EA", "each", "pcs", "Each"]
CASE_UNITS = ["case", "cs", "CS", "cases", "Case"]
DOZEN_UNITS = ["dz", "doz", "dozen"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
TRAP_ODDS = {"recounts": 0.6, "stale_case": 0.6, "day_first": 0.6}
"""The default level's optional traps, each there with this chance (one of recounts and stale_case
always)."""
TRAPS = {
    # trap: (Task.data key and criterion id, consolidate's mistake that shows it, what the criterion checks)
    "recounts": ("recounted", "recounts_used", "sum_duplicates",
                 "recounted SKUs carry the recount's quantity, not the sum with the superseded line"),
    "stale_case": ("stale_case", "current_case_sizes", "old_case",
                   "SKUs counted in cases whose pack size changed use the Items sheet's Case Qty"),
    "day_first": ("day_first_dates", "day_first_dates", "swap_dates",
                  "Last Counted reads the European site's slashed dates as day/month/year"),
}
CHUNK = 20
"""Rows the oracle reads or writes per call, as someone paging through a sheet would."""


# -- the README's rules, as the oracle applies them to what it reads ---------------------------


def sku_key(v) -> str | None:
    """'vlv 2041', ' VLV2041', 'vlv-2041' -> 'VLV-2041'; None when the cell is not a SKU."""
    if v is None:
        return None
    s = re.sub(r"[^A-Z0-9]", "", str(v).upper())
    return f"{s[:3]}-{s[3:]}" if re.fullmatch(r"[A-Z]{3}\d{4}", s) else None


def unit_factor(unit, case_qty: int) -> int:
    u = norm_text(unit)
    if u in (x.lower() for x in EACH_UNITS):
        return 1
    if u in DOZEN_UNITS:
        return 12
    if u in (x.lower() for x in CASE_UNITS):
        return case_qty
    raise ValueError(f"unknown unit {unit!r}")


def parse_qty(v) -> int:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return int(v)
    return int(str(v).replace(",", "").strip())


def parse_day(v, day_first: bool, swap: bool = False) -> date:
    """Every date style the sites use; slashed dates per the site's convention (``swap``: the
    mistake of reading a day-first site month-first whenever that gives a real date)."""
    if isinstance(v, datetime):
        return v.date()
    if isinstance(v, date):
        return v
    s = " ".join(str(v).split())
    if m := re.fullmatch(r"(\d{4})-(\d{1,2})-(\d{1,2})", s):
        return date(int(m[1]), int(m[2]), int(m[3]))
    if m := re.fullmatch(r"(\d{1,2})/(\d{1,2})/(\d{4})", s):
        a, b, y = int(m[1]), int(m[2]), int(m[3])
        if day_first and swap and a <= 12:
            return date(y, a, b)
        return date(y, b, a) if day_first else date(y, a, b)
    if m := re.fullmatch(r"(\d{1,2}) ([A-Za-z]{3}) (\d{4})", s):
        return date(int(m[3]), [x[:3] for x in MONTHS].index(m[2].title()) + 1, int(m[1]))
    if m := re.fullmatch(r"([A-Za-z]+) (\d{1,2}), (\d{4})", s):
        return date(int(m[3]), MONTHS.index(m[1].title()) + 1, int(m[2]))
    raise ValueError(f"unknown date {v!r}")


def consolidate(sites: list[dict], catalog: dict[str, dict], flaw: str | None = None) -> dict[str, dict]:
    """SKU -> {"qty": {site: eaches}, "total", "last"} from the raw site rows (``flaw``: one mistake)."""
    latest: dict[tuple[str, str], tuple[date, int]] = {}
    for site in sites:
        for r in site["rows"]:
            key = sku_key(r["sku"])
            if key is None or (catalog[key]["status"] != "Active" and flaw != "keep_discontinued"):
                continue
            day = parse_day(r["date"], site["day_first"], swap=flaw == "swap_dates")
            case = catalog[key]["old_case"] if flaw == "old_case" else catalog[key]["case"]
            qty = parse_qty(r["qty"]) * unit_factor(r["unit"], case)
            prev = latest.get((site["name"], key))
            if flaw == "sum_duplicates" and prev:
                latest[(site["name"], key)] = (max(day, prev[0]), prev[1] + qty)
            elif prev is None or day > prev[0]:
                latest[(site["name"], key)] = (day, qty)
    out: dict[str, dict] = {}
    for (site, key), (day, qty) in sorted(latest.items()):
        item = out.setdefault(key, {"qty": {s["name"]: 0 for s in sites}, "last": day})
        item["qty"][site] = qty
        item["last"] = max(item["last"], day)
    for item in out.values():
        item["total"] = sum(item["qty"].values())
    return dict(sorted(out.items()))


# -- messy spellings ------------------------------------------------------------------------------


def _messy_sku(rng, sku: str) -> str:
    style = rng.randrange(9)
    if style < 4:
        return sku
    return [sku.lower(), sku.replace("-", ""), f" {sku} ", sku.replace("-", " ").lower(), f"{sku.lower()}  "][style - 4]


def _messy_name(rng, desc: str) -> str:
    style = rng.randrange(7)
    if style == 0:
        return desc
    if style == 1:
        return desc.lower()
    if style == 2:
        return f"  {desc}"
    if style == 3:
        return desc.replace(" ", "  ", 1)
    if style == 4:
        words = desc.split(" ")
        return f"{' '.join(words[1:])}, {words[0]}"
    if style == 5:
        first = desc.split(" ")[0]
        return desc.replace(first, ABBREV.get(first, first.upper()), 1)
    return desc.upper()


def _messy_date(rng, d: date, day_first: bool):
    style = rng.randrange(6 if not day_first else 8)
    if style == 0:
        return datetime(d.year, d.month, d.day)
    if style == 1:
        return d.isoformat()
    if style == 2:
        return f"{d.day} {MONTHS[d.month - 1][:3]} {d.year}"
    if style == 3:
        return f"{MONTHS[d.month - 1]} {d.day}, {d.year}"
    return f"{d.day:02d}/{d.month:02d}/{d.year}" if day_first else f"{d.month}/{d.day}/{d.year}"


def _messy_qty(rng, n: int):
    if n >= 1000 and rng.random() < 0.6:
        return f"{n:,}"
    if rng.random() < 0.1:
        return f"{n} "
    return n


@register
class InventorySheetCleanup(TaskFamily):
    name = "inventory_sheet_cleanup"
    category = "spreadsheet cleanup"
    apps = ("sheets", "files")
    description = (
        "Consolidate a messy multi-warehouse stock count into one clean sheet by the README's rules: "
        "canonical SKUs and catalog descriptions, units converted to eaches with the current case sizes, "
        "recounts replacing superseded lines, subtotal/blank rows and discontinued items dropped, "
        "ISO count dates (one site writes day/month/year); the site sheets stay untouched."
    )

    levels = 3
    """1: one warehouse (the day/month/year one), cut to the fewest of its SKUs that still tell every
    mistake apart (a discontinued one, a recount, a case on a changed pack size, a slashed date
    first); 2: three; 3 (default): five or six. Below the default the catalog lists what the kept
    sites stock; every level keeps its stale sheet, last month's file and the README's rules."""
    toolsets = {1: ("files__read_file", "sheets__add_sheet", "sheets__read_range", "sheets__write_rows")}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        year = rng.choice([2024, 2025])
        month = rng.randint(2, 11)
        stock_path = f"inventory/stock_count_{year}-{month:02d}.xlsx"
        archive_path = f"inventory/archive/stock_count_{year}-{month - 1:02d}.xlsx"
        catalog_path = "inventory/catalog.xlsx"
        readme_path = "inventory/README.md"
        clean = rng.choice(["Consolidated", "All Sites", "Combined Stock"])
        traps = set(TRAP_ODDS)  # the smaller levels keep every trap (and their draws as they were)
        if level == self.levels:
            traps = {k for k, p in TRAP_ODDS.items() if rng.random() < p}
            if not {"recounts", "stale_case"} & traps:
                traps.add(rng.choice(["recounts", "stale_case"]))

        for _attempt in range(60):
            # the catalog
            catalog: dict[str, dict] = {}
            descs: set[str] = set()
            prefixes = rng.sample(PREFIXES, 7)
            size = rng.randint(70, 84)
            while len(catalog) < size:
                p = rng.choice(prefixes)
                sku = f"{p}-{rng.randint(1000, 9999)}"
                desc = f"{rng.choice(MATERIALS)} {THINGS[p]} {rng.choice(SIZES)}"
                if sku in catalog or desc in descs:
                    continue
                descs.add(desc)
                case = rng.choice(CASE_QTYS)
                stale = rng.choice([c for c in CASE_QTYS if c != case]) if rng.random() < 0.4 else case
                if "stale_case" not in traps:  # last year's sheet has the same pack sizes
                    stale = case
                catalog[sku] = {"desc": desc, "case": case, "status": "Active", "old_case": stale}
            for sku in rng.sample(sorted(catalog), rng.randint(4, 6)):
                catalog[sku]["status"] = "Discontinued"
            skus = sorted(catalog)

            # the sites and their raw rows
            if "day_first" in traps:
                names = rng.sample(US_SITES, rng.randint(4, 5)) + [rng.choice(EU_SITES)]
            else:
                names = rng.sample(US_SITES, rng.randint(5, 6))
            rng.shuffle(names)
            sites = []
            for i, name in enumerate(names):
                day_first = name in EU_SITES
                layout = rng.randrange(3)
                stocked = rng.sample(skus, round(len(skus) * rng.uniform(0.44, 0.6)))
                rows = []
                for sku in stocked:
                    kind = rng.choices(["each", "case", "dozen"], [0.55, 0.3, 0.15])[0]
                    n = rng.randint(1, 40) if kind != "each" else rng.randint(0, 1500)
                    unit = rng.choice({"each": EACH_UNITS, "case": CASE_UNITS, "dozen": DOZEN_UNITS}[kind])
                    day = date(year, month, rng.randint(3, 28))
                    rows.append({"sku": _messy_sku(rng, sku), "item": _messy_name(rng, catalog[sku]["desc"]),
                                 "qty": _messy_qty(rng, n), "unit": unit, "day": day,
                                 "date": _messy_date(rng, day, day_first), "aisle": rng.choice("ABCDEF")})
                recounts = rng.sample(stocked, rng.randint(2, 3)) if "recounts" in traps else []
                for sku in recounts:  # superseded counts, with an earlier date
                    later = next(r for r in rows if sku_key(r["sku"]) == sku)
                    day = later["day"] - timedelta(days=rng.randint(1, min(10, later["day"].day - 1)))
                    n = rng.randint(0, 1200)
                    rows.append({"sku": _messy_sku(rng, sku), "item": _messy_name(rng, catalog[sku]["desc"]),
                                 "qty": n, "unit": rng.choice(EACH_UNITS), "day": day,
                                 "date": _messy_date(rng, day, day_first), "aisle": later["aisle"]})
                rows.sort(key=lambda r: (r["aisle"], rng.random()))
                sites.append({"name": name, "sheet": name + rng.choice(SHEET_SUFFIX), "day_first": day_first,
                              "layout": layout, "rows": rows,
                              "subtotals": set(rng.sample("ABCDEF", rng.randint(2, 3)))})

            truth = consolidate(sites, catalog)
            stocked_disc = [k for s in sites for r in s["rows"] if (k := sku_key(r["sku"]))
                            and catalog[k]["status"] != "Active"]
            ok = bool(stocked_disc)
            ok = ok and all(consolidate(sites, catalog, TRAPS[t][2]) != truth for t in traps)
            typed = {sku_key(r["sku"]): r["item"] for s in sites for r in s["rows"]}
            ok = ok and any(norm_text(typed[k]) != norm_text(catalog[k]["desc"]) for k in truth)
            # a lower level keeps fewer sites, and they must still tell every mistake apart: when no
            # choice of them does (seeds 13 and 25 at level 1), that level draws again; the default
            # takes no part in this test, so its instances are unchanged
            fewer = _fewer_sites({1: 1, 2: 3}[level], sites, catalog) if ok and level < self.levels else sites
            if ok and fewer is not None:
                break
        else:  # pragma: no cover - a few tries always suffice
            raise RuntimeError("could not generate a stock count")
        if level < self.levels:  # the same draws as the default (but where they cannot be cut), then fewer sites
            sites = fewer
            if level == 1:
                sites = [_fewer_skus(sites[0], catalog)]
            names = [s["name"] for s in sites]
            truth = consolidate(sites, catalog)
            skus = sorted({sku_key(r["sku"]) for s in sites for r in s["rows"]})  # the catalog of what they stock

        def site_book() -> Workbook:
            wb = Workbook()
            wb.remove(wb.active)
            for s in sites:
                ws = wb.create_sheet(s["sheet"])
                head, order = LAYOUTS[s["layout"]], LAYOUT_ORDER[s["layout"]]
                ws.append([head[k] for k in order])
                qty_col = "ABCDE"[order.index("qty")]
                aisle, first = None, 2
                blank_after = set(rng.sample(range(len(s["rows"])), 2))
                for i, r in enumerate(s["rows"]):
                    if aisle is not None and r["aisle"] != aisle and aisle in s["subtotals"]:
                        label = [None] * 5
                        label[order.index("item")] = f"Aisle {aisle} subtotal"
                        label[order.index("qty")] = f"=SUM({qty_col}{first}:{qty_col}{ws.max_row})"
                        ws.append(label)
                        first = ws.max_row + 1
                    elif r["aisle"] != aisle:
                        first = ws.max_row + 1
                    aisle = r["aisle"]
                    ws.append([r[k] for k in order])
                    if isinstance(r["date"], datetime):
                        ws.cell(row=ws.max_row, column=order.index("date") + 1).number_format = "yyyy-mm-dd"
                    if i in blank_after:
                        ws.append([])  # a blank line
            return wb

        def catalog_book() -> Workbook:
            wb = Workbook()
            wb.remove(wb.active)
            sheets = [("Items", "case", "status"), ("Items 2023", "old_case", None)]
            if rng.random() < 0.5:
                sheets.reverse()
            for title, case_key, status_key in sheets:
                ws = wb.create_sheet(title)
                ws.append(["SKU", "Description", "Case Qty", "Status"])
                for sku in skus:
                    c = catalog[sku]
                    ws.append([sku, c["desc"], c[case_key], c[status_key] if status_key else "Active"])
            return wb

        def archive_book() -> Workbook:
            wb = Workbook()
            ws = wb.active
            ws.title = "Consolidated"
            ws.append(["SKU", "Description", *names, "Total", "Last Counted"])
            for sku in skus[::3]:
                qty = [rng.randint(0, 800) for _ in names]
                day = f"{year}-{month - 1:02d}-{rng.randint(10, 28):02d}"
                ws.append([sku, catalog[sku]["desc"], *qty, sum(qty), day])
            return wb

        files = Files(lambda: {stock_path: site_book(), catalog_path: catalog_book(), archive_path: archive_book()})
        original = files.bytes[stock_path]  # pin the random choices made while building the workbooks

        site_table = "".join(
            f"| {s['sheet']} | {s['name']} | {'day/month/year' if s['day_first'] else 'month/day/year'} |\n"
            for s in sites)
        readme = (
            "# Monthly stock count: consolidation rules\n\n"
            "Every warehouse enters its count on its own sheet of the month's stock_count workbook. Planning "
            "needs one clean sheet with the whole picture. The site sheets are the signed-off counts: never "
            "edit them, build the clean sheet next to them.\n\n"
            "| Sheet | Column in the clean sheet | Slashed dates are written |\n|---|---|---|\n"
            + site_table +
            "\nRules:\n\n"
            "1. One row per SKU across all sites. A SKU is three letters, a dash and four digits, in upper "
            "case (e.g. VLV-2041); sites type them in lower case, with spaces or without the dash.\n"
            "2. Description: the catalog's description (inventory/catalog.xlsx, sheet Items), not what the "
            "site typed.\n"
            "3. Quantities in eaches. ea / each / pcs are eaches; a dozen (dz, doz) is 12; a case (case, cs) "
            "holds the SKU's Case Qty on the catalog's Items sheet. (The Items 2023 sheet has last year's "
            "pack sizes; don't use it.)\n"
            "4. If a site lists the same SKU more than once, the line with the latest count date is the "
            "recount: use it and ignore the earlier line (don't add them up).\n"
            "5. Lines without a SKU (aisle subtotals, notes, blank lines) are not items.\n"
            "6. Leave out SKUs the catalog marks Discontinued, even if a site still has some.\n"
            "7. A site that does not stock a SKU gets 0 in its column.\n"
            "8. Total is the sum of the site columns. Last Counted is the most recent count date for the "
            "SKU at any site, written YYYY-MM-DD.\n"
            "9. Rows sorted by SKU.\n"
        )
        text_files = {readme_path: readme}
        header = ["SKU", "Description", *names, "Total", "Last Counted"]

        def build(root: Path) -> None:
            files.build(root)
            write_files(root / "workspace", text_files)

        shown = {t: _shown_by(sites, catalog, TRAPS[t][2]) if t in traps else [] for t in TRAPS}
        data = {
            **{TRAPS[t][0]: shown[t] for t in TRAPS},
            "stock": stock_path, "catalog": catalog_path, "readme": readme_path, "archive": archive_path,
            "clean": clean, "header": header, "names": names,
            "sheets": {s["name"]: s["sheet"] for s in sites},
            "day_first": {s["name"]: s["day_first"] for s in sites},
            "truth": {k: {"desc": catalog[k]["desc"], "qty": v["qty"], "total": v["total"],
                          "last": v["last"].isoformat()} for k, v in truth.items()},
            "discontinued": sorted(k for k, v in catalog.items() if v["status"] != "Active"),
        }
        sender = fake.first_name()
        w = phrasing_rng(self.name, seed)
        month_name, sites_text = MONTHS[month - 1], ", ".join(names)
        state = say(w, f"The {month_name} stock count is in: {stock_path} has one sheet per warehouse and, as usual, "
                       "it's a mess. Planning needs it consolidated.",
                    f"Planning needs the {month_name} stock count consolidated. It's in {stock_path}, one sheet per "
                    "warehouse, and as usual it's a mess.",
                    f"The {month_name} stock count has arrived in {stock_path} (one sheet per warehouse) and, as "
                    "usual, it's a mess; Planning needs it consolidated.")
        ask = say(w, f"Could you add a sheet called \"{clean}\" to that workbook following the rules in "
                     "inventory/README.md?",
                  f"Please add a sheet named \"{clean}\" to that workbook, following the rules in inventory/README.md.",
                  f"Can you follow the rules in inventory/README.md and add a sheet called \"{clean}\" to that "
                  "workbook?")
        cols = say(w, f"Columns: SKU, Description, then one column per site ({sites_text}), Total, Last Counted, "
                      "with the header in row 1.",
                   f"Its columns are SKU, Description, one column per site ({sites_text}), then Total and Last "
                   "Counted, with the header in row 1.",
                   f"Header in row 1; the columns are SKU, Description, then a column for each site ({sites_text}), "
                   "Total, Last Counted.")
        archive = say(w, f"Last month's clean sheet is in {archive_path} if you want to see how it came out.",
                      f"If you want to see how last month's came out, its clean sheet is in {archive_path}.",
                      f"For reference, last month's clean sheet is in {archive_path}.")
        leave = in_some_order(w, [
            say(w, "Leave the site sheets exactly as they are (they're signed off).",
                "The site sheets are signed off, so leave them exactly as they are.",
                "Don't change the site sheets at all: they're signed off."),
            say(w, "Don't change the README, the catalog or last month's file.",
                "The README, the catalog and last month's file stay unchanged.",
                "Please leave the README, the catalog and last month's file alone."),
            say(w, "Don't create any other files.", "Please don't create any other files.",
                "No other files, please."),
        ])
        verify = say(w, "When the new sheet is in, please read it back and double-check it against the rules.",
                     "Once the new sheet is in, read it back and check it against the rules.",
                     "After you've added the sheet, please read it back and double-check it against the rules.")
        instruction = (
            " ".join([say(w, "Hi!", "Hello!", "Hi there!"), state, ask, cols, archive]) + "\n\n"
            + " ".join([*leave, verify, say(w, f"Thanks, {sender}", f"Thank you! {sender}", f"Cheers, {sender}")])
        )
        task = Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build,
            oracle=partial(_oracle, data, whole=level == 1),
            criteria=_criteria(data, files, text_files, original), data=data,
        )
        task.perturbations = _perturbations(data, level == 1, sites, catalog, readme)
        return task


def _shown_by(sites: list[dict], catalog: dict[str, dict], mistake: str) -> list[str]:
    """The SKUs whose row ``mistake`` changes: where its trap shows."""
    truth, wrong = consolidate(sites, catalog), consolidate(sites, catalog, mistake)
    return sorted(k for k in truth if wrong.get(k) != truth[k])


def _tells(kept: list[dict], catalog: dict[str, dict]) -> bool:
    """Whether these sites still tell every common mistake apart: a discontinued item in stock, a
    day/month/year date, a stale case size, a recount, a description typed differently."""
    truth = consolidate(kept, catalog)
    ok = any(catalog[key]["status"] != "Active" for s in kept for r in s["rows"] if (key := sku_key(r["sku"])))
    ok = ok and all(consolidate(kept, catalog, flaw) != truth for flaw in ("swap_dates", "old_case", "sum_duplicates"))
    typed = {sku_key(r["sku"]): r["item"] for s in kept for r in s["rows"]}
    return ok and any(norm_text(typed[key]) != norm_text(catalog[key]["desc"]) for key in truth)


def _fewer_sites(k: int, sites: list[dict], catalog: dict[str, dict]) -> list[dict] | None:
    """The first ``k`` sites (in the sheet order) that still tell every common mistake apart (None:
    no ``k`` of them do)."""
    return next((list(kept) for kept in combinations(sites, k) if _tells(list(kept), catalog)), None)


def _fewer_skus(site: dict, catalog: dict[str, dict], at_least: int = 6) -> dict:
    """Level 1's one site cut to the rows of its fewest SKUs that still tell the mistakes apart:
    first one of each trap (a discontinued SKU, a recounted one, a case whose pack size changed,
    a slashed date that reads both ways, a dozen, a description typed otherwise), then the others
    in sheet order. No draws."""
    rows = site["rows"]
    seen = [sku_key(r["sku"]) for r in rows]
    active = [lambda r, k: seen.count(k) > 1,  # (a trap on a discontinued SKU shows nothing)
              lambda r, k: r["unit"] in CASE_UNITS and catalog[k]["old_case"] != catalog[k]["case"],
              lambda r, k: isinstance(r["date"], str) and "/" in r["date"] and r["day"].day <= 12,
              lambda r, k: r["unit"] in DOZEN_UNITS, lambda r, k: norm_text(r["item"]) != norm_text(catalog[k]["desc"])]
    traps = [lambda r, k: catalog[k]["status"] != "Active",
             *(lambda r, k, t=t: catalog[k]["status"] == "Active" and t(r, k) for t in active)]
    first = list(dict.fromkeys(next((k for r, k in zip(rows, seen) if trap(r, k)), None) for trap in traps))
    order = [k for k in first if k] + [k for k in dict.fromkeys(seen) if k not in first]
    for n in range(at_least, len(order) + 1):
        kept = set(order[:n])
        cut = dict(site, rows=[r for r, k in zip(rows, seen) if k in kept])
        if _tells([cut], catalog):
            return cut
    return site


# -- grading ---------------------------------------------------------------------------------


def _cells(wb, title: str) -> dict | None:
    ws = wb[title] if title in wb.sheetnames else None
    if ws is None:
        return None
    return {k: c.value for k, c in ws._cells.items() if c.value is not None}


def _criteria(d: dict, files: Files, text_files: dict[str, str], original: bytes) -> list[Criterion]:
    stock, clean, header, names, truth = d["stock"], d["clean"], d["header"], d["names"], d["truth"]
    width = len(header)
    orig_cells: dict[str, dict] = {}

    def table(world):
        t = read_table(world.file(stock), clean)
        if t is None:
            return None, f"{stock} has no sheet {clean!r}"
        head, rows = t
        return (head, [list(r) + [None] * (width - len(r)) for r in rows]), ""

    def by_sku(world):
        t, why = table(world)
        if t is None:
            return None, why
        out: dict[str, list] = {}
        for r in t[1]:
            k = sku_key(r[0])
            if k in truth:
                out.setdefault(k, r)
        if len(out) < len(truth) / 2:
            return None, f"only {len(out)} of {len(truth)} SKUs found"
        return out, ""

    def clean_sheet(world, traj):
        t, why = table(world)
        if t is None:
            return False, why
        head = [norm_text(v) for v in t[0][:width]]
        return head == [norm_text(h) for h in header], f"header {t[0][:width]!r}, expected {header!r}"

    def all_skus(world, traj):
        t, why = table(world)
        if t is None:
            return False, why
        keys = [sku_key(r[0]) for r in t[1]]
        missing = sorted(set(truth) - set(keys))
        twice = sorted({k for k in keys if k in truth and keys.count(k) > 1})  # pasting the site rows is no list
        return not missing and not twice, f"missing: {missing[:8]}; listed more than once: {twice[:8]}"

    def one_row_per_sku(world, traj):
        t, why = table(world)
        if t is None:
            return False, why
        keys = [sku_key(r[0]) for r in t[1]]
        no_sku = [i + 2 for i, k in enumerate(keys) if k is None]
        twice = sorted({k for k in keys if k and keys.count(k) > 1})
        ok = bool(keys) and not no_sku and not twice
        return ok, f"rows without a SKU (blank, subtotal): {no_sku[:6]}; repeated: {twice[:6]}"

    def discontinued(world, traj):
        rows, why = by_sku(world)
        if rows is None:
            return False, why
        t, _ = table(world)
        found = sorted({k for r in t[1] if (k := sku_key(r[0])) in d["discontinued"]})
        return not found, f"discontinued SKUs listed: {found}"

    def field(check_one, what: str):
        def check(world, traj):
            rows, why = by_sku(world)
            if rows is None:
                return False, why
            bad = [f"{k}: {rows[k]!r}" for k, t in truth.items() if k in rows and not check_one(rows[k], t)]
            return not bad, f"{what} wrong: " + "; ".join(bad[:4])
        return check

    def sku_ok(r, t) -> bool:
        return isinstance(r[0], str) and r[0] == sku_key(r[0])

    def desc_ok(r, t) -> bool:
        return norm_text(r[1]) == norm_text(t["desc"])

    def qty_ok(r, t) -> bool:
        for i, site in enumerate(names):
            v = r[2 + i]
            got = 0.0 if blank(v) else to_number(v)
            if got is None or abs(got - t["qty"][site]) > 1e-6:
                return False
        return True

    def total_ok(r, t) -> bool:
        got = to_number(r[2 + len(names)])
        return got is not None and abs(got - t["total"]) <= 1e-6

    def date_ok(r, t) -> bool:
        v = r[3 + len(names)]
        if isinstance(v, (datetime, date)):
            return parse_day(v, False).isoformat() == t["last"]
        return isinstance(v, str) and v.strip() == t["last"]

    def order(world, traj):
        rows, why = by_sku(world)
        if rows is None:
            return False, why
        t, _ = table(world)
        seen: list[str] = []
        for r in t[1]:
            k = sku_key(r[0])
            if k and k not in seen:
                seen.append(k)
        return seen == sorted(seen), "rows are not sorted by SKU"

    def sites_intact(world, traj):
        if not orig_cells:
            wb = openpyxl.load_workbook(io.BytesIO(original))
            orig_cells.update({t: _cells(wb, t) for t in d["sheets"].values()})
        p = world.file(stock)
        if not p.is_file():
            return False, f"{stock} is gone"
        wb = read_workbook(p)
        changed = [t for t, cells in orig_cells.items() if _cells(wb, t) != cells]
        return not changed, f"site sheets changed or gone: {changed}"

    def verified(world, traj):
        writes = [i for i, c in enumerate(traj.tool_calls) if not c.is_error and c.app == "sheets"
                  and c.tool not in ("list_sheets", "read_range") and isinstance(c.arguments, dict)
                  and norm_path(c.arguments.get("path")) == stock]
        if not writes:
            return False, "the clean sheet was never written"
        later = [c for c in traj.tool_calls[writes[-1] + 1:] if not c.is_error and c.name == "sheets__read_range"
                 and isinstance(c.arguments, dict) and norm_path(c.arguments.get("path")) == stock
                 and norm_text(c.arguments.get("sheet")) == norm_text(clean)]
        return bool(later), "" if later else "the clean sheet was not read back after its last edit"

    def shown(key: str, check_one, what: str):
        """``check_one`` on the SKUs where a trap shows (``d[key]``)."""
        def check(world, traj):
            rows, why = by_sku(world)
            if rows is None:
                return False, why
            bad = [f"{k}: {rows.get(k)!r}" for k in d[key] if k not in rows or not check_one(rows[k], truth[k])]
            return not bad, f"{what} wrong: " + "; ".join(bad[:4])
        return check

    optional = [Criterion(cid, description, "final_state",
                          shown(key, date_ok if key == "day_first_dates" else qty_ok,
                                "date" if key == "day_first_dates" else "quantity"))
                for key, cid, _, description in TRAPS.values() if d[key]]
    return [
        Criterion("clean_sheet", f"{stock} has a sheet {clean!r} with header {', '.join(header)}",
                  "final_state", clean_sheet, requires=("quantities",)),
        Criterion("all_skus", "every active SKU any site stocks has a row, once", "final_state", all_skus,
                  weight=2.0),
        # list properties a one-row sheet also has: they pay once the list is complete
        Criterion("one_row_per_sku", "each SKU appears once; no subtotal, note or blank rows", "final_state",
                  one_row_per_sku, requires=("all_skus",)),
        Criterion("discontinued_dropped", "no SKU the catalog marks Discontinued is listed", "final_state",
                  discontinued, requires=("all_skus",)),
        Criterion("sku_format", "SKUs written as AAA-0000 in upper case, no spaces", "final_state",
                  field(sku_ok, "SKU"), requires=("all_skus",)),
        Criterion("descriptions", "descriptions are the catalog's (Items sheet)", "final_state",
                  field(desc_ok, "description")),
        Criterion("quantities", "per-site quantities in eaches (current case sizes, recounts replace "
                  "superseded lines, 0 where not stocked)", "final_state", field(qty_ok, "quantity"), weight=2.0),
        Criterion("totals", "Total is the sum of the site columns", "final_state", field(total_ok, "total")),
        Criterion("last_counted", "Last Counted is the latest count date as YYYY-MM-DD (day/month/year for the "
                  "European site)", "final_state", field(date_ok, "date")),
        *optional,
        Criterion("order", "rows sorted by SKU", "final_state", order, requires=("all_skus",)),
        Criterion("verified", "the clean sheet was read back after its last edit", "process", verified,
                  requires=("quantities",)),
        Criterion("site_sheets_intact", "every site sheet holds exactly what it held", "final_state",
                  sites_intact, guard=True),
        files_kit.not_written([d["readme"], d["catalog"], d["archive"]], id="references_untouched",
                              description="no tool call wrote to the README, the catalog or the archive"),
        files_kit.only_created(files, text_files, nothing_deleted=True, id="no_extra_files",
                               description="no new files; README, catalog and archive still there"),
    ]


# -- reference solution ----------------------------------------------------------------------


def _table(d: dict, result: dict[str, dict], catalog: dict[str, dict]) -> list[list]:
    """The clean sheet: the header, then a row per SKU of ``result`` (``consolidate``'s) in its order."""
    names = d["names"]
    last_site = "ABCDEFGHIJ"[1 + len(names)]
    return [list(d["header"])] + [[k, catalog[k]["desc"], *(item["qty"][s] for s in names),
                                   f"=SUM(C{i}:{last_site}{i})", item["last"].isoformat()]
                                  for i, (k, item) in enumerate(result.items(), start=2)]


def _oracle(d: dict, whole: bool = False):
    """Read the README and the catalog, page through each site sheet, apply the rules to what was
    read, add the clean sheet, read it back. ``whole`` (one site) skips the survey and reads each
    sheet in one call."""
    stock, clean, names = d["stock"], d["clean"], d["names"]

    def spans(n: int):  # row ranges to read: the whole sheet at once, or pages
        return [None] if whole else [(first, min(first + CHUNK - 1, n)) for first in range(1, n + 1, CHUNK)]

    if not whole:
        yield ToolCall("files__list_dir", {"path": "inventory", "recursive": True},
                       "See what's in the inventory folder.")
    readme = yield ToolCall("files__read_file", {"path": d["readme"]}, "Read the consolidation rules.")
    day_first = {name: "day/month/year" in line for line in readme.splitlines() for name in names
                 if line.startswith("|") and f"| {name} |" in line}

    n, size = 0, {}
    if not whole:
        yield ToolCall("sheets__list_sheets", {"path": d["archive"]}, "Open last month's consolidated workbook.")
        yield ToolCall("sheets__read_range", {"path": d["archive"], "sheet": "Consolidated", "range": "A1:J4"},
                       "See how last month's clean sheet looked.")
        info = parse_json((yield ToolCall("sheets__list_sheets", {"path": d["catalog"]},
                                          "Find the current catalog sheet.")))
        n = next(s["rows"] for s in info if s["name"] == "Items")
    catalog: dict[str, dict] = {}
    for span in spans(n):
        where = {} if span is None else {"range": f"A{span[0]}:D{span[1]}"}
        page = parse_json((yield ToolCall("sheets__read_range", {"path": d["catalog"], "sheet": "Items", **where},
                                          "Read the catalog." if span is None
                                          else f"Read catalog rows {span[0]}-{span[1]}.")))
        for r in page["rows"]:
            sku, desc, case, status = r["values"]
            if sku and sku != "SKU":
                catalog[sku] = {"desc": desc, "case": int(case), "status": status}

    if not whole:
        info = parse_json((yield ToolCall("sheets__list_sheets", {"path": stock}, "List the site sheets.")))
        size = {s["name"]: (s["rows"], s["columns"]) for s in info}
    sites = []
    for name in names:
        sheet = d["sheets"][name]
        rows_n, cols = size.get(sheet, (0, 0))
        raw: list[list] = []
        for span in spans(rows_n):
            where = {} if span is None else {"range": f"A{span[0]}:{'ABCDEFGH'[cols - 1]}{span[1]}"}
            page = parse_json((yield ToolCall(
                "sheets__read_range", {"path": stock, "sheet": sheet, **where},
                f"Read {sheet}." if span is None else f"Read {sheet}, rows {span[0]}-{span[1]}.")))
            raw.extend(r["values"] for r in page["rows"])
        head = [norm_text(h) for h in raw[0]]
        col = {"sku": next(i for i, h in enumerate(head) if h in ("sku", "item code")),
               "qty": next(i for i, h in enumerate(head) if h in ("qty", "count")),
               "unit": next(i for i, h in enumerate(head) if h in ("unit", "uom")),
               "date": next(i for i, h in enumerate(head) if "count" in h and h != "count"),
               "item": next(i for i, h in enumerate(head) if h in ("item", "description"))}
        rows = [{k: r[i] for k, i in col.items()} for r in raw[1:] if not blank(r[col["sku"]])]
        sites.append({"name": name, "day_first": day_first[name], "rows": rows})

    result = consolidate(sites, catalog)
    table = _table(d, result, catalog)
    yield ToolCall("sheets__add_sheet", {"path": stock, "name": clean}, f"Add the {clean} sheet.")
    yield ToolCall("sheets__write_rows", {"path": stock, "sheet": clean, "start_cell": "A1", "rows": table},
                   f"Write the header and {len(table) - 1} clean rows.")
    end_col = "ABCDEFGHIJ"[len(names) + 3]
    for span in spans(len(table)):
        where = {} if span is None else {"range": f"A{span[0]}:{end_col}{span[1]}"}
        yield ToolCall("sheets__read_range", {"path": stock, "sheet": clean, **where},
                       "Read the clean sheet back to check it.")

    dropped = sorted({k for s in sites for r in s["rows"] if (k := sku_key(r["sku"])) and k not in result})
    return (f"Added \"{clean}\" to {stock}: {len(result)} SKUs across {len(names)} sites"
            f" (left out discontinued: {', '.join(dropped) or 'none'}).")


def _perturbations(d: dict, whole: bool, sites: list[dict], catalog: dict[str, dict], readme: str) -> dict:
    """One flawed oracle per criterion, as edits of the clean sheet's one write: a rule broken in
    the consolidation (``consolidate``'s mistakes on the generated sites), a SKU, description or
    Total written wrong, a row missing or added, the order; or no read-back, a stray write."""
    solve = partial(_oracle, d, whole=whole)
    stock, clean, names = d["stock"], d["clean"], d["names"]
    write = perturb.on("sheets__write_rows", path=stock, sheet=clean)
    truth = consolidate(sites, catalog)

    def rows_as(edit):
        """The clean sheet as ``edit(rows)`` leaves it (a copy)."""
        return perturb.change(solve, write, lambda a: {**a, "rows": edit([list(r) for r in a["rows"]])})

    def mistaken(mistake):
        return perturb.change(solve, write, rows=_table(d, consolidate(sites, catalog, mistake), catalog))

    def total(i):  # the Total formula stops a site short (with one site: no sum at all)
        return f"=SUM(C{i}:{'ABCDEFGHIJ'[len(names)]}{i})" if len(names) > 1 else 0

    typed = {sku_key(r["sku"]): r["item"] for s in sites for r in s["rows"]}
    misnamed = next(k for k in truth if norm_text(typed[k]) != norm_text(catalog[k]["desc"]))
    return {
        "clean_sheet": rows_as(lambda rows: [[*rows[0][:-1], "Last Count"], *rows[1:]]),
        "all_skus": rows_as(lambda rows: rows[:-1]),
        "one_row_per_sku": rows_as(lambda rows: rows + [[None, "Aisle A subtotal", *[None] * (len(names) + 2)]]),
        "discontinued_dropped": mistaken("keep_discontinued"),
        "sku_format": rows_as(lambda rows: [rows[0], [rows[1][0].replace("-", "").lower(), *rows[1][1:]], *rows[2:]]),
        "descriptions": rows_as(lambda rows: [[r[0], typed[misnamed], *r[2:]] if r[0] == misnamed else r
                                              for r in rows]),
        **{cid: mistaken(mistake) for key, cid, mistake, _ in TRAPS.values() if d[key]},
        "quantities": mistaken(next(mistake for key, _, mistake, _ in TRAPS.values() if key != "day_first_dates"
                                    and d[key])),
        "totals": rows_as(lambda rows: [rows[0]] + [[*r[:-2], total(i), r[-1]]
                                                    for i, r in enumerate(rows[1:], start=2)]),
        "last_counted": mistaken("swap_dates") if d["day_first_dates"] else rows_as(
            lambda rows: [rows[0], [*rows[1][:-1], "{1}/{2}/{0}".format(*rows[1][-1].split("-"))], *rows[2:]]),
        "order": perturb.change(solve, write, rows=_table(
            d, {k: truth[k] for k in sorted(truth, key=lambda k: catalog[k]["desc"])}, catalog)),
        "verified": perturb.drop(solve, perturb.on("sheets__read_range", path=stock, sheet=clean), count=None),
        "site_sheets_intact": perturb.insert(solve, ToolCall(
            "sheets__write_cells", {"path": stock, "sheet": d["sheets"][names[0]], "cells": {"G1": "in clean sheet"}},
            "Note on the site sheet that it has been consolidated."),
            before=perturb.on("sheets__add_sheet", path=stock)),
        "references_untouched": perturb.insert(solve, ToolCall(
            "files__write_file", {"path": d["readme"], "content": readme}, "Save the README (unchanged).")),
        "no_extra_files": perturb.insert(solve, ToolCall(
            "files__copy", {"src": stock, "dst": stock.replace(".xlsx", "_backup.xlsx")},
            "Keep a backup of the workbook.")),
    }
