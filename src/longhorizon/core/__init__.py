"""Task, criterion/grade, World, trajectory schema and the family registry (no app or policy code)."""
