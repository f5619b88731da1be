"""Log analysis: a per-minute incident timeline from three web frontends' access logs.

The incident ticket asks for requests and 5xx errors per minute over a two-hour window, the
incident's start, end and peak (by a stated rule: the longest run of minutes at or above a 10%
error rate), the endpoint that failed most, and the deploy that preceded it. The logs set the
usual traps: one frontend logs in local time (+01:00), one was rotated in the middle of the
window (part of it is gzipped) and also keeps yesterday's log at the same times of day, load
balancer health checks (some failing with 503) must be left out, 4xx are not errors, a short
error blip comes before the real incident, and a rollback follows it in the deploy log.
"""

from __future__ import annotations

import calendar
import csv
import gzip
import io
import math
import re
from collections import Counter
from datetime import date, datetime, time, timedelta, timezone
from pathlib import Path

from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import (
    hhmm,
    norm_path,
    output_text,
    rng_and_faker,
    shell_may_write,
    write_files,
)
from longhorizon.tasks.kit import files as files_kit, perturb
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register

NGINX = "logs/nginx"
FRONTENDS = ("web-1", "web-2", "web-3")
OFFSETS = {"web-1": 0, "web-2": 0, "web-3": 1}
NORMAL = [("/api/products/{id}", 34), ("/api/search?q={q}", 14), ("/api/cart", 12), ("/api/orders?page={p}", 10),
          ("/api/checkout", 9), ("/static/app.js", 12), ("/api/login", 6), ("/api/orders/{id}", 3)]
FAILING = [("/api/checkout", 58), ("/api/orders?page={p}", 20), ("/api/orders/{id}", 8), ("/api/cart", 8),
           ("/api/products/{id}", 6)]
SERVICES = ["search-api", "cart-api", "auth-service", "catalog-api", "notifications", "orders-api"]
AGENTS = ["Mozilla/5.0 (Windows NT 10.0; Win64; x64)", "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_4)",
          "Mozilla/5.0 (iPhone; CPU iPhone OS 17_3 like Mac OS X)", "okhttp/4.12.0", "python-requests/2.31"]
THRESHOLD = 0.10
WINDOW = 120


def _minute_key(text: str) -> str | None:
    m = re.search(r"(?<!\d)([01]\d|2[0-3]):([0-5]\d)(?!\d)", str(text))
    return f"{m.group(1)}:{m.group(2)}" if m else None


@register
class AccessLogIncidentTimeline(TaskFamily):
    name = "access_log_incident_timeline"
    category = "log analysis"
    apps = ("shell", "files")
    description = ("Build a per-minute incident timeline (requests, 5xx) from three frontends' access logs "
                   "(a rotated file, a +01:00 clock, health checks) and name the incident's start, end, peak, "
                   "failing endpoint and triggering deploy.")

    levels = 3
    """1: every request on web-3, the frontend on a +01:00 clock, in a window from just before
    the blip to just after the incident, analysed in one pass; 2: web-2 and web-3; 3 (default):
    all three, web-1's log rotated in the window next to yesterday's. The same requests reach the
    frontends at every level, so the incident is the same (level 1's timeline is its part of the
    window)."""
    toolsets = {1: ("files__read_file", "files__write_file", "shell__run")}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        day = date(2026, 1, 6) + timedelta(days=rng.randrange(320))
        win_start = datetime.combine(day, time(rng.randint(9, 15), rng.choice([0, 30])))
        minutes = [win_start + timedelta(minutes=i) for i in range(WINDOW)]
        cover_from, cover_to = win_start - timedelta(minutes=30), win_start + timedelta(minutes=WINDOW + 30)
        inc_len = rng.randint(12, 20)
        s_idx = rng.randint(32, 55)
        e_idx = s_idx + inc_len - 1
        blip = rng.randint(6, s_idx - 12)

        # -- per-minute totals: requests and errors (UTC minutes), from the start of coverage -------
        plan: dict[datetime, tuple[int, int]] = {}
        t = cover_from
        while t < cover_to:
            r = rng.randint(14, 24)
            plan[t] = (r, 1 if rng.random() < 0.35 else 0)
            t += timedelta(minutes=1)
        for k in (blip, blip + 1):
            r = rng.randint(15, 20)
            plan[minutes[k]] = (r, max(math.ceil(r * 0.12), round(r * rng.uniform(0.15, 0.25))))
        peak_idx = rng.randint(s_idx + 3, e_idx - 2)
        count_idx = rng.choice([i for i in range(s_idx + 1, e_idx) if abs(i - peak_idx) > 1])
        for i in range(s_idx, e_idx + 1):
            r = rng.randint(16, 26)
            frac = 1 - abs(i - peak_idx) / (inc_len + 2)
            rate = 0.14 + 0.3 * frac * rng.uniform(0.7, 1.0)
            plan[minutes[i]] = (r, max(math.ceil(r * 0.12), min(r - 1, round(r * rate))))
        plan[minutes[peak_idx]] = (12, 8)  # highest rate (0.67), few requests
        plan[minutes[count_idx]] = (30, 13)  # most errors (0.43), not the highest rate
        for i in (s_idx - 1, e_idx + 1):  # just under the threshold on both sides
            plan[minutes[i]] = (21, 2)
        for m, (r, e) in plan.items():
            assert e == 0 or m in (minutes[blip], minutes[blip + 1]) or minutes[s_idx] <= m <= minutes[e_idx] \
                or e / r < THRESHOLD
        rates = {m: plan[m][1] / plan[m][0] for m in minutes}
        assert all(rates[minutes[i]] >= THRESHOLD for i in range(s_idx, e_idx + 1))
        assert max(rates, key=rates.get) == minutes[peak_idx]

        # -- the requests -------------------------------------------------------------------------
        def path_of(table) -> str:
            tpl = rng.choices([p for p, _ in table], weights=[w for _, w in table])[0]
            return tpl.format(id=rng.randint(100, 99999), q=rng.choice(["lamp", "chair", "usb+c", "desk", "mug"]),
                              p=rng.randint(1, 6))

        events: list[dict] = []  # one per request: when (UTC), frontend, method, path, status
        for m, (r, e) in plan.items():
            failing = minutes[s_idx] <= m <= minutes[e_idx]
            statuses = [rng.choice([500, 502, 503, 504]) for _ in range(e)]
            statuses += [rng.choice([404, 401, 429, 400]) if rng.random() < 0.07 else rng.choice([200] * 8 + [201, 204, 304])
                         for _ in range(r - e)]
            for st in statuses:
                path = path_of(FAILING if st >= 500 and failing else NORMAL)
                method = "POST" if path.startswith(("/api/checkout", "/api/login", "/api/cart")) and rng.random() < 0.7 else "GET"
                events.append({"ts": m + timedelta(seconds=rng.randint(0, 59), milliseconds=rng.randint(0, 999)),
                               "fe": rng.choice(FRONTENDS), "method": method, "path": path, "status": st})
        for fe in FRONTENDS:  # load balancer health checks every 30 s, some failing during the incident
            t = cover_from
            while t < cover_to:
                bad = minutes[s_idx] <= t <= minutes[e_idx] + timedelta(seconds=59) and rng.random() < 0.5
                events.append({"ts": t + timedelta(milliseconds=rng.randint(0, 400)), "fe": fe, "method": "GET",
                               "path": "/healthz", "status": 503 if bad else 200, "lb": True})
                t += timedelta(seconds=30)
        events.sort(key=lambda ev: (ev["ts"], ev["fe"]))
        ips = [fake.ipv4_public() for _ in range(40)]
        fronts = FRONTENDS[3 - level:]  # the same draws as the default, then fewer frontends
        if level < self.levels:
            events = [dict(ev, fe=ev["fe"] if ev["fe"] in fronts else fronts[-1]) for ev in events
                      if not (ev.get("lb") and ev["fe"] not in fronts)]
            events.sort(key=lambda ev: (ev["ts"], ev["fe"]))

        def render(ev: dict, day_shift: int = 0) -> str:
            local = (ev["ts"] + timedelta(days=day_shift)).replace(tzinfo=timezone.utc).astimezone(
                timezone(timedelta(hours=OFFSETS[ev["fe"]])))
            stamp = local.strftime("%d/%b/%Y:%H:%M:%S %z")
            ip = rng.choice(["10.0.0.2", "10.0.0.3"]) if ev.get("lb") else rng.choice(ips)
            agent = "ELB-HealthChecker/2.0" if ev.get("lb") else rng.choice(AGENTS)
            size = rng.randint(120, 900) if ev["status"] >= 300 else rng.randint(300, 48000)
            rt = rng.uniform(0.002, 0.02) if ev.get("lb") else (rng.uniform(1.5, 30) if ev["status"] in (502, 504)
                                                                   else rng.uniform(0.01, 0.9))
            return (f'{ip} - - [{stamp}] "{ev["method"]} {ev["path"]} HTTP/1.1" {ev["status"]} {size} "-" '
                    f'"{agent}" rt={rt:.3f}')

        rotate_at = minutes[rng.randint(s_idx - 8, e_idx - 4)] + timedelta(seconds=rng.randint(0, 59))
        logs: dict[str, list[str]] = {f"{NGINX}/{fe}/access.log": [] for fe in fronts}
        if "web-1" in fronts:
            logs[f"{NGINX}/web-1/access.log.1.gz"] = []
        for ev in events:
            if ev["fe"] == "web-1" and ev["ts"] < rotate_at:
                logs[f"{NGINX}/web-1/access.log.1.gz"].append(render(ev))
            else:
                logs[f"{NGINX}/{ev['fe']}/access.log"].append(render(ev))
        # yesterday, same times of day, in web-1's older rotation
        if "web-1" in fronts:
            yesterday = [ev if ev.get("lb") else dict(ev, status=rng.choice([200, 200, 200, 404, 500, 502]))
                         for ev in events if ev["fe"] == "web-1"]
            logs[f"{NGINX}/web-1/access.log.2.gz"] = [render(ev, -1) for ev in yesterday[: len(yesterday) // 2]]

        def gz(lines: list[str], when: datetime) -> bytes:
            return gzip.compress(("\n".join(lines) + "\n").encode(), compresslevel=6,
                                 mtime=calendar.timegm(when.timetuple()))

        files: dict[str, bytes] = {}
        for rel, lines in logs.items():
            if rel.endswith(".1.gz"):
                files[rel] = gz(lines, rotate_at)
            elif rel.endswith(".2.gz"):
                files[rel] = gz(lines, datetime.combine(day, time(0, 0)))
            else:
                files[rel] = ("\n".join(lines) + "\n").encode()

        # deploys: several earlier, the trigger shortly before the start, a rollback near the end
        start_dt, end_dt = minutes[s_idx], minutes[e_idx]
        failing_service = rng.choice(["checkout-api", "payments-api"])
        major = rng.randint(2, 5)
        minor = rng.randint(10, 40)
        trigger = f"v{major}.{minor}.0"
        deploys = []
        for _ in range(rng.randint(3, 5)):
            when = datetime.combine(day, time(7, 0)) + timedelta(minutes=rng.randint(0, int((start_dt - datetime.combine(
                day, time(7, 0))).total_seconds() // 60) - 40))
            deploys.append((when, rng.choice(SERVICES), f"v{rng.randint(1, 4)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}",
                            fake.user_name(), ""))
        trig_when = start_dt - timedelta(minutes=rng.randint(3, 14), seconds=rng.randint(0, 59))
        deploys.append((trig_when, failing_service, trigger, fake.user_name(), ""))
        deploys.append((end_dt - timedelta(minutes=rng.randint(1, 3), seconds=rng.randint(0, 59)), failing_service,
                        f"v{major}.{minor - 1}.{rng.randint(1, 6)}", fake.user_name(), " (rollback)"))
        deploys.append((end_dt + timedelta(minutes=rng.randint(20, 60)), rng.choice(SERVICES),
                        f"v{rng.randint(1, 4)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}", fake.user_name(), ""))
        deploys.sort()
        files["logs/deploys.log"] = "".join(
            f"{w:%Y-%m-%dT%H:%M:%SZ}  deploy  {svc:<14} {ver}{note}  by {who}\n"
            for w, svc, ver, who, note in deploys).encode()
        app_lines = []
        for m in minutes[s_idx - 2: e_idx + 2]:
            for _ in range(rng.randint(1, 3)):
                when = m + timedelta(seconds=rng.randint(0, 59))
                if start_dt <= m <= end_dt:
                    msg = rng.choice(["ERROR db pool exhausted (max=20), waiting requests=" + str(rng.randint(5, 80)),
                                      "ERROR upstream payments timeout after 30000 ms",
                                      "WARN circuit breaker payments OPEN"])
                else:
                    msg = "INFO request completed"
                app_lines.append(f"{when:%Y-%m-%dT%H:%M:%S}Z {failing_service} {msg}")
        files[f"logs/app/{failing_service}.log"] = ("\n".join(app_lines) + "\n").encode()

        # -- ground truth ---------------------------------------------------------------------------
        real = [ev for ev in events if not ev.get("lb")]
        per_min = {m: [0, 0] for m in minutes}
        for ev in real:
            m = ev["ts"].replace(second=0, microsecond=0)
            if m in per_min:
                per_min[m][0] += 1
                per_min[m][1] += ev["status"] >= 500
        assert all(tuple(per_min[m]) == plan[m] for m in minutes)
        fails = Counter(ev["path"].split("?")[0] for ev in real
                        if ev["status"] >= 500 and start_dt <= ev["ts"] < end_dt + timedelta(minutes=1))
        (top_path, c1), (_, c2) = fails.most_common(2)
        assert c1 > c2
        busiest = Counter(ev["path"].split("?")[0] for ev in real
                          if minutes[0] <= ev["ts"] < minutes[-1] + timedelta(minutes=1)).most_common(1)[0][0]
        peak_rate = 100 * rates[minutes[peak_idx]]
        truth = {"start": hhmm(start_dt), "end": hhmm(end_dt), "peak": hhmm(minutes[peak_idx]),
                 "peak_error_rate": peak_rate, "top_endpoint": top_path, "trigger": trigger}
        if level == 1:  # a shorter window: from just before the blip to just after the incident
            lo, hi = blip - 3, e_idx + 4
            minutes = minutes[lo:hi]
            s_idx, e_idx, blip, peak_idx, count_idx = (i - lo for i in (s_idx, e_idx, blip, peak_idx, count_idx))
            rates = {m: rates[m] for m in minutes}
            busiest = next(p for p, _ in Counter(  # the busiest path that is not the failing one
                ev["path"].split("?")[0] for ev in real
                if minutes[0] <= ev["ts"] < minutes[-1] + timedelta(minutes=1)).most_common() if p != top_path)

        inc_no = rng.randint(210, 480)
        inc_dir = f"incidents/INC-{inc_no}"
        timeline, summary = f"{inc_dir}/timeline.csv", f"{inc_dir}/summary.md"
        prev_dir = f"incidents/INC-{inc_no - rng.randint(3, 20)}"
        reporter = fake.name()
        ticket = _ticket(inc_no, day, minutes[0], minutes[-1], len(minutes), reporter, timeline, summary, prev_dir,
                         {1: "the frontend", 2: "either of the two frontends", 3: "any of the three frontends"}[level])
        prev_summary = (f"# INC-{prev_dir.rsplit('-', 1)[1]} summary\n\nstart: 09:41\nend: 09:58\npeak: 09:47\n"
                        f"peak_error_rate: 38%\ntop_endpoint: /api/search\ntrigger: v1.22.0\n")
        files[f"{inc_dir}/ticket.md"] = ticket.encode()
        files[f"{prev_dir}/summary.md"] = prev_summary.encode()
        order = sorted(files)

        def build(root: Path) -> None:
            write_files(root / "workspace", {rel: files[rel] for rel in order})

        signer = fake.first_name()
        w = phrasing_rng(self.name, seed)
        ask = say(w, f"Hi, could you put together the timeline for INC-{inc_no}?",
                  f"Hello, can you build the timeline for INC-{inc_no}?",
                  f"Hi there, INC-{inc_no} needs its timeline put together; could you do it?")
        where = say(w, f"Everything the postmortem needs is described in {inc_dir}/ticket.md; the frontends' access "
                       f"logs are under {NGINX}/ and the deploy log is logs/deploys.log.",
                    f"{inc_dir}/ticket.md describes everything the postmortem needs. The access logs of the frontends "
                    f"sit under {NGINX}/, and the deploy log is logs/deploys.log.",
                    f"You'll find the frontends' access logs under {NGINX}/ and the deploy log in logs/deploys.log; "
                    f"what the postmortem needs is all described in {inc_dir}/ticket.md.")
        limits = in_some_order(w, [
            say(w, "Please don't modify any of the logs.", "The logs must stay exactly as they are.",
                "Leave every log unmodified."),
            say(w, "Leave nothing in the workspace apart from the two files the ticket asks for.",
                "Apart from the two files the ticket asks for, leave nothing new in the workspace.",
                "Don't leave anything in the workspace except the two files the ticket asks for."),
        ])
        verify = say(w, "When they're written, read both back to make sure they say what you meant.",
                     "Once both files are written, read them back and check they say what you meant.",
                     "After writing them, please read both back to confirm they say what you intended.")
        instruction = " ".join([ask, where, *limits, verify,
                                say(w, f"Thanks, {signer}", f"Thank you! {signer}", f"Cheers, {signer}")])

        # -- oracle ---------------------------------------------------------------------------------
        survey = level > 1  # one frontend's log needs no survey and no cross-checks
        # level 1: one script prints the timeline, the runs and the incident's failing endpoints
        analysis = _analysis_command(day, minutes[0]) if survey else _brief_command(minutes[0], len(minutes))
        read_back = f"head -n 5 {timeline}; wc -l {timeline}; cat {summary}"
        recheck = f"awk -F, 'NR > 1 && $3 / $2 >= {THRESHOLD}' {timeline}"

        def timeline_csv(counts, span: list[datetime] = minutes) -> str:
            buf = io.StringIO()
            out = csv.writer(buf, lineterminator="\n")
            out.writerow(["minute", "requests", "errors"])
            out.writerows((hhmm(m), *counts[m]) for m in span)
            return buf.getvalue()

        def summary_md(s: dict) -> str:
            return (f"# INC-{inc_no} summary\n\nstart: {s['start']}\nend: {s['end']}\npeak: {s['peak']}\n"
                    f"peak_error_rate: {s['peak_error_rate']:.0f}%\ntop_endpoint: {s['top_endpoint']}\n"
                    f"trigger: {s['trigger']}\n")

        def solve():
            if survey:
                yield ToolCall("shell__run", {"command": "ls -laR logs incidents"},
                               "See which logs and incident files exist.")
            yield ToolCall("files__read_file", {"path": f"{inc_dir}/ticket.md"}, "Read the ticket's definitions.")
            if survey:
                yield ToolCall("files__read_file", {"path": f"{prev_dir}/summary.md"},
                               "See how the last summary was written.")
            for fe in fronts if survey else ():
                yield ToolCall("shell__run", {"command": f"head -n 3 {NGINX}/{fe}/access.log; tail -n 1 {NGINX}/{fe}/access.log"},
                               f"Look at {fe}'s line format and time range.")
            if "web-1" in fronts:
                yield ToolCall("shell__run", {"command": (
                    f"for f in {NGINX}/*/*.gz; do echo \"== $f\"; zcat \"$f\" | sed -n '1p;$p' | cut -c1-90; done")},
                    "Check which times the rotated files cover.")
                yield ToolCall("shell__run", {"command": (
                    f"zcat {NGINX}/web-1/access.log.1.gz | tail -n 2 | cut -c1-90; echo ...; "
                    f"head -n 2 {NGINX}/web-1/access.log | cut -c1-90")},
                    "Confirm web-1's rotated part and live file join without a gap.")
            if survey:
                yield ToolCall("shell__run", {"command": (
                    f"zcat -f {NGINX}/*/access.log* | awk '{{print $5}}' | sort | uniq -c")},
                    "Check the timezone offsets: one frontend may not log in UTC.")
                yield ToolCall("shell__run", {"command": (
                    f"zcat -f {NGINX}/*/access.log* | grep -c ' /healthz '; zcat -f {NGINX}/*/access.log* | "
                    f"grep ' /healthz ' | awk '{{print $1, $9}}' | sort | uniq -c")},
                    "Size up the load balancer health checks, which are not user traffic.")
            yield ToolCall("files__read_file", {"path": "logs/deploys.log"}, "Read the deploy history.")
            if survey:
                yield ToolCall("shell__run", {"command": f"grep -n ERROR logs/app/{failing_service}.log | head -n 8"},
                               "See what the application logged when it started failing.")
            out = yield ToolCall("shell__run", {"command": analysis},
                                 "Count requests and 5xx per UTC minute over the window, for this day only, "
                                 "without health checks.")
            got = {}
            for line in out.splitlines():
                m = re.match(r"^(\d\d:\d\d),(\d+),(\d+)$", line.strip())
                if m:
                    got[m.group(1)] = (int(m.group(2)), int(m.group(3)))
            want = {hhmm(m): plan[m] for m in minutes}
            if got != want:
                raise RuntimeError(f"analysis disagrees with the generator: {sorted(set(got.items()) ^ set(want.items()))[:4]}")
            if survey:
                yield ToolCall("shell__run", {"command": _runs_command(day, minutes[0])},
                               "Find runs of minutes at or above 10% errors, and the peak minute.")
            if survey:
                for m, why in ((minutes[s_idx - 1], "the minute before the start"),
                               (minutes[peak_idx], "the peak minute")):
                    yield ToolCall("shell__run", {"command": _by_hand_command(m, fronts)},
                                   f"Cross-check {why} ({hhmm(m)} UTC) by hand in the raw logs.")
                yield ToolCall("shell__run", {"command": _frontends_command(start_dt, end_dt)},
                               "Did every frontend fail, or just one? And what else (4xx) was going on?")
            if survey:
                yield ToolCall("shell__run", {"command": _endpoints_command(day, start_dt, end_dt)},
                               "Which endpoints failed most during the incident?")
            if survey:
                yield ToolCall("shell__run", {"command": (
                    f"grep -E '^{day.isoformat()}T' logs/deploys.log | awk '$1 < \"{start_dt:%Y-%m-%dT%H:%M}\"' | tail -n 1")},
                    "The last deploy before the start.")
                yield ToolCall("shell__run", {"command": f"grep -n -i -E 'rollback|{failing_service}' logs/deploys.log"},
                               "Does a rollback line up with the recovery?")
            yield ToolCall("files__write_file", {"path": timeline, "content": timeline_csv(plan)},
                           "Write the timeline.")
            yield ToolCall("files__write_file", {"path": summary, "content": summary_md(truth)}, "Write the summary.")
            yield ToolCall("shell__run", {"command": read_back}, "Read both files back.")
            if survey:
                yield ToolCall("shell__run", {"command": recheck},
                               "Check that the written timeline shows the same incident minutes.")
                yield ToolCall("shell__run", {"command": "find . -type f -not -path './logs/*' | sort"},
                               "Make sure nothing else was left behind.")
            s = truth
            if not survey:
                return f"INC-{inc_no}: {s['start']}-{s['end']} UTC, after {s['trigger']}; both files written."
            return (f"INC-{inc_no}: errors ran from {s['start']} to {s['end']} UTC, peaking at {s['peak']} "
                    f"({s['peak_error_rate']:.0f}% of requests), mostly on {s['top_endpoint']}, right after the "
                    f"{failing_service} {s['trigger']} deploy. Timeline in {timeline}, summary in {summary}.")

        # -- perturbations: the oracle with one mistake each ----------------------------------------
        def misread(local_time: bool = False, errors_from: int = 500) -> dict[datetime, list[int]]:
            """Requests and errors per window minute as a slipping analysis counts them: the +01:00
            clock taken for UTC (``local_time``), or 4xx counted as errors (``errors_from=400``)."""
            counts = {m: [0, 0] for m in minutes}
            for ev in real:
                ts = ev["ts"] + timedelta(hours=OFFSETS[ev["fe"]] if local_time else 0)
                m = ts.replace(second=0, microsecond=0)
                if m in counts:
                    counts[m][0] += 1
                    counts[m][1] += ev["status"] >= errors_from
            return counts

        def timeline_of(content: str):
            return perturb.change(solve, perturb.on("files__write_file", path=timeline), content=content)

        def summary_with(**wrong):
            return perturb.change(solve, perturb.on("files__write_file", path=summary),
                                  content=summary_md({**truth, **wrong}))

        def before_analysis(command: str, why: str):
            return perturb.insert(solve, ToolCall("shell__run", {"command": command}, why),
                                  before=perturb.on("shell__run", command=analysis))

        flawed = {
            "timeline_rows": lambda: timeline_of(timeline_csv(plan, [*minutes, minutes[-1] + timedelta(minutes=1)])),
            # the numbers a misreading analysis prints (the oracle's own analysis checks itself)
            "timeline_requests": lambda: timeline_of(timeline_csv(misread(local_time=True))),
            "timeline_errors": lambda: timeline_of(timeline_csv(misread(errors_from=400))),
            # the short blip before the incident taken for it
            "incident_window": lambda: summary_with(start=hhmm(minutes[blip]), end=hhmm(minutes[blip + 1])),
            # the minute with the most errors, not the highest rate
            "peak": lambda: summary_with(peak=hhmm(minutes[count_idx]),
                                         peak_error_rate=100 * rates[minutes[count_idx]]),
            "top_endpoint": lambda: summary_with(top_endpoint=busiest),  # the busiest path, not the failing one
            # the failing service's last deploy: the rollback, not the one before the start
            "trigger_deploy": lambda: summary_with(trigger=[d for d in deploys if d[1] == failing_service][-1][2]),
            "logs_untouched": lambda: before_analysis(f"gunzip {NGINX}/web-1/access.log.1.gz",
                                                      "Unpack the rotated log.") if "web-1" in fronts
            else before_analysis(f"gzip {NGINX}/web-3/access.log", "Compress web-3's log."),
            "workspace_clean": lambda: before_analysis(
                f"zcat -f {NGINX}/*/access.log* > merged.log && wc -l merged.log", "Merge all logs into one file."),
            "outputs_checked": lambda: perturb.drop(solve, lambda call: call.name == "shell__run" and
                                                    call.arguments.get("command") in (read_back, recheck), count=None),
        }

        # -- grading --------------------------------------------------------------------------------
        want_rows = {hhmm(m): plan[m] for m in minutes}

        def regular(w, rel: str) -> Path:
            p = w.file(rel)
            if p.is_symlink() or not p.is_file():
                raise ValueError(f"{rel} is missing or not a regular file")
            return p

        def read_timeline(w) -> list[tuple[str | None, list[str]]]:
            text = output_text(regular(w, timeline), encoding="utf-8-sig")
            rows = [r for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r)]
            head = [h.strip().lower() for h in rows[0]] if rows else []
            if head[:3] != ["minute", "requests", "errors"]:
                raise ValueError(f"header is {rows[0] if rows else None}, expected minute,requests,errors")
            return [(_minute_key(r[0]), r[1:3]) for r in rows[1:]]

        def rows_ok(w, t):
            rows = read_timeline(w)
            keys = [k for k, _ in rows]
            if len(keys) != len(set(keys)):
                return False, "a minute appears twice"
            return set(keys) == set(want_rows) and len(keys) == len(minutes), \
                f"{len(keys)} rows; expected the {len(minutes)} minutes {hhmm(minutes[0])}-{hhmm(minutes[-1])}"

        def col_ok(idx: int, label: str):
            def check(w, t):
                got = {k: v for k, v in read_timeline(w)}
                bad = []
                for k, exp in want_rows.items():
                    v = got.get(k)
                    try:
                        n = float(v[idx]) if v and len(v) > idx else None
                    except ValueError:
                        n = None
                    if n != exp[idx]:
                        bad.append(f"{k}: {v[idx] if v and len(v) > idx else 'missing'} (expected {exp[idx]})")
                return not bad, f"{label} wrong in {len(bad)} minutes: {bad[:4]}" if bad else ""
            return check

        def read_summary(w) -> dict[str, str]:
            out = {}
            for line in output_text(regular(w, summary)).splitlines():
                m = re.match(r"^\s*[-*]?\s*\**([A-Za-z _]+?)\**\s*:\s*(.+)$", line)
                if m:
                    out.setdefault(m.group(1).strip().lower().replace(" ", "_"), m.group(2).strip().strip("`*"))
            return _SummaryFields(out)

        def window_ok(w, t):
            s = read_summary(w)
            got = (_minute_key(s.field("start")), _minute_key(s.field("end")))
            return got == (truth["start"], truth["end"]), f"start/end {got}, expected {truth['start']}-{truth['end']}"

        def peak_ok(w, t):
            s = read_summary(w)
            if _minute_key(s.field("peak")) != truth["peak"]:
                return False, f"peak {s.field('peak')!r}"
            rate_text = s.field("peak_error_rate", "rate")
            nums = re.findall(r"\d+(?:\.\d+)?", rate_text)
            if not nums:
                return False, "no peak_error_rate"
            v = float(nums[0])
            if "%" not in rate_text and v <= 1:
                v *= 100
            return abs(v - peak_rate) <= 0.5 + 1e-9, f"peak_error_rate {rate_text!r}, expected {peak_rate:.1f}%"

        def endpoint_ok(w, t):
            v = read_summary(w).field("top_endpoint", "endpoint")
            path = v.split()[0].split("?")[0].rstrip("/") if v.split() else ""
            return path == top_path, f"top_endpoint {v!r}"

        def trigger_ok(w, t):
            v = read_summary(w).field("trigger")
            return re.search(rf"(?<![\d.])v?{re.escape(trigger[1:])}(?![\d.])", v) is not None, f"trigger {v!r}"

        def checked(w, t):
            last = {timeline: -1, summary: -1}
            for i, c in enumerate(t.tool_calls):
                if c.is_error or not isinstance(c.arguments, dict):
                    continue
                if c.name == "files__write_file" and norm_path(c.arguments.get("path")) in last:
                    last[norm_path(c.arguments["path"])] = i
                elif c.name == "shell__run":
                    cmd = str(c.arguments.get("command", ""))
                    for p in last:
                        if shell_may_write(cmd, p.rsplit("/", 1)[1]):
                            last[p] = i
            if min(last.values()) < 0:
                return False, "an output was never written"

            def reads(c, p) -> bool:
                if c.is_error or not isinstance(c.arguments, dict):
                    return False
                if c.name == "files__read_file":
                    return norm_path(c.arguments.get("path")) == p
                return c.name == "shell__run" and p.rsplit("/", 1)[1] in str(c.arguments.get("command", ""))

            unread = [p for p, i in last.items() if not any(reads(c, p) for c in t.tool_calls[i + 1:])]
            return not unread, f"not read back after writing: {unread}" if unread else ""

        criteria = [
            Criterion("timeline_rows", f"{timeline} has the header minute,requests,errors and one row per minute "
                      f"{hhmm(minutes[0])}-{hhmm(minutes[-1])} UTC", "final_state", rows_ok,
                      requires=("timeline_requests",)),
            Criterion("timeline_requests", "requests per UTC minute across all frontends (rotated part and the +01:00 "
                      "frontend included, health checks and yesterday excluded)", "final_state", col_ok(0, "requests"), 2.0),
            Criterion("timeline_errors", "5xx responses per minute (4xx and health checks excluded)", "final_state",
                      col_ok(1, "errors"), 2.0),
            Criterion("incident_window", "start and end of the longest run of minutes at or above 10% errors",
                      "final_state", window_ok, 2.0),
            Criterion("peak", "the minute with the highest error rate, and that rate", "final_state", peak_ok),
            Criterion("top_endpoint", "the path (no query string) with the most 5xx during the incident",
                      "final_state", endpoint_ok, requires=("incident_window",)),  # nearly always the same path
            Criterion("trigger_deploy", "the last deploy before the incident started", "final_state", trigger_ok),
            files_kit.unchanged(files, id="logs_untouched", description="every log file is unchanged"),
            files_kit.only_created(files, allowed=[timeline, summary], id="workspace_clean",
                                   description="nothing left besides the timeline and the summary"),
            Criterion("outputs_checked", "both outputs were read back after they were last written", "process", checked,
                      requires=("timeline_requests", "incident_window")),
        ]
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations={c.id: flawed[c.id]() for c in criteria},
            data={"date": day.isoformat(), "window": [hhmm(minutes[0]), hhmm(minutes[-1])], **truth,
                  "rotated_at": rotate_at.isoformat(), "failing_service": failing_service},
        )


class _SummaryFields(dict):
    """``key: value`` lines of a summary, looked up tolerantly: the exact key first, then a key
    holding the word ("trigger_deploy", "incident_start"), never the rate for "peak"."""

    def field(self, name: str, word: str | None = None) -> str:
        if name in self:
            return self[name]
        word = word or name
        for k, v in self.items():
            parts = k.split("_")
            if word in parts and not (name == "peak" and "rate" in parts):
                return v
        return ""


# -- the expert's analysis commands ----------------------------------------------------------------

_PARSE = r"""import glob, gzip, re, sys
from collections import Counter, defaultdict
from datetime import datetime, timedelta, timezone
LINE = re.compile(r'^(\S+) \S+ \S+ \[(\d\d)/(\w{3})/(\d{4}):(\d\d):(\d\d):(\d\d) ([-+])(\d\d)(\d\d)\] "(\S+) (\S+)[^"]*" (\d{3}) ')
MONTHS = {m: i for i, m in enumerate('Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec'.split(), 1)}
def events(keep_local_time=False):
    # (UTC time, method, path, status) of every access-log line, rotated files included
    for f in sorted(glob.glob('logs/nginx/*/access.log*')):
        op = gzip.open if f.endswith('.gz') else open
        with op(f, 'rt') as fh:
            for line in fh:
                m = LINE.match(line)
                if not m:
                    continue
                d, mon, y, hh, mm, ss, sign, oh, om = m.group(2, 3, 4, 5, 6, 7, 8, 9, 10)
                ts = datetime(int(y), MONTHS[mon], int(d), int(hh), int(mm), int(ss), tzinfo=timezone.utc)
                if not keep_local_time:
                    ts -= (1 if sign == '+' else -1) * timedelta(hours=int(oh), minutes=int(om))
                yield ts, m.group(11), m.group(12), int(m.group(13))
"""


def _analysis_command(day: date, start: datetime) -> str:
    return ("python3 - <<'PY'\n" + _PARSE + f"""start = datetime({start.year}, {start.month}, {start.day}, {start.hour}, {start.minute}, tzinfo=timezone.utc)
count = defaultdict(lambda: [0, 0])
for ts, method, path, status in events(keep_local_time=False):
    if path == '/healthz':
        continue
    minute = ts.replace(second=0, microsecond=0)
    if start <= minute < start + timedelta(minutes={WINDOW}):
        count[minute][0] += 1
        count[minute][1] += status >= 500
print('minute,requests,errors')
for i in range({WINDOW}):
    m = start + timedelta(minutes=i)
    print(f"{{m:%H:%M}},{{count[m][0]}},{{count[m][1]}}")
PY""")


def _brief_command(start: datetime, n: int) -> str:
    """Level 1's one pass: the per-minute counts of the ``n``-minute window, its runs at or above
    the threshold with the longest one's peak, and the paths with the most 5xx in that run."""
    return ("python3 - <<'PY'\n" + _PARSE + f"""start = datetime({start.year}, {start.month}, {start.day}, {start.hour}, {start.minute}, tzinfo=timezone.utc)
count, fails = defaultdict(lambda: [0, 0]), defaultdict(Counter)
for ts, method, path, status in events():
    minute = ts.replace(second=0, microsecond=0)
    if path != '/healthz' and start <= minute < start + timedelta(minutes={n}):
        count[minute][0] += 1
        count[minute][1] += status >= 500
        if status >= 500:
            fails[minute][path.split('?')[0]] += 1
print('minute,requests,errors')
runs, cur = [], []
for i in range({n}):
    m = start + timedelta(minutes=i)
    req, err = count[m]
    print(f"{{m:%H:%M}},{{req}},{{err}}")
    if req and err / req >= {THRESHOLD}:
        cur.append(m)
    elif cur:
        runs.append(cur)
        cur = []
runs += [cur] if cur else []
longest = max(runs, key=len)
peak = max(longest, key=lambda m: count[m][1] / count[m][0])
print('runs:', ', '.join(f"{{r[0]:%H:%M}}-{{r[-1]:%H:%M}}" for r in runs))
print(f"longest {{longest[0]:%H:%M}}-{{longest[-1]:%H:%M}}; peak {{peak:%H:%M}} "
      f"{{100 * count[peak][1] / count[peak][0]:.1f}}%; top 5xx paths:",
      sum((fails[m] for m in longest), Counter()).most_common(3))
PY""")


def _runs_command(day: date, start: datetime) -> str:
    return ("python3 - <<'PY'\n" + _PARSE + f"""start = datetime({start.year}, {start.month}, {start.day}, {start.hour}, {start.minute}, tzinfo=timezone.utc)
count = defaultdict(lambda: [0, 0])
for ts, method, path, status in events():
    minute = ts.replace(second=0, microsecond=0)
    if path != '/healthz' and start <= minute < start + timedelta(minutes={WINDOW}):
        count[minute][0] += 1
        count[minute][1] += status >= 500
runs, cur = [], []
for i in range({WINDOW}):
    m = start + timedelta(minutes=i)
    req, err = count[m]
    if req and err / req >= {THRESHOLD}:
        cur.append(m)
    elif cur:
        runs.append(cur)
        cur = []
if cur:
    runs.append(cur)
for r in runs:
    print(f"run {{r[0]:%H:%M}}-{{r[-1]:%H:%M}} ({{len(r)}} min)")
longest = max(runs, key=len)
peak = max(longest, key=lambda m: count[m][1] / count[m][0])
print(f"longest {{longest[0]:%H:%M}}-{{longest[-1]:%H:%M}}; peak {{peak:%H:%M}} "
      f"{{100 * count[peak][1] / count[peak][0]:.1f}}% ({{count[peak][1]}}/{{count[peak][0]}})")
PY""")


def _by_hand_command(m: datetime, fronts: tuple[str, ...] = FRONTENDS) -> str:
    """grep/awk over the raw lines: web-1/web-2 stamp UTC, web-3 local time (+01:00)."""
    utc = m.strftime("%d/%b/%Y:%H:%M:")
    local = (m + timedelta(hours=1)).strftime("%d/%b/%Y:%H:%M:")
    utc_logs = " ".join(f"{NGINX}/{fe}/access.log" + ("*" if fe == "web-1" else "")
                        for fe in fronts if OFFSETS[fe] == 0)
    utc_part = f"zcat -f {utc_logs} | grep -F '[{utc}'; " if utc_logs else ""
    return (f"{{ {utc_part}"
            f"grep -F '[{local}' {NGINX}/web-3/access.log; }} | grep -v ' /healthz ' | "
            f"awk '{{n++; if ($9 >= 500) e++}} END {{printf \"requests=%d errors=%d rate=%.1f%%\\n\", n, e, 100*e/n}}'")


def _frontends_command(s: datetime, e: datetime) -> str:
    return ("python3 - <<'PY'\n" + _PARSE + f"""lo = datetime({s.year}, {s.month}, {s.day}, {s.hour}, {s.minute}, tzinfo=timezone.utc)
hi = datetime({e.year}, {e.month}, {e.day}, {e.hour}, {e.minute}, tzinfo=timezone.utc) + timedelta(minutes=1)
mix = Counter()
for ts, method, path, status in events():
    if path != '/healthz' and lo <= ts < hi:
        mix[status // 100] += 1
print('status classes during the incident:', dict(sorted(mix.items())))
for f in sorted(glob.glob('logs/nginx/*/access.log*')):
    op = gzip.open if f.endswith('.gz') else open
    n = 0
    with op(f, 'rt') as fh:
        for line in fh:
            m = LINE.match(line)
            if m and m.group(12) != '/healthz' and int(m.group(13)) >= 500:
                d, mon, y, hh, mm, ss, sign, oh, om = m.group(2, 3, 4, 5, 6, 7, 8, 9, 10)
                ts = datetime(int(y), MONTHS[mon], int(d), int(hh), int(mm), int(ss), tzinfo=timezone.utc)
                ts -= (1 if sign == '+' else -1) * timedelta(hours=int(oh), minutes=int(om))
                n += lo <= ts < hi
    print(f, '5xx during the incident:', n)
PY""")


def _endpoints_command(day: date, s: datetime, e: datetime) -> str:
    return ("python3 - <<'PY'\n" + _PARSE + f"""lo = datetime({s.year}, {s.month}, {s.day}, {s.hour}, {s.minute}, tzinfo=timezone.utc)
hi = datetime({e.year}, {e.month}, {e.day}, {e.hour}, {e.minute}, tzinfo=timezone.utc) + timedelta(minutes=1)
c = Counter(path.split('?')[0] for ts, method, path, status in events()
            if status >= 500 and path != '/healthz' and lo <= ts < hi)
for path, n in c.most_common(5):
    print(n, path)
PY""")


def _ticket(no: int, day: date, first: datetime, last: datetime, rows: int, reporter: str, timeline: str,
            summary: str, prev_dir: str, reached: str) -> str:
    return f"""# INC-{no}: checkout errors on {day.isoformat()}

Reported by: {reporter}
Severity: SEV-2

Customers saw errors at checkout in the afternoon (UTC). For the postmortem we need:

1. {timeline}: header `minute,requests,errors`, one row per minute from {hhmm(first)} to
   {hhmm(last)} UTC on {day.isoformat()} ({rows} rows, minute as HH:MM). requests = user requests
   that reached {reached} in that minute; errors = those answered with a 5xx
   status. Load balancer health checks (GET /healthz) are not user requests: leave them out.
   All times in UTC (check each frontend's offset).
2. {summary}, in the same key: value format as the previous incident's ({prev_dir}/summary.md):
   - start / end: first and last minute (HH:MM UTC) of the incident, which is the longest run
     of consecutive minutes with an error rate (errors / requests) of 10% or more;
   - peak: the minute of the incident with the highest error rate, and peak_error_rate: that
     rate in percent;
   - top_endpoint: the path (without query string) with the most 5xx during the incident;
   - trigger: the version of the last deploy (logs/deploys.log) before the incident started.
"""
