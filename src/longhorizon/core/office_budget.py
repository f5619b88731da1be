"""What an office file (.xlsx, .docx, .pptx: a zip of XML parts) may unpack to, checked before
any parser is handed it.

A 70 KB zip can unpack to gigabytes, and a parser's time and memory grow with the XML it reads
(openpyxl keeps an object per cell, lxml a node per element and attribute), in C calls that
hold the GIL: no timeout can stop them once started. So every office loader, in the apps'
tools and in the graders' readers, takes its bytes from ``office_bytes``, which refuses a file
whose zip records or contents pass its ``Budget``:

- the file itself, and its zip directory (which ``zipfile`` reads in full on opening);
- the number of members, each member's and all members' declared unpacked size, and each big
  member's compression ratio (all from the directory, before anything is decompressed).
  ``zipfile`` never returns more of a member than its record declares (a longer stream fails
  its CRC check), so the declared sizes bound what the parsers can read;
- compression other than deflate (bzip2 and lzma expand without a bound per call);
- the markup in the XML parts (each ``<`` or ``=`` a possible element or attribute), XML in
  another encoding than UTF-8 (where those bytes would not be counted), and any DOCTYPE
  (entity expansion: office parts never declare one).

Budgets sit far above every suite file (measured: at most 143 KB unpacked, 75 members, ratio
12, 18,000 markup bytes) and low enough that the worst file within them parses in a few
seconds and a few hundred MiB (benchmarks/hostile_office.py).
"""

from __future__ import annotations

import io
import os
import re
import stat
import struct
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

MiB = 1 << 20


@dataclass(frozen=True)
class Budget:
    """Limits for one kind of office file."""

    file_bytes: int = 16 * MiB
    directory_bytes: int = MiB // 2
    members: int = 2_000
    unpacked_bytes: int = 32 * MiB
    ratio: int = 100
    """Largest unpacked:packed ratio of a member over ``ratio_from`` bytes (text XML: about 10)."""
    ratio_from: int = MiB
    markup: int = 250_000
    """``<`` and ``=`` bytes in all XML parts together."""


BUDGETS = {".xlsx": Budget(), ".docx": Budget(), ".pptx": Budget()}
"""Per kind (the same today: at the markup budget, the worst file of each kind takes a few
seconds and under 200 MiB to read; python-docx's own template alone holds 53,000)."""


class OfficeBudgetError(ValueError):
    """An office file over its budget: ``what`` says which limit, the text names the file too."""

    def __init__(self, what: str, name: str | None = None):
        super().__init__(what, name)
        self.what, self.name = what, name

    def __str__(self) -> str:
        return self.named(self.name) if self.name is not None else self.what

    def named(self, name: str) -> str:
        """The message for ``name`` (how the reader spelled the file)."""
        return f"{name!r} {self.what}"


@dataclass(frozen=True)
class Unpacked:
    """What a checked file holds: its members, their unpacked bytes and markup."""

    members: int
    unpacked_bytes: int
    markup: int


Inspect = Callable[[str, bytes], None]
"""A loader's own check of one member's unpacked bytes (UTF-8 XML or binary); raises
``OfficeBudgetError`` to refuse the file."""


def office_bytes(source: Path | str | BinaryIO, suffix: str, *, name: str | None = None,
                 inspect: Inspect | None = None) -> bytes:
    """The bytes of the office file ``source`` (a path, or an open binary file), read at most
    up to its budget and checked (``check_package``); what a loader then parses.

    A path is opened without following a link at its end and without blocking on a FIFO;
    anything but a regular file is refused (OSError)."""
    shown = _name(source, name)
    data = read_office(source, suffix, name=shown)
    check_package(data, suffix, name=shown, inspect=inspect)
    return data


def read_office(source: Path | str | BinaryIO, suffix: str, *, name: str | None = None) -> bytes:
    """``source``'s bytes, read only up to the file budget for ``suffix`` (not checked further:
    for a reader whose loader calls ``office_bytes`` on them)."""
    return read_capped(source, BUDGETS[suffix.lower()].file_bytes, _name(source, name))


def _name(source, name: str | None) -> str:
    if name is not None:
        return name
    return "the file" if hasattr(source, "read") else Path(source).name


def read_capped(source: Path | str | BinaryIO, limit: int, name: str) -> bytes:
    """All of ``source``'s bytes, refusing past ``limit`` without reading further."""
    if hasattr(source, "read"):
        data = source.read(limit + 1)
    else:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise IsADirectoryError(f"{name!r} is not a regular file") if stat.S_ISDIR(st.st_mode) \
                    else OSError(f"{name!r} is not a regular file")
            if st.st_size > limit:
                raise _over(name, f"is {st.st_size / MiB:.1f} MiB, more than the {_mib(limit)} an office file may be here")
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read(limit + 1)
        finally:
            os.close(fd)
    if len(data) > limit:
        raise _over(name, f"is larger than the {_mib(limit)} an office file may be here")
    return data


_EOCD = b"PK\x05\x06"
_EOCD64_LOCATOR = b"PK\x06\x07"
_EOCD_FORMAT = "<4s4H2LH"  # signature, disk, disk of directory, entries here, entries, size, offset, comment
_EOCD_SIZE = struct.calcsize(_EOCD_FORMAT)
_XML_DECL = re.compile(rb"\s*<\?xml[^>]*?encoding\s*=\s*[\"']([^\"']*)[\"']", re.IGNORECASE)
_UTF8_NAMES = {b"utf-8", b"utf8", b"us-ascii", b"ascii"}
_EBCDIC_XML = b"\x4c\x6f\xa7\x94"  # "<?xm" in EBCDIC


def check_package(data: bytes, suffix: str, *, name: str = "the file", inspect: Inspect | None = None) -> Unpacked:
    """Check the zip ``data`` against the budget for ``suffix`` (see the module docstring).

    Raises ``OfficeBudgetError`` (over budget) or ``zipfile.BadZipFile`` (not a zip, or a
    member that fails its CRC check); returns what the file holds."""
    budget = BUDGETS[suffix.lower()]
    kind = suffix.lower()
    _check_directory(data, budget, name)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        infos = zf.infolist()
        if len(infos) > budget.members:
            raise _over(name, f"has {len(infos):,} parts, more than the {budget.members:,} a {kind} may have here")
        total = 0
        for info in infos:
            if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                raise OfficeBudgetError(f"compresses part {info.filename!r} with method {info.compress_type}; "
                                        "office files use deflate, and only that is opened here", name)
            total += info.file_size
            if total > budget.unpacked_bytes:
                raise _over(name, f"unpacks to more than {_mib(budget.unpacked_bytes)}, the most a {kind} may "
                                  "unpack to here")
            if info.file_size > budget.ratio_from and info.file_size > budget.ratio * max(info.compress_size, 1):
                raise _over(name, f"packs part {info.filename!r} {info.file_size // max(info.compress_size, 1):,}:1, "
                                  f"more than the {budget.ratio}:1 a part over {_mib(budget.ratio_from)} may be packed here")
        markup = 0
        for info in infos:
            with zf.open(info) as member:
                content = member.read(info.file_size + 1)
            if len(content) > info.file_size:  # zipfile stops at the declared size; never trust it blindly
                raise zipfile.BadZipFile(f"part {info.filename!r} is longer than its record says")
            markup += _xml_markup(content, info.filename, name)
            if markup > budget.markup:
                raise _over(name, f"holds more than {budget.markup:,} XML tags and attributes, the most a {kind} "
                                  "may hold here")
            if inspect is not None:
                try:
                    inspect(info.filename, content)
                except OfficeBudgetError as exc:
                    raise OfficeBudgetError(exc.what, name) from None
    return Unpacked(len(infos), total, markup)


def _check_directory(data: bytes, budget: Budget, name: str) -> None:
    """The zip's end record, read before ``zipfile`` parses the directory it points to."""
    at = data.rfind(_EOCD, max(0, len(data) - _EOCD_SIZE - 0xFFFF))
    if at < 0 or len(data) - at < _EOCD_SIZE:
        raise zipfile.BadZipFile("File is not a zip file")
    _, _, _, _, entries, size, offset, _ = struct.unpack(_EOCD_FORMAT, data[at:at + _EOCD_SIZE])
    zip64 = at >= 20 and data[at - 20:at - 16] == _EOCD64_LOCATOR
    if zip64 or entries == 0xFFFF or size == 0xFFFFFFFF or offset == 0xFFFFFFFF:
        raise OfficeBudgetError("uses ZIP64 records (for files over 4 GiB); office files here never need them", name)
    if entries > budget.members:
        raise _over(name, f"has {entries:,} parts, more than the {budget.members:,} an office file may have here")
    if size > budget.directory_bytes:
        raise _over(name, f"has a zip directory of {size / MiB:.1f} MiB, more than the "
                          f"{_mib(budget.directory_bytes)} an office file's may be here")


def _xml_markup(content: bytes, part: str, name: str) -> int:
    """The markup bytes of a part that is XML (0 for a binary part such as an image)."""
    head = content[:64]
    bare = head.replace(b"\x00", b"").lstrip(b" \t\r\n\xef\xbb\xbf\xfe\xff")
    if (bare.startswith(b"<") and b"\x00" in head) or head.startswith((b"\xff\xfe", b"\xfe\xff", _EBCDIC_XML)):
        raise OfficeBudgetError(f"has part {part!r} in an encoding other than UTF-8; office files write UTF-8, "
                                "and only that is opened here", name)
    if not bare.startswith(b"<"):
        return 0
    decl = _XML_DECL.match(content, 3 if content.startswith(b"\xef\xbb\xbf") else 0)
    if decl and decl.group(1).lower() not in _UTF8_NAMES:
        raise OfficeBudgetError(f"declares part {part!r} as {decl.group(1).decode('ascii', 'replace')!r}; "
                                "office files write UTF-8, and only that is opened here", name)
    if b"<!DOCTYPE" in content:
        raise OfficeBudgetError(f"has a DOCTYPE in part {part!r}; office files never declare one", name)
    return content.count(b"<") + content.count(b"=")


def _over(name: str, what: str) -> OfficeBudgetError:
    return OfficeBudgetError(f"{what} (it may be a zip bomb); it was not opened", name)


def _mib(n: int) -> str:
    return f"{n // MiB} MiB" if n >= MiB else f"{n // 1024} KiB"
