"""Travel booking task families: trips booked through the `travel` app under a company policy,
and the airlines, hotel names and flight times they share."""

from __future__ import annotations

import math

AIRLINES = [("Skyline Air", "SK"), ("Blue Harbor Airways", "BH"), ("Northstar Airlines", "NS"),
            ("Pacific Crest", "PC"), ("Summit Jet", "SJ"), ("Coastal Airways", "CW"), ("Meridian Air", "MR")]
HOTEL_WORDS = ["Hotel", "Suites", "Inn", "House", "Lodge"]


def km(a, b) -> float:
    la1, lo1, la2, lo2 = map(math.radians, (a[3], a[4], b[3], b[4]))
    h = math.sin((la2 - la1) / 2) ** 2 + math.cos(la1) * math.cos(la2) * math.sin((lo2 - lo1) / 2) ** 2
    return 6371 * 2 * math.asin(math.sqrt(h))


def base_minutes(a, b) -> int:
    """Scheduled nonstop time between two cities, rounded down to 5 minutes."""
    m = int(45 + km(a, b) / 12)
    return m - m % 5
