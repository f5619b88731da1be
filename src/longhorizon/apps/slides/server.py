"""The `slides` app: an MCP server over the PowerPoint decks (.pptx) in the workspace.

Slides are numbered from 0 in deck order. Each slide has a layout, a title, bullets (the body
text; on a title slide, the subtitle lines) and speaker notes. Every call loads the deck,
edits it and saves it back byte-deterministically.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError
from pptx.presentation import Presentation

from longhorizon.apps.common import (
    ACT, ADD, READ, SET, AppServer, OfficeFiles, WorkspacePath, cap, server_builder,
)
from longhorizon.apps.slides.state import (
    LAYOUTS,
    body_shape,
    layout_key,
    load_presentation,
    new_presentation,
    presentation_bytes,
    set_lines,
    set_notes,
    slide_info,
    title_shape,
)
from longhorizon.apps.slides.state import add_slide as _add_slide
from longhorizon.apps.slides.state import delete_slide as _delete_slide
from longhorizon.apps.slides.state import move_slide as _move_slide

MAX_TEXT = 5_000
MAX_BULLETS = 30
MAX_LIST = 200

INSTRUCTIONS = (
    "PowerPoint decks (.pptx) in the shared workspace; paths are relative to the workspace root. "
    "Slides are numbered from 0 (the first slide is index 0). Layouts: "
    + ", ".join(f"{k} ({v})" for k, v in LAYOUTS.items())
    + ". On a 'title' slide the bullets are the subtitle lines."
)


def _json(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False)


def make_app(world):
    ws: Path = world.workspace
    srv = AppServer("slides", instructions=INSTRUCTIONS)
    lock = threading.Lock()  # sync tools run on worker threads: one deck edit at a time

    files = OfficeFiles(ws, ".pptx", "deck", load_presentation, kind="a .pptx deck",
                        missing_hint=' (paths are relative to the workspace root; files__list_dir shows what is there)')

    def pptx_path(path: str) -> WorkspacePath:
        return files.path(path, 'is not a .pptx file; this app only opens PowerPoint .pptx decks')

    def open_deck(path: str, for_read: bool = False):
        p = pptx_path(path)
        return p, files.open(p, path, for_read)

    def save(prs: Presentation, p: WorkspacePath, new: bool = False) -> None:
        try:
            data = presentation_bytes(prs)
        except ValueError as exc:
            raise ToolError(f"the text cannot be stored in a deck ({exc}); remove control characters") from None
        files.save(p, data, new=new)

    def check_text(text: Any, what: str) -> str:
        if not isinstance(text, str):
            raise ToolError(f"{what} must be a string")
        if len(text) > MAX_TEXT:
            raise ToolError(f"{what} is longer than {MAX_TEXT} characters; shorten it")
        if any(ord(c) < 32 and c not in "\t\n" for c in text):
            raise ToolError(f"{what} contains control characters; remove them")
        return text

    def check_bullets(bullets: Any) -> list[str]:
        if not isinstance(bullets, list):
            raise ToolError("bullets must be a list of strings, e.g. [\"Revenue up 4%\", \"Two new hires\"]")
        if len(bullets) > MAX_BULLETS:
            raise ToolError(f"at most {MAX_BULLETS} bullets per slide; split the content over more slides")
        out = []
        for b in bullets:
            b = check_text(b, "each bullet")
            if "\n" in b:
                raise ToolError("a bullet cannot contain a line break; give each line as its own bullet")
            out.append(b)
        return out

    def slide_index(prs: Presentation, index: Any, path: str, name: str = "index") -> int:
        n = len(prs.slides)
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < n:
            raise ToolError(f"{path!r} has slides 0-{n - 1}; there is no slide {name}={index!r} "
                            "(slides are numbered from 0)" if n else f"{path!r} has no slides yet")
        return index

    def resolve_layout(layout: str) -> str:
        key = layout_key(layout)
        if key is None:
            raise ToolError(f"unknown layout {layout!r}; use one of: {', '.join(LAYOUTS)}")
        return key

    @srv.tool(ADD)
    def create_deck(path: str) -> str:
        """Create a new, empty deck (no slides). Refuses to overwrite an existing file.

        Args:
            path: where to create it, relative to the workspace root, ending in .pptx
                (missing parent folders are created).

        Returns a confirmation. Add slides with add_slide."""
        with lock:
            p = pptx_path(path)
            if p.exists():
                raise ToolError(f"{path!r} already exists; edit it, or choose another path")
            save(new_presentation(), p, new=True)
            return f"Created {p.rel} (no slides yet)."

    @srv.tool(READ)
    def list_slides(path: str) -> str:
        """List a deck's slides: index, layout, title, how many bullets, whether it has notes.

        Args:
            path: the .pptx file, relative to the workspace root.

        Returns JSON {path, slides: [{index, layout, title, bullets, has_notes}]}.
        Use read_slide for a slide's full text."""
        with lock:
            p, prs = open_deck(path, for_read=True)
        out = []
        for i, s in enumerate(prs.slides):
            info = slide_info(s, i)
            out.append({"index": i, "layout": info["layout"], "title": info["title"],
                        "bullets": len(info["bullets"]), "has_notes": bool(info["notes"].strip())})
        return cap(_json({"path": p.rel, "slides": out[:MAX_LIST]}))

    @srv.tool(READ)
    def read_slide(path: str, index: int) -> str:
        """Read one slide in full.

        Args:
            path: the .pptx file, relative to the workspace root.
            index: the slide's index (from 0).

        Returns JSON {index, layout, title, bullets: [...], notes} (plus other_text
        for text boxes outside the title and body)."""
        with lock:
            _, prs = open_deck(path, for_read=True)
        i = slide_index(prs, index, path)
        return cap(_json(slide_info(prs.slides[i], i)))

    @srv.tool(ADD)
    def add_slide(path: str, title: str, bullets: list[str] = [], layout: str = "title_and_content",  # noqa: B006
                  notes: str = "", position: int | None = None) -> str:
        """Add a slide (at the end, or at ``position``).

        Args:
            path: the .pptx file, relative to the workspace root.
            title: the slide title.
            bullets: the body text, one string per bullet (on a "title" slide: subtitle lines).
            layout: "title_and_content" (default), "title" (title slide), "section" (section
                header) or "title_only" (no body: bullets must be empty).
            notes: speaker notes (plain text, may span lines).
            position: index the new slide should get (later slides move down); omit to append.

        Returns the new slide's index."""
        key = resolve_layout(layout)
        check_text(title, "title")
        items = check_bullets(bullets)
        check_text(notes, "notes")
        with lock:
            p, prs = open_deck(path)
            n = len(prs.slides)
            if position is not None and not 0 <= position <= n:
                raise ToolError(f"position must be between 0 and {n}, or omitted to append")
            try:
                _add_slide(prs, title, items, key, notes)
            except ValueError as exc:
                raise ToolError(f"{exc}; use layout \"title_and_content\" for a slide with bullets") from None
            index = n
            if position is not None and position != n:
                _move_slide(prs, n, position)
                index = position
            save(prs, p)
            return f"Added slide {index} ({key}) {title!r} to {p.rel}; the deck has {n + 1} slides."

    @srv.tool(SET)
    def update_slide(path: str, index: int, title: str | None = None, bullets: list[str] | None = None,
                     notes: str | None = None) -> str:
        """Change a slide's title, bullets and/or speaker notes; what is omitted stays as it is.

        Args:
            path: the .pptx file, relative to the workspace root.
            index: the slide's index (from 0).
            title: the new title.
            bullets: the new bullets, replacing all old ones ([] clears the body).
            notes: the new speaker notes, replacing the old ones ("" clears them).

        Returns the slide as it is now."""
        if title is None and bullets is None and notes is None:
            raise ToolError("give title, bullets or notes to change")
        if title is not None:
            check_text(title, "title")
        items = check_bullets(bullets) if bullets is not None else None
        if notes is not None:
            check_text(notes, "notes")
        with lock:
            p, prs = open_deck(path)
            i = slide_index(prs, index, path)
            slide = prs.slides[i]
            if title is not None:
                t = title_shape(slide)
                if t is None:
                    raise ToolError(f"slide {i} has no title placeholder")
                t.text_frame.text = title
            if items is not None:
                body = body_shape(slide)
                if body is None:
                    if items:
                        raise ToolError(f"slide {i} has no text body for bullets (layout {slide.slide_layout.name!r}); "
                                        "delete it and add a title_and_content slide instead")
                else:
                    set_lines(body, items)
            if notes is not None:
                set_notes(slide, notes)
            save(prs, p)
            return _json({"updated": p.rel, **slide_info(slide, i)})

    @srv.tool(ACT)
    def delete_slide(path: str, index: int) -> str:
        """Delete a slide; later slides move up by one.

        Args:
            path: the .pptx file, relative to the workspace root.
            index: the slide's index (from 0).

        Returns the deleted slide's title."""
        with lock:
            p, prs = open_deck(path)
            i = slide_index(prs, index, path)
            title = slide_info(prs.slides[i], i)["title"]
            _delete_slide(prs, i)
            save(prs, p)
            return f"Deleted slide {i} ({title!r}) from {p.rel}; {len(prs.slides)} slides remain."

    @srv.tool(ACT)
    def move_slide(path: str, index: int, new_index: int) -> str:
        """Move a slide to another position; the slides in between shift by one.

        Args:
            path: the .pptx file, relative to the workspace root.
            index: the slide's current index (from 0).
            new_index: the index it should have afterwards.

        Returns the new order of titles."""
        with lock:
            p, prs = open_deck(path)
            i = slide_index(prs, index, path)
            j = slide_index(prs, new_index, path, "new_index")
            if i != j:
                _move_slide(prs, i, j)
                save(prs, p)
            titles = [slide_info(s, k)["title"] for k, s in enumerate(prs.slides)]
            return f"Moved slide {i} to {j} in {p.rel}. Order now: " + _json(titles)

    return srv


build_server = server_builder(make_app)
