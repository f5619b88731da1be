"""Log analysis: a per-service error summary for one day from raw, rotated service logs.

The traps are the ones real logs set: part of the day sits in a gzipped rotated file, stack
traces span several lines (and mention "Error"), INFO lines quote upstream ERRORs, the
evening before has a different dominant error, last year's archive has the same month and
day, and some request ids fail exactly twice or have their third failure on another day.
The expert does it with the shell (ls, head, zcat, awk, sort, uniq) and writes the report.
"""

from __future__ import annotations

import calendar
import csv
import gzip
import io
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from pathlib import Path

from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, TaskFamily, ToolCall
from longhorizon.tasks.common import norm_path, output_text, rng_and_faker, sha256, write_files
from longhorizon.tasks.kit import files as files_kit
from longhorizon.tasks.phrasing import in_some_order, phrasing_rng, say
from longhorizon.tasks.registry import register

SUMMARY = "reports/error_summary.csv"
REPEATS = "reports/repeat_failures.txt"
COLUMNS = ("service", "error_count", "top_error")

# service -> (stack trace style, error messages). No message contains "]" (the service tag
# ends there); some contain commas, so the CSV must be quoted properly.
SERVICES: dict[str, tuple[str, list[str]]] = {
    "api-gateway": ("java", [
        "Upstream timed out after 30000 ms",
        "No healthy upstream for route /v2/orders",
        "Rate limiter backend unreachable, rejecting request",
        "TLS handshake with upstream failed",
        "Request body exceeds 10 MB limit",
    ]),
    "auth": ("python", [
        "Token signature verification failed",
        "LDAP bind failed: connection reset by peer",
        "Session store unavailable, denying login",
        "Refresh token reuse detected",
        "MFA provider returned HTTP 500",
    ]),
    "billing": ("java", [
        "Card authorization failed: issuer unavailable",
        "Ledger write conflict, transaction rolled back",
        "Invoice PDF rendering failed",
        "Currency rate lookup returned HTTP 503",
        "Duplicate charge guard tripped",
    ]),
    "inventory": ("python", [
        "Stock reservation deadlock detected",
        "Warehouse sync failed: SFTP timeout",
        "Negative stock after adjustment, SKU locked",
        "Cache invalidation message dropped",
        "Reorder job crashed",
    ]),
    "notifications": ("python", [
        "SMTP relay refused connection",
        "Push provider rejected token: unregistered device",
        "Template variable missing: first_name",
        "Webhook delivery failed after 5 attempts",
        "SMS quota exceeded, message dropped",
    ]),
    "orders": ("java", [
        "Order state transition rejected: PAID -> CREATED",
        "Inventory reservation call failed",
        "Optimistic lock failure on order row",
        "Payment callback signature mismatch",
        "Order export to ERP timed out",
    ]),
    "search": ("java", [
        "Index shard unavailable: products_3",
        "Query parse failure, falling back to match_all",
        "Reindex batch rejected: mapping conflict",
        "Autocomplete circuit opened after cache miss storm",
        "Search cluster returned HTTP 429",
    ]),
    "shipping": ("python", [
        "Carrier API rejected address: missing postcode",
        "Label printer queue full",
        "Rate quote timed out for carrier DHL",
        "Tracking webhook payload is not valid JSON",
        "Customs declaration generation failed",
    ]),
}

INFO = [
    "GET /health 200 in {n} ms", "Handled request in {n} ms", "Cache hit ratio {p}%",
    "Worker pool resized to {k} workers", "Retry succeeded after upstream ERROR 502",
    "Config reloaded from /etc/{svc}/app.yaml", "Recovered: previous ERROR state cleared",
]
WARN = [
    "Slow query took {n} ms", "Retrying request (attempt {a}/3)", "Connection pool at {p}% capacity",
    "Upstream returned ERROR 503, will retry", "Deprecated API version v1 called",
]
DEBUG = ["error_budget remaining={p}%", "span exported id={hex}", "feature flag new_checkout={flag}"]
EXCEPTIONS = {
    "java": ["java.lang.IllegalStateException", "java.io.IOException", "com.acme.common.ServiceException"],
    "python": ["app.errors.BackendError", "ConnectionError", "TimeoutError", "ValueError"],
}


@dataclass
class Entry:
    ts: datetime
    level: str
    svc: str
    req: str
    msg: str
    trace: list[str] = field(default_factory=list)

    def render(self) -> str:
        head = (f"{self.ts:%Y-%m-%d %H:%M:%S}.{self.ts.microsecond // 1000:03d} "
                f"{self.level:<5} [{self.svc}] req={self.req} {self.msg}")
        return "\n".join([head, *self.trace])


def _norm_header(h: str) -> str:
    return re.sub(r"[\s\-]+", "_", h.strip().strip('"').strip().lower())


def _norm_service(s: str) -> str:
    return s.strip().strip("[]").strip().lower()


def _norm_message(m: str) -> str:
    return " ".join(m.strip().strip("\"'").split()).rstrip(".").casefold()


def _as_int(s: str) -> int | None:
    try:
        v = float(s.strip())
    except ValueError:
        return None
    return int(v) if v.is_integer() else None


def _regular(world, rel: str) -> Path:
    """A workspace file the grader may open: regular and not a link. The shell can leave FIFOs
    (opening one blocks) and symlinks to host paths (reading one would leak them into notes)."""
    p = world.file(rel)
    if p.is_symlink() or not p.is_file():
        raise ValueError(f"{rel} is missing or not a regular file")
    return p


def read_summary(world) -> list[dict[str, str]]:
    """The agent's CSV as rows keyed by column; raises (-> criterion fails) if unreadable."""
    text = output_text(_regular(world, SUMMARY), encoding="utf-8-sig")
    rows = [r for r in csv.reader(io.StringIO(text)) if any(c.strip() for c in r)]
    if not rows:
        raise ValueError("the CSV is empty")
    header = [_norm_header(h) for h in rows[0]]
    if sorted(header) != sorted(COLUMNS):
        raise ValueError(f"columns are {rows[0]}, expected {', '.join(COLUMNS)}")
    idx = {h: i for i, h in enumerate(header)}
    return [{h: (r[idx[h]].strip() if idx[h] < len(r) else "") for h in COLUMNS} for r in rows[1:]]


def _trace(rng, style: str, svc: str, msg: str) -> list[str]:
    exc = rng.choice(EXCEPTIONS[style])
    mod = svc.replace("-", "")
    if style == "java":
        cls = rng.sample(["Handler", "Router", "Client", "Repository", "Worker"], 3)
        lines = [f"{exc}: {msg}"]
        lines += [f"    at com.acme.{mod}.{c}.{rng.choice(['process', 'call', 'run', 'apply'])}"
                  f"({c}.java:{rng.randint(20, 400)})" for c in cls]
        if rng.random() < 0.5:
            lines.append(f"    ... {rng.randint(5, 40)} more")
        lines.append(rng.choice([
            "Caused by: java.net.SocketTimeoutException: Read timed out",
            f"Caused by: com.acme.common.UpstreamException: upstream ERROR {rng.choice([500, 502, 503])}",
        ]))
        return lines
    return [
        "Traceback (most recent call last):",
        f'  File "/srv/{svc}/app/handlers.py", line {rng.randint(20, 300)}, in handle',
        "    return backend.call(payload)",
        f'  File "/srv/{svc}/app/backend.py", line {rng.randint(20, 300)}, in call',
        f'    raise {exc.rsplit(".", 1)[-1]}(f"ERROR {{status}} from {{host}}")',
        f"{exc}: {msg}",
    ]


def _filler(rng, svc: str, ts: datetime, req: str) -> Entry:
    level = rng.choices(["INFO", "WARN", "DEBUG"], weights=[6, 3, 2])[0]
    tmpl = rng.choice({"INFO": INFO, "WARN": WARN, "DEBUG": DEBUG}[level])
    msg = tmpl.format(n=rng.randint(3, 4000), p=rng.randint(1, 99), k=rng.randint(2, 64), svc=svc,
                      a=rng.randint(1, 3), hex=f"{rng.getrandbits(64):016x}", flag=rng.choice(["on", "off"]))
    return Entry(ts, level, svc, req, msg)


def _at(day: date, lo: timedelta, hi: timedelta, rng) -> datetime:
    """A random millisecond timestamp in [day+lo, day+hi)."""
    ms = rng.randrange(int(lo.total_seconds() * 1000), int(hi.total_seconds() * 1000))
    return datetime.combine(day, time()) + timedelta(milliseconds=ms)


H = timedelta(hours=1)


@register
class LogErrorSummary(TaskFamily):
    name = "log_error_summary"
    category = "log analysis"
    apps = ("shell", "files")
    description = ("Per-service ERROR counts and top error message for one day, plus request ids that "
                   "failed 3+ times, from rotated multi-line service logs.")

    levels = 3
    """1: one service (the rotated one: one repeat id, and the pair whose third failure is on
    another day); 2: two services; 3 (default): four or five. Every level keeps the rotated .gz,
    the evening before, stack traces and last year's archive."""
    toolsets = {1: ("files__write_file", "shell__run")}

    def generate(self, seed: int, level: int | None = None) -> Task:
        level = self.level_of(level)
        rng, fake = rng_and_faker(seed, self.name)
        day = date(2024, 1, 10) + timedelta(days=rng.randrange(700))
        if (day.month, day.day) == (2, 29):
            day -= timedelta(days=1)
        prev, nxt = day - timedelta(days=1), day + timedelta(days=1)
        services = sorted(rng.sample(sorted(SERVICES), rng.randint(4, 5)))
        if level < self.levels:  # the same draw, then fewer services (the later draws differ)
            services = services[:level]
        rotated = rng.choice(services)
        rest = [s for s in services if s != rotated]
        midnight = rng.choice(rest) if rest and rng.random() < 0.5 else None
        archived = sorted(rng.sample(services, min(2, len(services))))
        colleague = fake.first_name()

        used_ids: set[str] = set()

        def new_id() -> str:
            while True:
                rid = f"{rng.getrandbits(32):08x}"
                if rid not in used_ids:
                    used_ids.add(rid)
                    return rid

        # -- the day's errors: three messages per service, a unique most frequent one ----------
        slots: list[list] = []  # [svc, msg, req, early]
        ranked: dict[str, list[str]] = {}
        for svc in services:
            msgs = rng.sample(SERVICES[svc][1], 3)
            top = rng.randint(5, 8)
            second = rng.randint(2, top - 1)
            third = rng.randint(1, second)
            ranked[svc] = msgs
            svc_slots = [[svc, m, None, False] for m, n in zip(msgs, (top, second, third)) for _ in range(n)]
            rng.shuffle(svc_slots)
            slots += svc_slots

        # -- request ids: repeats (>=3), exact pairs, a pair whose third failure is another day --
        free = list(range(len(slots)))
        rng.shuffle(free)
        rotated_slot = next(i for i in free if slots[i][0] == rotated)
        free.remove(rotated_slot)
        slots[rotated_slot][3] = True  # logged before the rotation: only in the .gz
        repeat_ids = [new_id() for _ in range(rng.randint(2, 3) if level > 1 else 1)]
        pair_ids = [new_id() for _ in range(2 if level > 1 else 0)]  # one service's slots: the trap pair only
        trap_id = new_id()
        for k, rid in enumerate(repeat_ids):
            n = rng.choice([3, 3, 4, 5])
            if k == 0:
                slots[rotated_slot][2] = rid
                n -= 1
            for _ in range(n):
                slots[free.pop()][2] = rid
        for rid in pair_ids + [trap_id]:
            for _ in range(2):
                slots[free.pop()][2] = rid
        for i in free:
            slots[i][2] = "-" if rng.random() < 0.35 else new_id()

        rotate_at = timedelta(hours=rng.randint(9, 13), minutes=rng.randint(0, 59))
        entries: dict[str, list[Entry]] = {s: [] for s in services}
        known_ids = repeat_ids + pair_ids + [trap_id]
        for svc, msg, req, early in slots:
            if svc == rotated and not early:
                early = rng.random() < 0.35
            if svc == rotated:
                ts = _at(day, 0.1 * H, rotate_at, rng) if early else _at(day, rotate_at, 23.9 * H, rng)
            else:
                ts = _at(day, 0 * H, 24 * H, rng)
            trace = _trace(rng, SERVICES[svc][0], svc, msg) if rng.random() < 0.5 else []
            entries[svc].append(Entry(ts, "ERROR", svc, req, msg, trace))

        for svc in services:
            style, pool = SERVICES[svc]
            for _ in range(rng.randint(25, 40)):  # the day's ordinary traffic
                r = rng.random()
                req = rng.choice(known_ids) if r < 0.2 else "-" if r < 0.45 else new_id()
                entries[svc].append(_filler(rng, svc, _at(day, 0 * H, 24 * H, rng), req))
            # the evening before: a different error dominates (counting without the date is wrong)
            flood = ranked[svc][1]
            for _ in range(rng.randint(8, 15)):
                entries[svc].append(_filler(rng, svc, _at(prev, 18 * H, 24 * H, rng), new_id()))
            for _ in range(rng.randint(6, 9)):
                entries[svc].append(Entry(_at(prev, 18 * H, 24 * H, rng), "ERROR", svc, new_id(), flood,
                                          _trace(rng, style, svc, flood) if rng.random() < 0.4 else []))
            # the small hours after
            for _ in range(rng.randint(3, 8)):
                entries[svc].append(_filler(rng, svc, _at(nxt, 0 * H, 2.5 * H, rng), new_id()))
            for _ in range(rng.randint(0, 2)):
                entries[svc].append(Entry(_at(nxt, 0 * H, 2.5 * H, rng), "ERROR", svc, new_id(),
                                          rng.choice(pool)))
        trap_svc = rng.choice(services)
        trap_day = rng.choice([prev, nxt])
        trap_ts = _at(trap_day, 18 * H, 23 * H, rng) if trap_day == prev else _at(trap_day, 0 * H, 2 * H, rng)
        entries[trap_svc].append(Entry(trap_ts, "ERROR", trap_svc, trap_id, rng.choice(SERVICES[trap_svc][1])))

        # -- files -------------------------------------------------------------------------------
        def text_of(es: list[Entry]) -> bytes:
            es = sorted(es, key=lambda e: e.ts)
            return "".join(e.render() + "\n" for e in es).encode()

        def gz(data: bytes, when: datetime) -> bytes:
            return gzip.compress(data, compresslevel=6, mtime=calendar.timegm(when.timetuple()))

        files: dict[str, bytes] = {}
        cut = datetime.combine(day, time()) + rotate_at
        midnight_cut = datetime.combine(day, time())
        for svc in services:
            es = entries[svc]
            split_at = cut if svc == rotated else midnight_cut if svc == midnight else None
            if split_at:
                files[f"logs/{svc}.log.1.gz"] = gz(text_of([e for e in es if e.ts < split_at]), split_at)
                es = [e for e in es if e.ts >= split_at]
            files[f"logs/{svc}.log"] = text_of(es)
        old_day = day.replace(year=day.year - 1)
        for svc in archived:  # last year, same month and day
            style, pool = SERVICES[svc]
            old = [_filler(rng, svc, _at(old_day, 0 * H, 24 * H, rng), new_id()) for _ in range(rng.randint(15, 30))]
            burst = rng.choice(pool)
            old += [Entry(_at(old_day, 0 * H, 24 * H, rng), "ERROR", svc, new_id(), burst)
                    for _ in range(rng.randint(10, 20))]
            files[f"logs/archive/{svc}-{old_day.year}.log.gz"] = gz(
                text_of(old), datetime.combine(old_day + timedelta(days=1), time()))
        order = sorted(files)
        log_hashes = {p: sha256(b) for p, b in files.items()}

        # -- ground truth, from the entries themselves ---------------------------------------------
        day_errors = [e for svc in services for e in entries[svc] if e.level == "ERROR" and e.ts.date() == day]
        counts = Counter(e.svc for e in day_errors)
        tops: dict[str, str] = {}
        for svc in services:
            (m1, c1), (_, c2) = Counter(e.msg for e in day_errors if e.svc == svc).most_common(2)
            assert c1 > c2, "most frequent message must be unique"
            tops[svc] = m1
        per_req = Counter(e.req for e in day_errors if e.req != "-")
        repeats = sorted(r for r, n in per_req.items() if n >= 3)
        assert repeats == sorted(repeat_ids) and all(per_req[r] == 2 for r in pair_ids + [trap_id])

        def build(root: Path) -> None:
            write_files(root / "workspace", {rel: files[rel] for rel in order})

        weekday = day.strftime("%A")
        when = f"{weekday} {day.day} {day:%B %Y} ({day.isoformat()})"
        w = phrasing_rng(self.name, seed)
        ask = say(w, f"Hi! Could you put together an error summary for {when}?",
                  f"Hello, I need an error summary for {when}; could you put it together?",
                  f"Hi there, can you write up an error summary for {when}?")
        logs = say(w, "The service logs are in logs/; some of them were rotated during the day, so the older part "
                      "sits next to them as a .gz file.",
                   "You'll find the service logs in logs/. Some were rotated during the day, which means the older "
                   "part of those sits next to them as a .gz file.",
                   "Some of the service logs in logs/ were rotated during the day: their older part sits next to "
                   "them as a .gz file.")
        columns = say(w, f"I need {SUMMARY} with one row per service and the columns service, error_count, "
                         f"top_error: how many ERROR entries the service logged on that date, and its most frequent "
                         f"error message (just the message text of the ERROR line, without timestamp, level, service "
                         f"tag or request id).",
                      f"The summary goes in {SUMMARY}: one row per service, with the columns service, error_count, "
                      f"top_error. error_count is how many ERROR entries the service logged on that date; top_error "
                      f"is its most frequent error message, just the message text of the ERROR line (no timestamp, "
                      f"level, service tag or request id).",
                      f"Please write {SUMMARY} with the columns service, error_count, top_error and one row per "
                      f"service, giving the number of ERROR entries the service logged on that date and its most "
                      f"frequent error message (only the message text of the ERROR line: leave out the timestamp, "
                      f"level, service tag and request id).")
        traces = say(w, "Stack traces belong to the entry above them and don't count separately.",
                     "A stack trace is part of the entry above it and doesn't count on its own.",
                     "Don't count stack traces separately: they belong to the entry above them.")
        repeat_list = say(
            w, f"Also put every request id that had 3 or more ERROR entries that day, across all services, into "
               f"{REPEATS}, one id per line.",
            f"Then, in {REPEATS}, list one per line every request id with 3 or more ERROR entries that day, counted "
            f"across all services.",
            f"{REPEATS} should hold every request id that had 3 or more ERROR entries that day across all services, "
            f"one id per line.")
        limits = in_some_order(w, [
            say(w, "Please don't change anything in logs/ (the on-call team reads those).",
                "The on-call team reads logs/, so leave everything in it unchanged.",
                "Nothing in logs/ may change: the on-call team reads those."),
            say(w, "Don't leave scratch files in the workspace, just the two reports.",
                "Apart from the two reports, leave no scratch files in the workspace.",
                "The workspace should end up with just the two reports, no scratch files."),
        ])
        verify = say(w, "Once the CSV is written, read it back to make sure it came out right.",
                     "When the CSV is written, please read it back and check it came out right.",
                     "After writing the CSV, read it back to confirm it came out right.")
        instruction = " ".join([ask, logs, columns, traces, repeat_list, *limits, verify,
                                say(w, f"Thanks! {colleague}", f"Thank you, {colleague}", f"Cheers, {colleague}")])

        # -- the expert's workflow, and its deliberately flawed variants ---------------------------
        all_logs = "{ zcat logs/*.gz; cat logs/*.log; }"
        errors_of_day = f"awk -v d={day.isoformat()} '$1 == d && $3 == \"ERROR\"'"

        def solve(*, source: str = all_logs, gunzip_first: bool = False, scratch: bool = False,
                  message_rank: int = 0, threshold: int = 3, drop_smallest: bool = False,
                  delimiter: str = ",", verify: bool = True):
            yield ToolCall("shell__run", {"command": "ls -laR logs"},
                           "First, see which log files there are, including rotated and archived ones.")
            if level > 1:  # (one service: its counts show the format)
                yield ToolCall("shell__run", {"command": f"head -n 15 logs/{services[0]}.log"},
                               "Look at the line format before parsing anything.")
            if level == self.levels:  # many compressed files: which of them hold part of the day
                yield ToolCall("shell__run", {"command": (
                    "for f in logs/*.gz logs/archive/*.gz; do n=$(zcat \"$f\" | grep -cE '^[0-9]{4}-'); "
                    "echo \"== $f ($n entries)\"; zcat \"$f\" | grep -E '^[0-9]{4}-' | sed -n '1p;$p' | cut -c1-23; "
                    "done")}, "Check which dates each compressed file covers, to know which ones hold part of the day.")
            if gunzip_first:
                yield ToolCall("shell__run", {"command": "gunzip logs/*.gz && ls logs"},
                               "Decompress the rotated logs so they are easier to read.")
                source = "cat logs/*.log.1 logs/*.log"
            counts_cmd = f"{source} | {errors_of_day} | awk '{{print $4}}' | sort | uniq -c"
            if scratch:
                keep = f"{source} | {errors_of_day} > day_errors.txt; wc -l day_errors.txt"
                yield ToolCall("shell__run", {"command": keep}, "Keep the day's ERROR lines in a working file.")
                counts_cmd = "awk '{print $4}' day_errors.txt | sort | uniq -c"
            out = yield ToolCall("shell__run", {"command": counts_cmd},
                                 "Count the day's ERROR entries per service (stack trace lines have no timestamp).")
            got: dict[str, int] = {}
            for line in out.splitlines():
                m = re.match(r"^\s*(\d+)\s+\[(.+)\]\s*$", line)
                if m:
                    got[m.group(2)] = int(m.group(1))
            msg_cmd = (f"{source} | {errors_of_day} | awk '{{s = $4; sub(/^.*\\] req=[^ ]* /, \"\"); "
                       f"print s \"\\t\" $0}}' | sort | uniq -c | sort -k1,1nr")
            out = yield ToolCall("shell__run", {"command": msg_cmd},
                                 "Rank each service's error messages by how often they occur that day.")
            by_svc: dict[str, list[tuple[int, str]]] = {}
            for line in out.splitlines():
                m = re.match(r"^\s*(\d+) \[(.+?)\]\t(.*)$", line)
                if m:
                    by_svc.setdefault(m.group(2), []).append((int(m.group(1)), m.group(3)))
            for svc in by_svc:
                by_svc[svc].sort(key=lambda t: -t[0])
                if sum(n for n, _ in by_svc[svc]) != got.get(svc):
                    raise RuntimeError(f"message counts for {svc} do not add up to its error count")
            out = yield ToolCall("shell__run", {"command": (
                f"{source} | {errors_of_day} | awk '$5 != \"req=-\" {{print substr($5, 5)}}' "
                "| sort | uniq -c | sort -k1,1nr | awk '$1 >= 2'")},
                "Find request ids with several failures that day, across services.")
            ids = sorted(m.group(2) for m in re.finditer(r"^\s*(\d+) (\S+)$", out, re.M)
                         if int(m.group(1)) >= threshold)
            rows = sorted(got.items())
            if drop_smallest:
                rows.remove(min(rows, key=lambda r: r[1]))
            buf = io.StringIO()
            w = csv.writer(buf, delimiter=delimiter, lineterminator="\n")
            w.writerow(COLUMNS)
            for svc, n in rows:
                ranks = by_svc[svc]
                w.writerow([svc, n, ranks[min(message_rank, len(ranks) - 1)][1]])
            yield ToolCall("files__write_file", {"path": SUMMARY, "content": buf.getvalue()},
                           "Write the summary CSV (the csv writer quotes messages containing commas).")
            yield ToolCall("files__write_file", {"path": REPEATS, "content": "".join(f"{i}\n" for i in ids)},
                           "Write the request ids that failed three or more times.")
            if verify:
                yield ToolCall("shell__run", {"command": f"cat {SUMMARY}; echo ---; cat {REPEATS}; echo ---; "
                                                         "find . -type f -not -path './logs/*' | sort"},
                               "Read both reports back and check nothing else was left behind.")
            top_svc = max(rows, key=lambda r: r[1])[0] if rows else "none"  # (the flaw that drops one service)
            return (f"Done: {SUMMARY} has {len(rows)} services ({top_svc} logged the most errors on "
                    f"{day.isoformat()}), and {REPEATS} lists {len(ids)} request ids that failed 3+ times.")

        def variant(**kw):
            return lambda: solve(**kw)

        # -- criteria --------------------------------------------------------------------------------
        def rows_by_service(w) -> dict[str, dict[str, str]]:
            out: dict[str, dict[str, str]] = {}
            for r in read_summary(w):
                out.setdefault(_norm_service(r["service"]), r)
            return out

        def summary_csv(w, t):
            rows = read_summary(w)
            return bool(rows), "" if rows else "no data rows"

        def summary_services(w, t):
            got = sorted(_norm_service(r["service"]) for r in read_summary(w))
            return got == services, f"services {got}, expected {services}"

        def error_counts(w, t):
            rows = rows_by_service(w)
            bad = {s: rows[s]["error_count"] if s in rows else None for s in services
                   if s not in rows or _as_int(rows[s]["error_count"]) != counts[s]}
            return not bad, f"wrong or missing counts: {bad}" if bad else ""

        def top_errors(w, t):
            rows = rows_by_service(w)
            bad = {s: rows[s]["top_error"] if s in rows else None for s in services
                   if s not in rows or _norm_message(rows[s]["top_error"]) != _norm_message(tops[s])}
            return not bad, f"wrong or missing top errors: {bad}" if bad else ""

        def repeat_request_ids(w, t):
            text = output_text(_regular(w, REPEATS), encoding="utf-8-sig")
            lines = [ln.strip().lower() for ln in text.splitlines()]
            got = sorted({ln.removeprefix("req=").strip() for ln in lines if ln})
            return got == repeats, f"listed {got}"

        def verified_report(w, t):
            rows = read_summary(w)
            last_write = -1
            for i, c in enumerate(t.tool_calls):
                if c.is_error:
                    continue
                args = c.arguments if isinstance(c.arguments, dict) else {}
                if c.app == "files" and c.tool in ("write_file", "move", "copy"):
                    target = norm_path(args.get("path") or args.get("dst"))
                    if target in (SUMMARY, "reports"):
                        last_write = i
                elif c.name == "shell__run" and "error_summary" in str(args.get("command", "")):
                    if re.search(r">|\btee\b|\bmv\b|\bcp\b|\bsed\s+-i|open\(|write", args["command"]):
                        last_write = i

            def shows(c) -> bool:
                return not c.is_error and all(r["service"] in c.result and r["error_count"] in c.result for r in rows)

            seen = bool(rows) and any(shows(c) for c in t.tool_calls[max(last_write, 0):])
            return seen, "" if seen else "the final CSV was never read back after it was written"

        criteria = [
            Criterion("summary_csv", f"{SUMMARY} is a CSV with the columns {', '.join(COLUMNS)}",
                      "final_state", summary_csv, requires=("error_counts",)),
            Criterion("summary_services", "one row per service in logs/, no others", "final_state", summary_services,
                      requires=("error_counts",)),
            Criterion("error_counts", f"each service's ERROR count on {day.isoformat()} (rotated part included, "
                      "stack traces and other days excluded)", "final_state", error_counts, 2.0),
            Criterion("top_errors", "each service's most frequent error message that day", "final_state",
                      top_errors, 2.0),
            Criterion("repeat_request_ids", f"{REPEATS} lists exactly the request ids with 3+ ERROR entries that day",
                      "final_state", repeat_request_ids, 2.0),
            files_kit.unchanged(files, id="logs_untouched",
                                description="every log file (rotated and archived ones too) is unchanged"),
            files_kit.only_created(files, allowed=[SUMMARY, REPEATS], id="workspace_clean",
                                   description="no files left besides the logs and the two reports"),
            Criterion("verified_report", "the CSV was read back after it was last written", "process",
                      verified_report, requires=("error_counts",)),
        ]
        perturbations = {
            "summary_csv": variant(delimiter=";"),
            "summary_services": variant(drop_smallest=True),
            "error_counts": variant(source="cat logs/*.log"),
            "top_errors": variant(message_rank=1),
            "repeat_request_ids": variant(threshold=2),
            "logs_untouched": variant(gunzip_first=True),
            "workspace_clean": variant(scratch=True),
            "verified_report": variant(verify=False),
        }
        return Task(
            id=self.task_id(seed, level), family=self.name, category=self.category, split=self.split_of(seed),
            seed=seed, instruction=instruction, apps=self.apps, build=build, oracle=variant(),
            criteria=criteria, perturbations=perturbations,
            data={"date": day.isoformat(), "services": services, "error_counts": dict(counts),
                  "top_errors": tops, "repeat_request_ids": repeats, "rotated": rotated,
                  "rotated_at_midnight": midnight, "log_hashes": log_hashes},
        )

