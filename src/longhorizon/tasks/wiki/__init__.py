"""Wiki upkeep task families: keeping a team wiki in step with what the team decided elsewhere."""
