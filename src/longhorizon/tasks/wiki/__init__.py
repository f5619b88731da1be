"""Wiki upkeep task families: keeping a team wiki in step with what the team decided elsewhere,
and the page lookups their graders share."""

from __future__ import annotations

from longhorizon.apps.wiki import state as wiki


def pages_by_id(world) -> dict[int, dict]:
    """The wiki's pages by id (ids survive renames; slugs do not)."""
    return {p["id"]: p for p in wiki.pages(world).values()}


def page_now(world, ids: dict[str, int], slug: str) -> dict:
    """The page seeded as ``slug`` (``ids``: seeded slug -> page id), under whatever slug it has now;
    LookupError if it is gone."""
    p = pages_by_id(world).get(ids[slug])
    if p is None:
        raise LookupError(f"page {slug} is gone")
    return p
