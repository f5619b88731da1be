"""The wiki app: a team wiki with pages, revisions, tags and links."""
