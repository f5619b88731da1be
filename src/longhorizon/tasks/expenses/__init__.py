"""Expense report task families: receipts, card statements and an expense policy, and the small
helpers they share."""


def money(x: float) -> str:
    """``1234.5`` -> ``"1,234.50"``."""
    return f"{x:,.2f}"
