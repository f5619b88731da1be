"""Optional judged coding: a model scores each episode against a rubric per behaviour.

Off unless asked for (``analyze --judge-base-url URL --judge-model M``). The judge is any
OpenAI-compatible server, called through the project's client (``core.chat_api.ChatClient.complete``,
with its retries) at temperature 0 and a fixed seed. Each verdict is cached in a JSONL file
keyed by the hash of (model, rubric, transcript), so rerunning a report asks nothing twice.

Each rubric asks for a yes/no verdict as JSON ``{"score": 0 or 1, "reason": "..."}``. The
judged scores are reported next to an automatic binary reading of the same behaviour
(``AUTOMATIC``) with their agreement, Cohen's κ, over the episodes both scored.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from pathlib import Path
from typing import Any

from longhorizon.core.trajectory import Trajectory

RUBRICS = {
    "local-goal formation": "Before its tool calls, does the agent usually state in words what it is about to do "
                            "next and why (a concrete local goal), rather than calling tools silently?",
    "working state": "Does the agent gather the information the task needs before acting, without reading the "
                     "same thing again and again?",
    "parent-goal stability": "When a tool call fails, does the agent get back to the task (retry, fix or replace "
                             "the failed step) instead of drifting or stopping?",
    "verification": "Before finishing, does the agent read back what it wrote or changed to check it is right?",
}

AUTOMATIC = {
    "local-goal formation": lambda m: None if m["goal_statement_share"] is None else m["goal_statement_share"] >= 0.5,
    "working state": lambda m: None if m["repeated_read_share"] is None
    else m["distinct_reads"] > 0 and m["repeated_read_share"] < 0.2,
    "parent-goal stability": lambda m: None if m["error_recovery_share"] is None else m["error_recovery_share"] == 1.0,
    "verification": lambda m: None if m["verification_share"] is None else m["verification_share"] == 1.0,
}
"""Each behaviour's automatic yes/no from the episode's metrics (None where undefined)."""

SYSTEM = ("You grade transcripts of a tool-using agent. Answer with JSON only: "
          '{"score": 1, "reason": "..."} for yes or {"score": 0, "reason": "..."} for no.')
RESULT_CHARS = 300


def transcript(traj: Trajectory) -> str:
    """The episode as plain text for a judge: instruction, assistant text, calls, short results."""
    lines = []
    calls = {c.id: c for c in traj.tool_calls}
    for m in traj.messages:
        role, content = m.get("role"), m.get("content")
        if role in ("system", "tool"):
            continue
        if isinstance(content, str) and content.strip():
            lines.append(f"[{role}] {content.strip()}")
        for tc in m.get("tool_calls") or []:
            c = calls.get(tc.get("id"))
            if c:
                args = json.dumps(c.arguments, ensure_ascii=False) if not isinstance(c.arguments, str) else c.arguments
                res = c.result if len(c.result) <= RESULT_CHARS else c.result[:RESULT_CHARS] + " ..."
                lines.append(f"[call] {c.name} {args}\n[{'error' if c.is_error else 'result'}] {res}")
    return "\n".join(lines)


def cohen_kappa(x: list[bool], y: list[bool]) -> float | None:
    """Cohen's κ of two binary codings of the same items; None when undefined (no items, or
    chance agreement 1: both coders gave one and the same label throughout)."""
    n = len(x)
    if n == 0 or n != len(y):
        return None
    po = sum(a == b for a, b in zip(x, y)) / n
    px, py = sum(x) / n, sum(y) / n
    pe = px * py + (1 - px) * (1 - py)
    return None if pe == 1 else (po - pe) / (1 - pe)


def _parse_score(text: str) -> int | None:
    m = re.search(r"\{.*\}", text or "", re.S)
    try:
        score = json.loads(m.group(0)).get("score") if m else None
    except (ValueError, AttributeError):
        return None
    return int(score) if score in (0, 1, True, False) else None


class Judge:
    """Scores episodes by rubric through an OpenAI-compatible server, with a JSONL cache."""

    def __init__(self, base_url: str, model: str, cache: Path, api_key: str | None = None, progress: bool = False):
        from longhorizon.core.chat_api import ChatClient

        self.client = ChatClient(base_url=base_url, model=model, api_key=api_key, temperature=0.0, seed=0,
                                   max_tokens=200)
        self.model = model
        self.cache_path = Path(cache)
        self.cache: dict[str, dict] = {}
        if self.cache_path.exists():
            for line in self.cache_path.read_text().splitlines():
                if line.strip():
                    row = json.loads(line)
                    self.cache[row["key"]] = row
        self.requests = 0
        self.progress = progress

    def _key(self, behaviour: str, text: str) -> str:
        return hashlib.sha256(json.dumps([self.model, RUBRICS[behaviour], text]).encode()).hexdigest()

    async def _score(self, behaviour: str, text: str) -> int | None:
        key = self._key(behaviour, text)
        if key not in self.cache:
            messages = [{"role": "system", "content": SYSTEM},
                        {"role": "user", "content": f"Question: {RUBRICS[behaviour]}\n\nTranscript:\n{text}"}]
            self.requests += 1
            data = await self.client.complete(self.client.request_body(messages, []))
            reply = (data.get("choices") or [{}])[0].get("message", {}).get("content") or ""
            row = {"key": key, "behaviour": behaviour, "score": _parse_score(reply), "reply": reply[:500]}
            self.cache[key] = row
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.cache_path, "a", encoding="utf-8") as f:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
        return self.cache[key]["score"]

    async def _score_all(self, trajs: list[Trajectory]) -> list[dict[str, int | None]]:
        from tqdm import tqdm

        try:
            out = []
            for t in tqdm(trajs, unit="ep", desc="judging", disable=not self.progress):
                text = transcript(t)  # one at a time: a judge server is often a single small model
                out.append({b: await self._score(b, text) for b in RUBRICS})
            return out
        finally:
            await self.client.aclose()

    def score(self, trajs: list[Trajectory]) -> list[dict[str, int | None]]:
        return asyncio.run(self._score_all(trajs))


def judged_coding(judge: Judge, pairs) -> dict[str, Any]:
    """Judge both sides of every pair; per behaviour: how many were scored, the judged mean
    of A and of B, and Cohen's κ against the automatic reading on the episodes both coded."""
    sides = [(p.a, p.metrics_a, "a") for p in pairs] + [(p.b, p.metrics_b, "b") for p in pairs]
    scores = judge.score([t for t, _, _ in sides])
    out = {}
    for b in RUBRICS:
        judged = {"a": [], "b": []}
        jx, ax = [], []
        for (t, m, side), s in zip(sides, scores):
            if s[b] is None:
                continue
            judged[side].append(s[b])
            auto = AUTOMATIC[b](m)
            if auto is not None:
                jx.append(bool(s[b]))
                ax.append(bool(auto))
        mean = lambda v: sum(v) / len(v) if v else None  # noqa: E731
        out[b] = {"scored": len(judged["a"]) + len(judged["b"]), "mean_a": mean(judged["a"]),
                  "mean_b": mean(judged["b"]), "agreement_n": len(jx), "kappa": cohen_kappa(jx, ax)}
    return {"model": judge.model, "requests": judge.requests, "behaviours": out,
            "episodes": [{"pair": p.id, "a": scores[i], "b": scores[len(pairs) + i]} for i, p in enumerate(pairs)]}
