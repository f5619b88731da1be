"""The slides app: PowerPoint decks (.pptx) in the workspace, slide by slide."""
