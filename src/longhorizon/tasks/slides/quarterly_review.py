"""Slide decks: a quarterly business review deck built from a results workbook and regional notes.

The workbook has one sheet per sales region with six months of figures (last quarter's three
are there too), a non-region "Corporate" sheet, and hand-made total rows on some sheets that
also sum last quarter. Each region's update note names its lead (some leads handed over during
the quarter) and marks one highlight as the headline. The deck needs a title slide, one slide
per region ordered by revenue with revenue, attainment, new customers and the headline, the
presenter in the speaker notes, and a summary slide with the totals and the top performer by
attainment. Then every slide is checked against the numbers.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from functools import partial

from openpyxl import Workbook

from longhorizon.apps.docs.state import norm
from longhorizon.apps.sheets.state import workbook_bytes
from longhorizon.apps.slides.state import build_presentation, presentation_bytes, read_deck
from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import parse_json, rng_and_faker
from longhorizon.tasks.documents import Sources, find_numbers, last_write_index, mentions, person
from longhorizon.tasks.kit import files as files_kit
from longhorizon.tasks.kit import perturb
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register

REGIONS = [
    "North America", "Latin America", "UK & Ireland", "DACH", "Nordics", "Southern Europe", "Middle East",
    "Africa", "India", "Southeast Asia", "Japan", "Australia & NZ",
]
HIGHLIGHTS = [
    "Signed {c} as our largest new logo this year", "Renewed the {c} contract for three more years",
    "Opened a partner channel with {c}", "Launched the self-serve tier with {c} as the first customer",
    "Closed the {c} expansion two months early", "Won the {c} tender against two incumbents",
    "Migrated {c} to the new platform without downtime", "Hired a dedicated team for the {c} account",
    "Completed the {c} pilot with a full rollout agreed", "Recovered the {c} account after last year's churn",
]
MINOR = [
    "Pipeline coverage is healthy for next quarter.", "Two account executives joined the team.",
    "Quarterly customer council held with good attendance.", "Support backlog cleared by mid-quarter.",
    "Pricing review with finance is under way.", "Trade show leads are being followed up.",
]
PCT = re.compile(r"(\d+(?:\.\d+)?)\s*%")
MONTH_NAMES = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
               "October", "November", "December"]


def _money(x: float) -> str:
    return f"${x:,.0f}"


def _pct(revenue: float, target: float) -> int:
    return int(revenue * 100 / target + 0.5)


def close_money(got: float, want: float) -> bool:
    """A written amount is right when within half a percent (so $1.23M for $1,234,567 is fine)."""
    return abs(got - want) <= max(1.0, 0.005 * abs(want))


def _bullet(bullets: list[str], *labels: str) -> str | None:
    for b in bullets:
        if any(lab in norm(b) for lab in labels):
            return b
    return None


@register
class QuarterlyReviewDeck(TaskFamily):
    name = "quarterly_review_deck"
    category = "slide decks"
    apps = ("slides", "sheets", "files")
    description = (
        "Build a quarterly business review deck: a slide per region (ordered by revenue) with figures for the "
        "quarter only, the headline from the regional notes, the current lead as presenter in the notes, and a "
        "summary slide; then check every slide."
    )

    levels = 3
    """1: one region (its lead handed over, its sheet has a Total row), a title and the region's
    slide, both checked (only the tools for that: no listing of the workspace, the workbook or
    last quarter's deck); 2: three regions in revenue order and the summary slide with the top
    performer; 3 (default): seven to nine regions. Every level has last quarter's months and
    the Corporate sheet in the workbook."""
    toolsets = {1: ("files__read_file", "sheets__read_range", "slides__add_slide", "slides__create_deck",
                    "slides__read_slide")}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        year, q = 2026, rng.randint(2, 4)
        company = fake.company().split(",")[0].split(" and ")[0]
        months = [dt.date(year, 3 * (q - 1) + i, 1) for i in range(-2, 4)]  # last quarter, then this one
        this_q = months[3:]
        regions = rng.sample(REGIONS, rng.randint(7, 9))
        figures: dict[str, dict] = {}
        rows: dict[str, list[list]] = {}
        for r in regions:
            scale = rng.choice([180_000, 300_000, 450_000, 700_000, 1_100_000])
            sheet = []
            for m in months:
                target = round(scale * rng.uniform(0.9, 1.2), -3)
                revenue = round(target * rng.uniform(0.78, 1.25), 2)
                sheet.append([m.strftime("%Y-%m"), revenue, target, rng.randint(2, 40)])
            rows[r] = sheet
            rev = round(sum(x[1] for x in sheet[3:]), 2)
            tgt = sum(x[2] for x in sheet[3:])
            figures[r] = {"revenue": rev, "target": tgt, "pct": _pct(rev, tgt), "new": sum(x[3] for x in sheet[3:])}
        # orders and the top performer must be unambiguous
        by_rev = sorted(regions, key=lambda r: -figures[r]["revenue"])
        pcts = sorted((figures[r]["revenue"] / figures[r]["target"], r) for r in regions)
        if pcts[-1][0] - pcts[-2][0] < 0.01:
            top = pcts[-1][1]
            for x in rows[top][3:]:
                x[1] = round(x[1] * 1.03, 2)
            figures[top]["revenue"] = round(sum(x[1] for x in rows[top][3:]), 2)
            figures[top]["pct"] = _pct(figures[top]["revenue"], figures[top]["target"])
            by_rev = sorted(regions, key=lambda r: -figures[r]["revenue"])
        top = max(regions, key=lambda r: figures[r]["revenue"] / figures[r]["target"])
        total_rev = round(sum(f["revenue"] for f in figures.values()), 2)
        total_tgt = sum(f["target"] for f in figures.values())
        total_pct = _pct(total_rev, total_tgt)
        total_rows = set(rng.sample(regions, 2))

        # -- notes: lead (with hand-overs), highlights, headline ----------------------------------
        notes: dict[str, str] = {}
        leads: dict[str, str] = {}
        former: dict[str, str] = {}
        headline: dict[str, str] = {}
        minor: dict[str, list[str]] = {}
        handover = set(rng.sample(regions, 2))
        picks = rng.sample(HIGHLIGHTS, len(regions))
        for r, h in zip(regions, picks):
            lead = person(fake)
            leads[r] = lead
            head = h.format(c=fake.company().split(",")[0])
            headline[r] = head
            others = rng.sample(MINOR, 2)
            minor[r] = others
            lines = [f"# {r} {chr(8212)} Q{q} {year} update", ""]
            if r in handover:
                old = person(fake)
                former[r] = old
                when = MONTH_NAMES[this_q[1].month - 1]
                lines += [f"Regional lead: {old}", "",
                          f"Note: {old} moved to the Partnerships team; {lead} has led {r} since {when} "
                          f"and will present it.", ""]
            else:
                lines += [f"Regional lead: {lead}", ""]
            hl = [f"- {others[0]}", f"- Headline: {head}.", f"- {others[1]}"]
            rng.shuffle(hl)
            lines += ["## Highlights"] + hl + [""]
            lines += ["## Figures", f"See the {r} sheet in the results workbook.", ""]
            notes[r] = "\n".join(lines)
        if level < self.levels:  # the same draws as the default, then fewer regions
            regions = _fewer_regions({1: 1, 2: 3}[level], regions, figures, handover, total_rows)
            if not total_rows & set(regions):  # a Total row to step around at every level
                total_rows = {regions[0]}
            by_rev = sorted(regions, key=lambda r: -figures[r]["revenue"])
            top = max(regions, key=lambda r: figures[r]["revenue"] / figures[r]["target"])
            total_rev = round(sum(figures[r]["revenue"] for r in regions), 2)
            total_tgt = sum(figures[r]["target"] for r in regions)
            total_pct = _pct(total_rev, total_tgt)
            figures = {r: figures[r] for r in regions}
        summary = level > 1

        # -- files ---------------------------------------------------------------------------------
        workbook = f"finance/Q{q}_{year}_regional_results.xlsx"
        prev_deck = f"decks/Q{q - 1}_{year}_business_review.pptx"
        deck = f"decks/Q{q}_{year}_business_review.pptx"
        note_path = {r: f"notes/Q{q}_{year}/{re.sub(r'[^a-z0-9]+', '_', r.lower()).strip('_')}.md" for r in regions}
        title = f"Q{q} {year} Business Review"

        def make_workbook() -> Workbook:
            wb = Workbook()
            wb.remove(wb.active)
            for r in sorted(regions):
                ws = wb.create_sheet(r)
                ws.append(["Month", "Revenue", "Target", "New customers"])
                for x in rows[r]:
                    ws.append(x)
                if r in total_rows:
                    ws.append([])
                    ws.append(["Total", "=SUM(B2:B7)", "=SUM(C2:C7)", "=SUM(D2:D7)"])
            ws = wb.create_sheet("Corporate")
            ws.append(["Month", "Revenue", "Target", "New customers"])
            for m in months:
                ws.append([m.strftime("%Y-%m"), round(rng.uniform(-40_000, 60_000), 2), 0, 0])
            return wb

        prev_figs = {r: (round(sum(x[1] for x in rows[r][:3]), 2), sum(x[2] for x in rows[r][:3])) for r in regions}
        prev_order = sorted(regions, key=lambda r: -prev_figs[r][0])
        prev_slides = [{"title": f"Q{q - 1} {year} Business Review", "bullets": [company], "layout": "title"}]
        for r in prev_order:
            rev, tgt = prev_figs[r]
            prev_slides.append({"title": r, "bullets": [f"Revenue: {_money(rev)} ({_pct(rev, tgt)}% of target)",
                                                        f"New customers: {sum(x[3] for x in rows[r][:3])}"],
                                "notes": f"Presenter: {former.get(r, leads[r])}"})
        prev_slides.append({"title": "Summary", "bullets": [
            f"Total revenue: {_money(sum(v[0] for v in prev_figs.values()))}"]})

        def make() -> dict[str, bytes]:
            files = {workbook: workbook_bytes(make_workbook()),
                     prev_deck: presentation_bytes(build_presentation(prev_slides))}
            files.update({note_path[r]: notes[r].encode() for r in regions})
            return files

        sources = Sources(make)
        requester = fake.first_name()
        w = phrasing_rng(self.name, seed)
        ask = say(w, f"Hi! Could you build the Q{q} {year} business review deck for Thursday?",
                  f"Hello! I need the Q{q} {year} business review deck for Thursday: could you build it?",
                  f"Hi, can you put together the Q{q} {year} business review deck? It's for Thursday.",
                  f"Would you build Thursday's Q{q} {year} business review deck for me?")
        save = say(w, f"Save it as {deck}, laid out like last quarter's ({prev_deck}).",
                   f"Lay it out like last quarter's ({prev_deck}) and save it as {deck}.",
                   f"It should be saved as {deck} and follow the layout of last quarter's deck, {prev_deck}.")
        slide1 = say(w, f"- Slide 1: title slide \"{title}\" with \"{company}\" as the subtitle.\n",
                     f"- Slide 1: a title slide, \"{title}\", subtitle \"{company}\".\n",
                     f"- Slide 1 is the title slide: \"{title}\", with \"{company}\" as its subtitle.\n")
        regions_ = say(w, f"- Then one slide per sales region, biggest Q{q} revenue first, titled with the region's "
                          f"name.",
                       f"- After that, a slide for each sales region, titled with the region's name, ordered by "
                       f"Q{q} revenue (biggest first).",
                       f"- Next, one slide per sales region, the region's name as its title, in order of Q{q} "
                       f"revenue, biggest first.")
        bullets = say(w, f" Bullets: \"Revenue: $1,234,567 (104% of target)\", \"New customers: 42\", and the "
                         f"headline highlight from the region's update in notes/Q{q}_{year}/.",
                      f" Its bullets: \"Revenue: $1,234,567 (104% of target)\", \"New customers: 42\", plus the "
                      f"headline highlight from that region's update in notes/Q{q}_{year}/.",
                      f" On each, the bullets \"Revenue: $1,234,567 (104% of target)\" and \"New customers: 42\", "
                      f"then the headline highlight taken from the region's update in notes/Q{q}_{year}/.")
        speaker = say(w, " Speaker notes: \"Presenter: <name>\", the person leading the region now.\n",
                      " Speaker notes: \"Presenter: <name>\", naming whoever leads the region now.\n",
                      " In the speaker notes, \"Presenter: <name>\" with the region's current lead.\n")
        last = say(w, "- Last slide: \"Summary\" with the total revenue (and % of target) across the regions, and "
                      "the top performer, meaning the region with the highest % of target.\n",
                   "- Last slide: \"Summary\", giving the total revenue across the regions (and its % of target) "
                   "and the top performer, i.e. the region with the highest % of target.\n",
                   "- Finish with a \"Summary\" slide: total revenue across the regions with its % of target, and "
                   "the top performer (the region with the highest % of target).\n") if summary else ""
        numbers = say(w, f"Numbers come from {workbook}: one sheet per region.",
                      f"The numbers are in {workbook}, one sheet per region.",
                      f"Take the numbers from {workbook}, which has one sheet per region.")
        quarter_only = say(w, f"Use only the Q{q} months, not the previous quarter, and careful with the Total rows some "
                        f"people added.",
                     f"Only the Q{q} months count (not the previous quarter), and watch out for the Total rows "
                     f"some people added.",
                     f"Leave out the previous quarter's months and use just Q{q}'s; careful too with the Total rows "
                     f"some people added.")
        corporate = say(w, "The Corporate sheet isn't a region.", "The Corporate sheet is not a region.",
                        "Corporate has a sheet but isn't a region.")
        check = say(w, "Once it's built, please check each slide against the figures.",
                    "When the deck is built, check each slide against the figures.",
                    "Please check each slide against the figures once it's done.")
        keep = say(w, "Don't change the workbook, the notes or last quarter's deck.",
                   "The workbook, the notes and last quarter's deck stay unchanged.",
                   "Leave the workbook, the notes and last quarter's deck as they are.")
        if level == 1:  # (last quarter's deck is there, but one region needs no layout beyond the request)
            save = f"Save it as {deck}."
        instruction = (
            f"{ask} {save}\n\n{slide1}{regions_}{bullets}{speaker}{last}\n"
            + " ".join([numbers, *in_some_order(w, [quarter_only, corporate]), check, keep])
            + f"\n\n{say(w, 'Thanks,', 'Thank you,', 'Cheers,')} {requester}"
        )
        data = {
            "deck": deck, "title": title, "company": company, "regions": by_rev, "figures": figures,
            "leads": leads, "former": former, "headline": headline, "minor": minor, "top": top, "total_revenue": total_rev,
            "total_pct": total_pct, "workbook": workbook, "prev_deck": prev_deck, "notes": note_path,
            "months": [m.strftime("%Y-%m") for m in this_q],
        }
        brief = level == 1  # straight to the two files, no survey of the workspace or last quarter's deck
        task = Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=sources.build,
            oracle=partial(_oracle, data, brief=brief), criteria=_criteria(data, sources, summary), data=data,
        )
        if not summary:  # one region: no order to get wrong, no summary slide
            task.criteria = [c for c in task.criteria
                             if c.id not in ("region_order", "summary_totals", "top_performer")]
        flawed = _perturbations(data, brief, prev_slides[0]["title"])
        task.perturbations = {c.id: flawed[c.id] for c in task.criteria}
        return task


def _fewer_regions(k: int, regions: list[str], figures: dict, handover: set[str], total_rows: set[str]) -> list[str]:
    """``k`` of the regions, those whose lead handed over or whose sheet has a Total row first,
    chosen so that the top performer leads the next by a clear point of attainment."""
    ranked = sorted(regions, key=lambda r: (r not in handover, r not in total_rows, regions.index(r)))
    for kept in itertools.combinations(ranked, k):
        pcts = sorted(figures[r]["revenue"] / figures[r]["target"] for r in kept)
        if k == 1 or pcts[-1] - pcts[-2] >= 0.01:
            return [r for r in regions if r in kept]
    raise RuntimeError("no regions to keep")  # pragma: no cover - the default's top leads by a point


# -- grading -----------------------------------------------------------------------------------------


def _criteria(d: dict, sources: Sources, has_summary: bool = True) -> list[Criterion]:
    deck, regions, figs = d["deck"], d["regions"], d["figures"]

    def slides(world):
        return read_deck(world.file(deck))

    def region_slides(world) -> dict[str, dict]:
        out = {}
        for s in slides(world):
            for r in regions:
                if norm(s["title"]) == norm(r) and r not in out:
                    out[r] = s
        return out

    def title_slide(world, traj):
        s = slides(world)
        if not s:
            return False, "the deck has no slides"
        first = s[0]
        ok = norm(first["title"]) == norm(d["title"]) and any(mentions(b, d["company"]) for b in first["bullets"])
        return ok, f"first slide {first['title']!r} / {first['bullets']}"

    def one_slide_per_region(world, traj):
        s = slides(world)
        titles = [norm(x["title"]) for x in s[1:-1 if has_summary else None]]
        ok = sorted(titles) == sorted(norm(r) for r in regions) and len(s) == len(regions) + 1 + has_summary
        return ok, f"titles between the first and last slide: {[x['title'] for x in s[1:-1]]}"

    def region_order(world, traj):
        got = [r for s in slides(world) for r in regions if norm(s["title"]) == norm(r)]
        return got == regions, f"order {got}, expected {regions}"

    def revenue(world, traj):
        bad = []
        for r, s in region_slides(world).items():
            b = _bullet(s["bullets"], "revenue")
            nums = find_numbers(PCT.sub(" ", b)) if b else []
            if not nums or not close_money(nums[0], figs[r]["revenue"]):
                bad.append(f"{r}: {b!r}")
        missing = [r for r in regions if r not in region_slides(world)]
        return not bad and not missing, f"wrong: {bad}; no slide: {missing}"

    def attainment(world, traj):
        bad = []
        for r in regions:
            s = region_slides(world).get(r)
            lines = [x for x in (s["bullets"] if s else []) if any(w in norm(x) for w in ("revenue", "target", "attain"))]
            p = [float(x) for line in lines for x in PCT.findall(line)]
            if not p or abs(p[0] - figs[r]["revenue"] * 100 / figs[r]["target"]) > 0.51:
                bad.append(f"{r}: {lines!r}")
        return not bad, "; ".join(bad)

    def new_customers(world, traj):
        bad = []
        for r in regions:
            s = region_slides(world).get(r)
            b = _bullet(s["bullets"], "new customer") if s else None
            nums = find_numbers(b) if b else []
            if not nums or nums[0] != figs[r]["new"]:
                bad.append(f"{r}: {b!r} (expected {figs[r]['new']})")
        return not bad, "; ".join(bad)

    def headlines(world, traj):
        from longhorizon.tasks.documents.status_report import similar

        bad = []
        for r in regions:
            s = region_slides(world).get(r)
            if not s or not any(similar(b, d["headline"][r]) for b in s["bullets"]):
                bad.append(r)
            elif any(similar(b, x) for b in s["bullets"]  # the headline, not every highlight seen
                     for x in d["minor"][r] + [d["headline"][o] for o in regions if o != r]):
                bad.append(f"{r} (other highlights too)")
        return not bad, f"headline missing or not alone on: {bad}"

    def presenters(world, traj):
        bad = []
        for r in regions:
            s = region_slides(world).get(r)
            text = s["notes"] if s else ""
            old = d["former"].get(r)
            if not mentions(text, d["leads"][r]) or (old and mentions(text, old)):
                bad.append(f"{r}: {text!r}")
        return not bad, "; ".join(bad)

    def summary(world, traj):
        s = slides(world)
        if not s or norm(s[-1]["title"]) != "summary":
            return False, "the last slide is not titled Summary"
        text = " ".join(s[-1]["bullets"])
        nums = find_numbers(PCT.sub(" ", text))
        pcts = [float(x) for x in PCT.findall(text)]
        ok_rev = any(close_money(n, d["total_revenue"]) for n in nums)
        ok_pct = any(abs(p - d["total_revenue"] * 100 / sum(f["target"] for f in figs.values())) <= 0.51 for p in pcts)
        return ok_rev and ok_pct, f"summary bullets {s[-1]['bullets']}"

    def top_performer(world, traj):
        s = slides(world)
        if not s or norm(s[-1]["title"]) != "summary":
            return False, "no summary slide"
        named = [r for r in regions if any(mentions(b, r) for b in s[-1]["bullets"])]
        return named == [d["top"]], f"regions named on the summary: {named}, expected {d['top']}"

    def checked_every_slide(world, traj):
        last = last_write_index(traj, deck)
        if last < 0:
            return False, "the deck was never written"
        n = len(slides(world))
        seen = {c.arguments.get("index") for c in traj.tool_calls[last + 1:]
                if not c.is_error and c.name == "slides__read_slide" and isinstance(c.arguments, dict)
                and str(c.arguments.get("path", "")).strip("/") == deck}
        missing = [i for i in range(n) if i not in seen]
        return not missing, f"slides not read after the last edit: {missing}"

    return [
        Criterion("title_slide", f"slide 1 is titled {d['title']!r} with the company as subtitle", "final_state",
                  title_slide, requires=("revenue",)),
        Criterion("one_slide_per_region", "exactly one slide per region between the title and summary slides",
                  "final_state", one_slide_per_region, requires=("revenue",)),
        Criterion("region_order", "region slides are ordered by quarter revenue, highest first", "final_state",
                  region_order, requires=("revenue",)),
        Criterion("revenue", "each region's revenue is its quarter total", "final_state", revenue, 2.0),
        Criterion("attainment", "each region's % of target is right", "final_state", attainment, 2.0),
        Criterion("new_customers", "each region's new customers is its quarter total", "final_state",
                  new_customers),
        Criterion("headlines", "each region slide carries the headline highlight from its notes (not the other "
                  "highlights)", "final_state", headlines),
        Criterion("presenters", "speaker notes name the region's current lead (not the former one)", "final_state",
                  presenters),
        Criterion("summary_totals", "the summary gives total revenue and total % of target", "final_state", summary),
        Criterion("top_performer", "the summary names the region with the highest % of target (and no other)",
                  "final_state", top_performer, requires=("attainment",)),  # a guess is right one time in five
        Criterion("checked_every_slide", "every slide was read back after the last edit (counts once the "
                  "figures are right)", "process", checked_every_slide, requires=("revenue",)),
        files_kit.unchanged(sources, description="workbook, notes and last quarter's deck are byte-identical"),
        files_kit.not_written(sources, description="no tool call wrote to a source file"),
        files_kit.only_created(sources, allowed=[deck], id="only_deck_created"),
    ]


# -- reference solution ------------------------------------------------------------------------------


def _figures(rev: float, pct: int, new: int) -> list[str]:
    """A region slide's figure bullets, worded as the request shows them."""
    return [f"Revenue: {_money(rev)} ({pct}% of target)", f"New customers: {new}"]


def _region_slide(d: dict, r: str) -> ToolCall:
    f = d["figures"][r]
    return ToolCall("slides__add_slide", {"path": d["deck"], "title": r,
                                          "bullets": [*_figures(f["revenue"], f["pct"], f["new"]), d["headline"][r]],
                                          "notes": f"Presenter: {d['leads'][r]}"}, f"Slide for {r}.")


def _summary(d: dict, total: float, top: str) -> list[str]:
    return [f"Total revenue: {_money(total)} ({d['total_pct']}% of target)",
            f"Top performer: {top} ({d['figures'][top]['pct']}% of target)"]


def _oracle(d: dict, brief: bool = False):
    """Look at last quarter's deck, read every region's sheet and update, build the deck slide by
    slide, then read every slide back. ``brief`` (one region) reads just its sheet and update,
    and has no summary slide."""
    deck, wb, regions = d["deck"], d["workbook"], d["regions"]
    if not brief:
        yield ToolCall("files__list_dir", {"path": ".", "recursive": True}, "See what is in the workspace.")
        prev = parse_json((yield ToolCall("slides__list_slides", {"path": d["prev_deck"]}, "Last quarter's layout.")))
        for s in prev["slides"][:2]:
            yield ToolCall("slides__read_slide", {"path": d["prev_deck"], "index": s["index"]},
                           "How a slide was laid out.")
        yield ToolCall("sheets__list_sheets", {"path": wb}, "Which sheets does the workbook have?")
    for r in sorted(regions):
        yield ToolCall("sheets__read_range", {"path": wb, "sheet": r}, f"Read {r}'s monthly figures.")
        yield ToolCall("files__read_file", {"path": d["notes"][r]}, f"Read {r}'s update.")

    yield ToolCall("slides__create_deck", {"path": deck}, "Create the deck.")
    yield ToolCall("slides__add_slide", {"path": deck, "title": d["title"], "bullets": [d["company"]],
                                         "layout": "title"}, "Title slide.")
    for r in regions:
        yield _region_slide(d, r)
    if brief:  # the two slides just added
        indexes = [0, 1]
    else:
        yield ToolCall("slides__add_slide", {"path": deck, "title": "Summary",
                                             "bullets": _summary(d, d["total_revenue"], d["top"])}, "Summary slide.")
        listing = parse_json((yield ToolCall("slides__list_slides", {"path": deck}, "Check the running order.")))
        indexes = [s["index"] for s in listing["slides"]]
    for i in indexes:
        yield ToolCall("slides__read_slide", {"path": deck, "index": i}, f"Check slide {i} against the figures.")
    if brief:
        return f"Built {deck}: the title and {regions[0]}'s slide."
    return f"Built {deck} with {len(regions) + 2} slides; top performer {d['top']}."


def _perturbations(d: dict, brief: bool, prev_title: str) -> dict:
    """One flawed oracle per criterion: a wrong figure, headline or presenter on the first region's
    slide, a slide missing or out of order, a wrong summary, a slide left unread, a source touched."""
    solve = partial(_oracle, d, brief=brief)
    deck, regions, figs = d["deck"], d["regions"], d["figures"]
    first, f = regions[0], figs[regions[0]]
    slide = partial(perturb.on, "slides__add_slide", path=deck)
    summary = slide(title="Summary")

    def first_bullets(rev=1.0, pct=0, new=0, headline=True):
        bullets = _figures(f["revenue"] * rev, f["pct"] + pct, f["new"] + new)
        return perturb.change(solve, slide(title=first), bullets=bullets + [d["headline"][first]] * headline)

    no_slide = perturb.drop(solve, slide(title=first))
    checks = perturb.on("slides__read_slide", path=deck)
    flawed = {
        "title_slide": perturb.change(solve, slide(layout="title"), bullets=["Quarterly review"]),
        "one_slide_per_region":  # brief reads back the two slides it added without listing them
            perturb.drop(no_slide, perturb.on("slides__read_slide", path=deck, index=1)) if brief else no_slide,
        "revenue": first_bullets(rev=1.1),
        "attainment": first_bullets(pct=3),
        "new_customers": first_bullets(new=2),
        "headlines": first_bullets(headline=False),
        "presenters": perturb.change(solve, slide(where=lambda a: a["title"] in d["former"]), count=None,
                                     edit=lambda a: {**a, "notes": f"Presenter: {d['former'][a['title']]}"}),
        "checked_every_slide": perturb.drop(solve, perturb.on("slides__read_slide", path=deck,
                                                              index=len(regions) + (not brief))),
        "sources_unchanged": perturb.insert(solve, ToolCall("sheets__write_cells", {
            "path": d["workbook"], "sheet": "Corporate", "cells": {"F1": "used in deck"}},
            "Note where the figures went."), before=checks),
        "no_source_writes": perturb.insert(solve, ToolCall("slides__update_slide", {
            "path": d["prev_deck"], "index": 0, "title": prev_title}, "Touch last quarter's deck."), before=checks),
        "only_deck_created": perturb.insert(solve, ToolCall("slides__create_deck", {"path": "decks/scratch.pptx"},
                                                            "Scratch deck."), before=checks),
    }
    if brief:  # one region: no order to get wrong, no summary slide
        return flawed
    wrong_order = sorted(regions)
    if wrong_order == regions:
        wrong_order.reverse()
    return flawed | {
        "region_order": perturb.replace(solve, slide(where=lambda a: a["title"] in regions),
                                        lambda c: _region_slide(d, wrong_order[regions.index(c.arguments["title"])]),
                                        count=None),
        "summary_totals": perturb.change(solve, summary, bullets=_summary(d, d["total_revenue"] * 1.05, d["top"])),
        "top_performer": perturb.change(solve, summary, bullets=_summary(
            d, d["total_revenue"], next(r for r in regions if r != d["top"]))),
    }
