"""Slides state: PowerPoint decks (.pptx) in the workspace, read and written with python-pptx.

A slide is described by its layout, title, bullets (the paragraphs of its body placeholder:
the subtitle on a title slide) and speaker notes. Slides are numbered from 0 in deck order.
Saving is byte-deterministic, like the docs app's (``stable_zip`` pins zip entry times;
core-property times are pinned here).
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import pptx
from pptx.enum.shapes import PP_PLACEHOLDER
from pptx.presentation import Presentation

from longhorizon.apps.docs.state import FIXED_TIME, atomic_write, package_bytes
from longhorizon.core.office_budget import office_bytes
from longhorizon.core.parse_cache import parse_once

LAYOUTS = {
    "title": "Title Slide",
    "title_and_content": "Title and Content",
    "section": "Section Header",
    "title_only": "Title Only",
}
"""Layout keys the tools accept -> layout names in the default template."""
LAYOUT_KEYS = {v: k for k, v in LAYOUTS.items()}
_TITLE_TYPES = (PP_PLACEHOLDER.TITLE, PP_PLACEHOLDER.CENTER_TITLE, PP_PLACEHOLDER.VERTICAL_TITLE)
_SKIP_TYPES = (PP_PLACEHOLDER.DATE, PP_PLACEHOLDER.FOOTER, PP_PLACEHOLDER.SLIDE_NUMBER)


# -- files ---------------------------------------------------------------------------------------


def presentation_bytes(prs: Presentation) -> bytes:
    """The .pptx bytes of ``prs``, identical for identical content."""
    props = prs.core_properties
    props.created = FIXED_TIME
    props.modified = FIXED_TIME
    props.last_printed = FIXED_TIME
    props.last_modified_by = ""
    return package_bytes(prs.part.package, prs.save)


def save_presentation(prs: Presentation, path: Path | str) -> None:
    atomic_write(path, presentation_bytes(prs))


def load_presentation(path: Path | str | BinaryIO) -> Presentation:
    """A deck from a path or an open binary file, within the office budgets
    (core/office_budget.py: ``OfficeBudgetError`` past them)."""
    return pptx.Presentation(io.BytesIO(office_bytes(path, ".pptx")))


def new_presentation() -> Presentation:
    """An empty deck from python-pptx's default template (4:3)."""
    return pptx.Presentation()


def layout_key(name: str) -> str | None:
    """A layout key from what someone typed: "title_and_content", "Title and Content", ..."""
    s = "_".join(str(name or "").strip().lower().replace("-", " ").split())
    if s in LAYOUTS:
        return s
    for key, full in LAYOUTS.items():
        if s == "_".join(full.lower().split()):
            return key
    return None


# -- slide content -------------------------------------------------------------------------------


def title_shape(slide):
    for ph in slide.placeholders:
        if ph.placeholder_format.type in _TITLE_TYPES:
            return ph
    return None


def body_shape(slide):
    """The first text placeholder that is not the title (body, subtitle, content), or None."""
    for ph in slide.placeholders:
        t = ph.placeholder_format.type
        if t in _TITLE_TYPES or t in _SKIP_TYPES or not ph.has_text_frame:
            continue
        return ph
    return None


def set_lines(shape, lines: Sequence[str]) -> None:
    """One paragraph per line in ``shape``'s text frame (an empty list clears it)."""
    tf = shape.text_frame
    tf.clear()  # leaves one empty paragraph
    for i, line in enumerate(lines):
        par = tf.paragraphs[0] if i == 0 else tf.add_paragraph()
        par.text = line


def set_notes(slide, notes: str) -> None:
    if not notes and not slide.has_notes_slide:
        return
    slide.notes_slide.notes_text_frame.text = notes


def notes_of(slide) -> str:
    if not slide.has_notes_slide:
        return ""
    tf = slide.notes_slide.notes_text_frame
    return tf.text if tf is not None else ""


def layout_of(slide) -> str:
    name = slide.slide_layout.name
    return LAYOUT_KEYS.get(name, name)


def slide_info(slide, index: int) -> dict[str, Any]:
    """Everything a reader sees on a slide: layout, title, bullets, notes, other text."""
    title = title_shape(slide)
    body = body_shape(slide)
    other = []
    taken = {s.shape_id for s in (title, body) if s is not None}
    for shape in slide.shapes:
        if shape.shape_id in taken or not shape.has_text_frame:
            continue
        if shape.is_placeholder and shape.placeholder_format.type in _SKIP_TYPES:
            continue
        if shape.text_frame.text.strip():
            other.append(shape.text_frame.text)
    info = {
        "index": index,
        "layout": layout_of(slide),
        "title": title.text_frame.text if title is not None else "",
        "bullets": [p.text for p in body.text_frame.paragraphs if p.text.strip()] if body is not None else [],
        "notes": notes_of(slide),
    }
    if other:
        info["other_text"] = other
    return info


def add_slide(prs: Presentation, title: str, bullets: Sequence[str] = (), layout: str = "title_and_content",
              notes: str = ""):
    """Append a slide with ``layout`` (a LAYOUTS key) and fill it in; returns the slide.
    ValueError when the layout is unknown or cannot hold bullets."""
    key = layout_key(layout)
    if key is None:
        raise ValueError(f"unknown layout {layout!r}")
    lay = next(ly for ly in prs.slide_layouts if ly.name == LAYOUTS[key])
    slide = prs.slides.add_slide(lay)
    t = title_shape(slide)
    if t is not None:
        t.text_frame.text = title
    body = body_shape(slide)
    if bullets and body is None:
        raise ValueError(f"layout {key!r} has no text body for bullets")
    if body is not None:
        set_lines(body, list(bullets))
    set_notes(slide, notes)
    return slide


def build_presentation(slides: Iterable[Mapping[str, Any]]) -> Presentation:
    """A deck from plain dicts ``{"title", "bullets", "layout", "notes"}``, for task families."""
    prs = new_presentation()
    for s in slides:
        add_slide(prs, s.get("title", ""), s.get("bullets", ()), s.get("layout", "title_and_content"),
                  s.get("notes", ""))
    return prs


def delete_slide(prs: Presentation, index: int) -> None:
    lst = prs.slides._sldIdLst  # noqa: SLF001
    sld = list(lst)[index]
    prs.part.drop_rel(sld.rId)
    lst.remove(sld)
    _renumber(prs)


def move_slide(prs: Presentation, index: int, new_index: int) -> None:
    lst = prs.slides._sldIdLst  # noqa: SLF001
    sld = list(lst)[index]
    lst.remove(sld)
    lst.insert(new_index, sld)
    _renumber(prs)


def _renumber(prs: Presentation) -> None:
    """Name slide parts slide1.xml, slide2.xml, ... in deck order, so a slide added later never
    collides with an old part name."""
    prs.part.rename_slide_parts([s.rId for s in prs.slides._sldIdLst])  # noqa: SLF001


# -- readers for graders --------------------------------------------------------------------------


def read_deck(path: Path | str) -> list[dict[str, Any]]:
    """Every slide of the deck at ``path`` as ``slide_info`` dicts, in order (parsed once per
    grade; each caller gets its own copy)."""
    return parse_once("pptx", path, _read_deck)


def _read_deck(path: Path | str) -> list[dict[str, Any]]:
    prs = load_presentation(path)
    return [slide_info(s, i) for i, s in enumerate(prs.slides)]
