"""Expense report task families: receipts, card statements and an expense policy."""
