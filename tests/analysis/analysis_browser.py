"""Headless Chromium for the analysis tests (installed by `make setup`: apt-get install chromium),
and a parser of the DOM it dumps after the page's scripts ran."""

from __future__ import annotations

import os
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "analysis"
"""Screenshots kept for a person to look at (git-ignored)."""

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
NO_CHROMIUM = "chromium is not installed (make setup installs it: apt-get install chromium)"
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


def chromium(*args: str) -> subprocess.CompletedProcess:
    flags = ["--headless", "--disable-gpu", "--hide-scrollbars"] + (["--no-sandbox"] if os.geteuid() == 0 else [])
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120)


class Elements(HTMLParser):
    """Every start tag with its attributes; the text inside each <table id=...>; the text of
    every element that has an id; the page's title; and the rows (attributes, cell texts) of
    every <tbody> (the browser adds one to a table written without)."""

    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.table_text: dict[str, str] = {}
        self.text: dict[str, str] = {}
        self.rows: list[tuple[dict, list[str]]] = []
        self._table: str | None = None
        self._open: list[str | None] = []  # the id (or None) of each open element
        self._tbody = False
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "table" and attrs.get("id"):
            self._table = attrs["id"]
            self.table_text[self._table] = ""
        self._in_title = tag == "title"
        if tag == "tbody":
            self._tbody = True
        elif tag == "tr" and self._tbody:
            self.rows.append((attrs, []))
        elif tag == "td" and self._tbody and self.rows:
            self.rows[-1][1].append("")
        if tag not in VOID:
            self._open.append(attrs.get("id"))
            if attrs.get("id"):
                self.text[attrs["id"]] = ""

    def handle_endtag(self, tag):
        self._in_title = False
        if tag == "table":
            self._table = None
        if tag == "tbody":
            self._tbody = False
        if tag not in VOID and self._open:
            self._open.pop()

    def handle_data(self, data):
        if self._in_title:
            self.title += data
        if self._table:
            self.table_text[self._table] += data
        for ident in self._open:
            if ident:
                self.text[ident] += data
        if self._tbody and self.rows and self.rows[-1][1]:
            self.rows[-1][1][-1] += data

    def having(self, tag: str, cls: str) -> list[dict]:
        return [a for t, a in self.tags if t == tag and cls in (a.get("class") or "").split()]


def dom(url: str) -> Elements:
    """The page's DOM after its scripts ran, parsed."""
    done = chromium("--dump-dom", url)
    assert done.returncode == 0, done.stderr[-2000:]
    el = Elements()
    el.feed(done.stdout)
    return el
