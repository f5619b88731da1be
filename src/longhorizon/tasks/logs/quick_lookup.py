"""Log analysis, short horizon: copy one log line a colleague asks for into a report.

Two sibling families, four shell calls each (look, filter, write, read back), so that a small
model on a CPU can be trained and evaluated on them within minutes: ``log_first_error`` (train)
wants the first ERROR entry a service logged on one day, ``log_last_warning`` (its sibling,
which the demo never trains on and evaluates for transfer) the last WARN entry. The traps are those of real logs: the file also
holds the evening before and the small hours after (the first ERROR in the file, or the last
WARN, is on another day), INFO and WARN lines quote upstream "ERROR 502"s, and stack traces
follow ERROR lines. The answer is a line of the log itself, so the grader checks its parts
(timestamp, request id, message) one by one: dense credit for a partly right line, none for a
file that holds more than the one line asked for.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from pathlib import Path

from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import output_text, rng_and_faker, write_files
from longhorizon.tasks.kit import files as files_kit, perturb
from longhorizon.tasks.registry import register
from longhorizon.tasks.logs.error_summary import (
    SERVICES, Entry, H, _at, _filler, _norm_message, _regular, _trace,
)

_LINE = re.compile(r"^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2}(?:\.\d+)?) +([A-Z]+) +\[([^\]]+)\] +req=(\S+) +(.*)$")


def _parts(line: str) -> dict[str, str] | None:
    m = _LINE.match(" ".join(line.split()))
    if not m:
        return None
    return dict(zip(("date", "time", "level", "service", "req", "message"), m.groups()))


def _only_line(world, rel: str) -> str:
    """The report's one non-empty line; raises (-> the criterion fails, with why) otherwise."""
    lines = [ln.strip() for ln in output_text(_regular(world, rel), encoding="utf-8-sig").splitlines() if ln.strip()]
    if len(lines) != 1:
        raise ValueError(f"{rel} should hold exactly one line, it holds {len(lines)}")
    return lines[0]


class _QuickLookup(TaskFamily):
    """One log line, chosen by level and position on one day, copied into ``report``."""

    category = "log analysis"
    apps = ("shell",)
    level = ""
    first = True  # the first entry of the day at ``level``, or the last
    report = ""

    def generate(self, seed: int) -> Task:
        rng, fake = rng_and_faker(seed, self.name)
        day = date(2024, 1, 10) + timedelta(days=rng.randrange(700))
        prev, nxt = day - timedelta(days=1), day + timedelta(days=1)
        services = sorted(rng.sample(sorted(SERVICES), 3))
        target = rng.choice(services)
        colleague = fake.first_name()

        def rid() -> str:
            return f"{rng.getrandbits(32):08x}"

        def entry(svc: str, level: str, ts) -> Entry:
            style, pool = SERVICES[svc]
            if level == "ERROR":
                msg = rng.choice(pool)
                return Entry(ts, "ERROR", svc, rid(), msg, _trace(rng, style, svc, msg) if rng.random() < 0.5 else [])
            while True:
                e = _filler(rng, svc, ts, rid())
                if e.level == level or level == "any":
                    return e

        files: dict[str, bytes] = {}
        wanted: Entry | None = None
        for svc in services:
            es = [entry(svc, "any", _at(prev, 20 * H, 24 * H, rng)) for _ in range(rng.randint(2, 4))]
            es += [entry(svc, "ERROR", _at(prev, 20 * H, 24 * H, rng))]  # the evening before
            es += [entry(svc, "any", _at(day, 0 * H, 24 * H, rng)) for _ in range(rng.randint(5, 8))]
            es += [entry(svc, self.level, _at(day, 1 * H, 23 * H, rng)) for _ in range(rng.randint(2, 3))]
            es += [entry(svc, self.level, _at(nxt, 0 * H, 2 * H, rng))]  # the small hours after
            es += [entry(svc, "any", _at(nxt, 0 * H, 2 * H, rng)) for _ in range(rng.randint(1, 2))]
            es.sort(key=lambda e: e.ts)
            files[f"logs/{svc}.log"] = "".join(e.render() + "\n" for e in es).encode()
            if svc == target:
                of_day = [e for e in es if e.level == self.level and e.ts.date() == day]
                wanted = of_day[0] if self.first else of_day[-1]
        assert wanted is not None
        line = wanted.render().splitlines()[0]
        log = f"logs/{target}.log"
        iso = day.isoformat()
        which = "first" if self.first else "last"
        what = {"ERROR": "ERROR entry", "WARN": "WARN (warning) entry"}[self.level]

        def build(root: Path) -> None:
            write_files(root / "workspace", files)

        instruction = (
            f"Hi! Could you find the {which} {what} that the {target} service logged on "
            f"{day.strftime('%A')} {day.day} {day:%B %Y} ({iso})? Its log is {log}; the file also holds "
            f"the evening before and the small hours after. Copy that log line, exactly as it appears "
            f"(timestamp, level, service, request id and message), into {self.report}: just the one line"
            f"{', not the stack trace under it' if self.level == 'ERROR' else ''}. Please don't change the "
            f"logs, and check the report once it is written. Thanks! {colleague}"
        )
        pick = "head -n 1" if self.first else "tail -n 1"
        select = f"awk -v d={iso} '$1 == d && $3 == \"{self.level}\"' {log}"

        write = f"mkdir -p reports && {select} | {pick} > {self.report}"
        read_back = f"cat {self.report}"

        def solve():
            yield ToolCall("shell__run", {"command": "ls -l logs"}, "First, see which log files there are.")
            yield ToolCall("shell__run", {"command": select},
                           f"List {target}'s {self.level} entries on {iso} (the level is the third field; "
                           "trace lines and other days do not match).")
            yield ToolCall("shell__run", {"command": write}, f"Write the {which} of them to {self.report}.")
            yield ToolCall("shell__run", {"command": read_back}, "Read the report back.")
            return (f"Done: the {which} {self.level} entry {target} logged on {iso} was at "
                    f"{wanted.ts:%H:%M:%S} (\"{wanted.msg}\"); that line is in {self.report}.")

        def writing(edit: str = "", then: str = ""):
            """The oracle with its write piped through ``edit`` (and followed by ``then``)."""
            command = write.replace(f" > {self.report}", f"{edit} > {self.report}") + then
            return perturb.change(solve, perturb.on("shell__run", command=write), command=command)

        def got(w) -> dict[str, str]:
            parts = _parts(_only_line(w, self.report))
            if parts is None:
                raise ValueError(f"{self.report} does not hold a log line")
            return parts

        stamp = (iso, f"{wanted.ts:%H:%M:%S}.{wanted.ts.microsecond // 1000:03d}")

        def timestamp(w, t):
            p = got(w)
            return (p["date"], p["time"]) == stamp, f"timestamp {p['date']} {p['time']}"

        def request_id(w, t):
            p = got(w)
            return p["req"] == wanted.req and p["service"] == target, f"[{p['service']}] req={p['req']}"

        def message(w, t):
            p = got(w)
            return (p["level"] == self.level and _norm_message(p["message"]) == _norm_message(wanted.msg),
                    f"{p['level']} {p['message']!r}")

        def verified(w, t):
            written = _only_line(w, self.report)
            calls = t.calls("shell__run", ok_only=True)
            last = max((i for i, c in enumerate(calls) if self.report in str(c.arguments.get("command", ""))
                        and re.search(r">|\btee\b|\bmv\b|\bcp\b|\bsed\s+-i", str(c.arguments.get("command", "")))),
                       default=-1)
            seen = last >= 0 and any(written in " ".join(c.result.split()) or written in c.result
                                     for c in calls[last + 1:])
            return seen, "" if seen else "the report was never read back after it was written"

        criteria = [
            Criterion("timestamp", f"the line is the {which} {self.level} entry of {iso}: its timestamp",
                      "final_state", timestamp),
            Criterion("request_id", "its service tag and request id", "final_state", request_id),
            Criterion("message", "its level and message text", "final_state", message),
            files_kit.unchanged(files, id="logs_untouched", description="the log files are unchanged"),
            Criterion("verified_report", "the report was read back after it was last written", "process",
                      verified, requires=("timestamp",)),
        ]
        perturbations = {
            "timestamp": writing(r" | sed -E 's/^([0-9-]+ [0-9:]+)\.[0-9]+/\1/'"),  # milliseconds dropped
            "request_id": writing(" | sed -E 's/req=[0-9a-f]+/req=-/'"),
            "message": writing(" | cut -d' ' -f1-6"),  # the message cut off
            "logs_untouched": writing(then=f" && sed -i '$d' {log}"),
            "verified_report": perturb.drop(solve, perturb.on("shell__run", command=read_back)),
        }
        return Task(
            id=self.task_id(seed), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=solve,
            criteria=criteria, perturbations=perturbations,
            data={"date": iso, "service": target, "line": line},
        )


@register
class LogFirstError(_QuickLookup):
    name = "log_first_error"
    description = "Copy the first ERROR line one service logged on one day (the log spans three days) into a report."
    level = "ERROR"
    first = True
    report = "reports/first_error.txt"


@register
class LogLastWarning(_QuickLookup):
    name = "log_last_warning"
    description = "Copy the last WARN line one service logged on one day (the log spans three days) into a report."
    level = "WARN"
    first = False
    report = "reports/last_warning.txt"
