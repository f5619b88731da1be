"""Side virtual environments for tools whose pins conflict with ours (vLLM, τ²-bench, ...).

Each lives in ``.venvs/<name>`` at the root of a source checkout (``$LONGHORIZON_VENVS/<name>``
if set, else the cache folder's ``venvs/<name>`` for an installed package). It is created once by
a list of pip steps and reused while its ``.installed`` marker holds the same steps, so changing a
pin rebuilds it and a half-built one (killed midway: no marker) is built again. A file lock keeps
two processes (``make test`` and a CLI run) from building the same one at once.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from longhorizon.core.errors import UsageError

MARKER = ".installed"


class VenvError(UsageError):
    """A side venv could not be built (no wheel for this platform, pip failed): one line + pip's tail."""


def venvs_root() -> Path:
    if os.environ.get("LONGHORIZON_VENVS"):
        return Path(os.environ["LONGHORIZON_VENVS"]).expanduser()
    checkout = Path(__file__).resolve().parents[3]
    if (checkout / "pyproject.toml").is_file() and (checkout / "src" / "longhorizon").is_dir():
        return checkout / ".venvs"
    from longhorizon.train.pretrained import cache_root

    return cache_root() / "venvs"


def venv_python(name: str) -> Path:
    return venvs_root() / name / "bin" / "python"


def ensure_venv(name: str, steps: list[list[str]], *, quiet: bool = False) -> Path:
    """The python of venv ``name``, built by ``steps`` (each a pip argument list run as
    ``python -m pip STEP...``) unless its marker already records exactly these steps."""
    root = venvs_root() / name
    marker = root / MARKER
    want = json.dumps(steps)
    if marker.is_file() and marker.read_text() == want:
        return root / "bin" / "python"
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.is_file() and marker.read_text() == want:
            return root / "bin" / "python"
        if not quiet:
            print(f"building the {name} venv in {root} (once; minutes)", file=sys.stderr, flush=True)
        if root.exists():
            shutil.rmtree(root)
        _run([sys.executable, "-m", "venv", str(root)], name)
        py = root / "bin" / "python"
        for step in steps:
            _run([str(py), "-m", "pip", "--disable-pip-version-check", "-q", *step], name)
        marker.write_text(want)
        return py


def _run(cmd: list[str], name: str) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr + proc.stdout).splitlines()
                 if ln.strip() and not ln.startswith("WARNING: Location")]
        tail = " | ".join(lines[-6:])
        raise VenvError(f"building the {name} venv failed at `{' '.join(cmd[2:])}` (exit {proc.returncode}): {tail}")
