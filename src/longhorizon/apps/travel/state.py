"""Travel app state: a company's travel booking tool in SQLite (``state/travel.sqlite``).

Airports, a traveller directory, flights with per-cabin fares and seats, hotels with a
nightly rate and a room count, bookings, and the company travel policy (a JSON document the
tool shows but does not enforce: judging compliance is the booker's job). Flight times are
local wall-clock ``YYYY-MM-DDTHH:MM``; ``duration_minutes`` is the scheduled flight time.
Hotel stays are ``check_in`` / ``check_out`` dates; a room is taken for every night from
check-in up to (not including) check-out. The tool's clock is ``meta.today``.
``create_travel`` is deterministic: same arguments, byte-identical file.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Mapping
from contextlib import closing
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

CABINS = ("economy", "premium_economy", "business", "first")
TIME_FMT = "%Y-%m-%dT%H:%M"
FIRST_BOOKING = 4101

SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE airports (code TEXT PRIMARY KEY, city TEXT NOT NULL, name TEXT NOT NULL);
CREATE TABLE travelers (
    email TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    department TEXT NOT NULL DEFAULT '',
    home_airport TEXT NOT NULL DEFAULT ''
);
CREATE TABLE flights (
    flight_id TEXT PRIMARY KEY,
    airline TEXT NOT NULL,
    flight_no TEXT NOT NULL,
    origin TEXT NOT NULL REFERENCES airports(code),
    destination TEXT NOT NULL REFERENCES airports(code),
    depart TEXT NOT NULL,
    arrive TEXT NOT NULL,
    duration_minutes INTEGER NOT NULL,
    stops INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE fares (
    flight_id TEXT NOT NULL REFERENCES flights(flight_id),
    cabin TEXT NOT NULL CHECK (cabin IN ('economy', 'premium_economy', 'business', 'first')),
    price REAL NOT NULL,
    seats_left INTEGER NOT NULL,
    PRIMARY KEY (flight_id, cabin)
);
CREATE TABLE hotels (
    hotel_id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    city TEXT NOT NULL,
    district TEXT NOT NULL,
    address TEXT NOT NULL,
    nightly_rate REAL NOT NULL,
    rooms INTEGER NOT NULL,
    rating REAL NOT NULL
);
CREATE TABLE bookings (
    booking_id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL UNIQUE,
    kind TEXT NOT NULL CHECK (kind IN ('flight', 'hotel')),
    traveler TEXT NOT NULL REFERENCES travelers(email),
    flight_id TEXT REFERENCES flights(flight_id),
    cabin TEXT,
    hotel_id TEXT REFERENCES hotels(hotel_id),
    check_in TEXT,
    check_out TEXT,
    price REAL NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('active', 'cancelled')),
    booked_on TEXT NOT NULL
);
CREATE INDEX flights_route ON flights(origin, destination, depart);
CREATE INDEX bookings_traveler ON bookings(traveler);
"""

_EMAIL = re.compile(r"^[A-Za-z0-9._%+'-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}$")


def parse_email(text: Any) -> str | None:
    """Lower-cased address from ``a@b.c`` or ``Name <a@b.c>``; None when it is not one."""
    if not isinstance(text, str):
        return None
    t = text.strip()
    if t.endswith(">") and "<" in t:
        t = t[t.rindex("<") + 1:-1].strip()
    t = t.lower()
    return t if _EMAIL.match(t) else None


def booking_id(seq: int) -> str:
    return f"BK-{seq}"


def nights(check_in: str, check_out: str) -> int:
    return (date.fromisoformat(check_out) - date.fromisoformat(check_in)).days


def fmt_duration(minutes: int) -> str:
    return f"{minutes // 60}h{minutes % 60:02d}m"


def create_travel(
    db_path: Path | str,
    *,
    today: str,
    policy: Mapping[str, Any],
    airports: Iterable[Mapping[str, Any]],
    travelers: Iterable[Mapping[str, Any]],
    flights: Iterable[Mapping[str, Any]] = (),
    hotels: Iterable[Mapping[str, Any]] = (),
    bookings: Iterable[Mapping[str, Any]] = (),
) -> Path:
    """Write a new travel database. Same arguments -> byte-identical file.

    ``airports``: ``{code, city, name}``. ``travelers``: ``{email, name, department?, home_airport?}``.
    ``flights``: ``{flight_id, airline, flight_no, origin, destination, depart, duration_minutes,
    arrive?, stops?, fares: {cabin: (price, seats_left)}}`` (``arrive`` defaults to depart +
    duration; give it when the time zones differ). ``hotels``: ``{hotel_id, name, city, district,
    address, nightly_rate, rooms, rating}``. ``bookings`` (already made): ``{kind: "flight",
    traveler, flight_id, cabin, price?, booked_on?, status?}`` or ``{kind: "hotel", traveler,
    hotel_id, check_in, check_out, price?, booked_on?, status?}``; they get ids BK-4101, ...
    in order, and an active flight booking takes one of the fare's seats.
    """
    db_path = Path(db_path)
    if db_path.exists():
        raise FileExistsError(f"{db_path} already exists")
    date.fromisoformat(today)
    airport_rows = [(a["code"].upper(), a["city"], a["name"]) for a in airports]
    codes = {r[0] for r in airport_rows}
    traveler_rows = []
    for t in travelers:
        email = parse_email(t["email"])
        if email is None:
            raise ValueError(f"bad traveler email {t['email']!r}")
        traveler_rows.append((email, t["name"], t.get("department", ""), t.get("home_airport", "").upper()))
    emails = {r[0] for r in traveler_rows}
    flight_rows, fare_rows = [], {}
    for f in flights:
        if f["origin"] not in codes or f["destination"] not in codes:
            raise ValueError(f"flight {f['flight_id']}: unknown airport")
        dep = datetime.strptime(f["depart"], TIME_FMT)
        arr = f.get("arrive") or (dep + timedelta(minutes=f["duration_minutes"])).strftime(TIME_FMT)
        datetime.strptime(arr, TIME_FMT)
        flight_rows.append((f["flight_id"], f["airline"], f["flight_no"], f["origin"], f["destination"],
                            f["depart"], arr, int(f["duration_minutes"]), int(f.get("stops", 0))))
        for cabin, (price, seats) in f["fares"].items():
            if cabin not in CABINS:
                raise ValueError(f"flight {f['flight_id']}: unknown cabin {cabin!r}")
            fare_rows[(f["flight_id"], cabin)] = [f["flight_id"], cabin, float(price), int(seats)]
    hotel_rows = [(h["hotel_id"], h["name"], h["city"], h["district"], h["address"], float(h["nightly_rate"]),
                   int(h["rooms"]), float(h["rating"])) for h in hotels]
    rates = {r[0]: r[5] for r in hotel_rows}
    booking_rows = []
    for seq, b in enumerate(bookings, start=FIRST_BOOKING):
        who = parse_email(b["traveler"])
        if who not in emails:
            raise ValueError(f"booking {seq}: unknown traveler {b['traveler']!r}")
        status = b.get("status", "active")
        if b["kind"] == "flight":
            fare = fare_rows[(b["flight_id"], b["cabin"])]
            price = float(b.get("price", fare[2]))
            if status == "active":
                if fare[3] < 1:
                    raise ValueError(f"booking {seq}: no seat left on {b['flight_id']} {b['cabin']}")
                fare[3] -= 1
            booking_rows.append((booking_id(seq), seq, "flight", who, b["flight_id"], b["cabin"], None, None, None,
                                 price, status, b.get("booked_on", today)))
        else:
            n = nights(b["check_in"], b["check_out"])
            price = float(b.get("price", round(rates[b["hotel_id"]] * n, 2)))
            booking_rows.append((booking_id(seq), seq, "hotel", who, None, None, b["hotel_id"], b["check_in"],
                                 b["check_out"], price, status, b.get("booked_on", today)))
    db_path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(db_path)) as conn:
        conn.execute("PRAGMA journal_mode=DELETE")
        conn.executescript(SCHEMA)
        conn.executemany("INSERT INTO meta VALUES (?, ?)", [
            ("today", today), ("policy", json.dumps(policy, ensure_ascii=False, indent=2)),
        ])
        conn.executemany("INSERT INTO airports VALUES (?,?,?)", airport_rows)
        conn.executemany("INSERT INTO travelers VALUES (?,?,?,?)", traveler_rows)
        conn.executemany("INSERT INTO flights VALUES (?,?,?,?,?,?,?,?,?)", flight_rows)
        conn.executemany("INSERT INTO fares VALUES (?,?,?,?)", [tuple(v) for v in fare_rows.values()])
        conn.executemany("INSERT INTO hotels VALUES (?,?,?,?,?,?,?,?)", hotel_rows)
        conn.executemany("INSERT INTO bookings VALUES (?,?,?,?,?,?,?,?,?,?,?,?)", booking_rows)
        conn.commit()
    return db_path


# -- readers shared by tools and graders ---------------------------------------------------

def flight_row(conn: sqlite3.Connection, flight_id: str) -> dict[str, Any] | None:
    conn.row_factory = sqlite3.Row
    r = conn.execute("SELECT * FROM flights WHERE flight_id = ?", (flight_id,)).fetchone()
    return dict(r) if r else None


def hotel_row(conn: sqlite3.Connection, hotel_id: str) -> dict[str, Any] | None:
    conn.row_factory = sqlite3.Row
    r = conn.execute("SELECT * FROM hotels WHERE hotel_id = ?", (hotel_id,)).fetchone()
    return dict(r) if r else None


def rooms_left(conn: sqlite3.Connection, hotel_id: str, check_in: str, check_out: str) -> int:
    """Rooms free on every night of the stay (the tightest night counts)."""
    total = conn.execute("SELECT rooms FROM hotels WHERE hotel_id = ?", (hotel_id,)).fetchone()[0]
    stays = conn.execute(
        "SELECT check_in, check_out FROM bookings WHERE kind = 'hotel' AND status = 'active' AND hotel_id = ? "
        "AND check_in < ? AND check_out > ?", (hotel_id, check_out, check_in)).fetchall()
    worst = 0
    night = date.fromisoformat(check_in)
    end = date.fromisoformat(check_out)
    while night < end:
        n = night.isoformat()
        worst = max(worst, sum(1 for a, b in stays if a <= n < b))
        night += timedelta(days=1)
    return max(0, total - worst)


def booking_dicts(conn: sqlite3.Connection, traveler: str | None = None) -> list[dict[str, Any]]:
    """Every booking (optionally one traveller's) with flight or hotel details, oldest first."""
    conn.row_factory = sqlite3.Row
    sql = ("SELECT b.*, t.name AS traveler_name FROM bookings b JOIN travelers t ON t.email = b.traveler")
    args: list[Any] = []
    if traveler is not None:
        sql += " WHERE b.traveler = ?"
        args.append(traveler)
    out = []
    for r in conn.execute(sql + " ORDER BY b.seq", args).fetchall():
        d: dict[str, Any] = {"booking_id": r["booking_id"], "kind": r["kind"], "status": r["status"],
                             "traveler": r["traveler"], "traveler_name": r["traveler_name"],
                             "price": r["price"], "booked_on": r["booked_on"]}
        if r["kind"] == "flight":
            f = flight_row(conn, r["flight_id"])
            d.update({"flight_id": f["flight_id"], "airline": f["airline"], "flight_no": f["flight_no"],
                      "from": f["origin"], "to": f["destination"], "depart": f["depart"], "arrive": f["arrive"],
                      "cabin": r["cabin"]})
        else:
            h = hotel_row(conn, r["hotel_id"])
            d.update({"hotel_id": h["hotel_id"], "hotel": h["name"], "city": h["city"], "district": h["district"],
                      "check_in": r["check_in"], "check_out": r["check_out"],
                      "nights": nights(r["check_in"], r["check_out"])})
        out.append(d)
    return out


def bookings(world, status: str | None = None) -> list[dict[str, Any]]:
    """Every booking in the World (``status`` 'active'/'cancelled' to filter), oldest first."""
    with closing(world.db("travel")) as conn:
        out = booking_dicts(conn)
    return [b for b in out if status is None or b["status"] == status]


def seats_left(world, flight_id: str, cabin: str) -> int | None:
    with closing(world.db("travel")) as conn:
        r = conn.execute("SELECT seats_left FROM fares WHERE flight_id = ? AND cabin = ?",
                         (flight_id, cabin)).fetchone()
    return r[0] if r else None
