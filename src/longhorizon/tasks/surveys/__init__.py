"""Survey aggregation families: many teams' response workbooks turned into one results workbook,
and the small helpers they share."""


def clamp(x: float, lo: int, hi: int) -> int:
    """``x`` rounded to a whole number within ``lo``..``hi``."""
    return max(lo, min(hi, round(x)))
