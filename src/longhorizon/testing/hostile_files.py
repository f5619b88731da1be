"""Building hostile office files (zip bombs, injected markup) from a plain one, for the budget
tests (tests/apps/test_office_budgets.py) and their measurement (benchmarks/hostile_office.py)."""

from __future__ import annotations

import io
import zipfile


def rezip(data: bytes, replace: dict[str, bytes] | None = None, add: dict[str, bytes | int] | None = None,
          method: int = zipfile.ZIP_DEFLATED, compresslevel: int = 1) -> bytes:
    """``data``'s members (some replaced), then ``add``'s: bytes, or a count of MiB of zeros
    (streamed, so the caller never holds them). ``ZIP_STORED`` gives a ratio of 1, which passes
    a ratio check at any size; a higher ``compresslevel`` packs zeros tighter (slower)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, \
            zipfile.ZipFile(out, "w", method, compresslevel=compresslevel) as dst:
        for info in src.infolist():
            dst.writestr(info.filename, (replace or {}).get(info.filename, src.read(info.filename)))
        for name, content in (add or {}).items():
            if isinstance(content, int):
                with dst.open(name, "w") as member:
                    for _ in range(content):
                        member.write(bytes(1 << 20))
            else:
                dst.writestr(name, content)
    return out.getvalue()
