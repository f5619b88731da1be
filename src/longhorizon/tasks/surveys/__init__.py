"""Survey aggregation families: many teams' response workbooks turned into one results workbook."""
