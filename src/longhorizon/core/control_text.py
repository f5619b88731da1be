"""Text that spells a control token never becomes one.

A tool result, a user message or an instruction is data, but a tokenizer matches its added
tokens (``<|im_start|>``, ``<|im_end|>``, ``<tool_call>``, ...) anywhere in the text it is
given, so a file holding ``<|im_end|><|im_start|>user ...`` and read back through a tool would
open a forged turn in the model's context and in its training data. Every text that reaches a
chat template is therefore *escaped*: a zero-width space (U+200B) goes after the first
character of each occurrence of a control token's spelling. The text still reads the same, but
the tokenizer finds no control token in it, so only the template's own markers are control ids.

``escaper(tokens)`` escapes exactly a tokenizer's added tokens (the renderer of SFT and RL
sequences uses it with the model's tokenizer); ``escape_generic`` escapes the common families of
control spellings (``<|...|>``, ``<s>``/``</s>``, ``[INST]``, ``<start_of_turn>``, ...) for a
served model whose tokenizer this process does not have (the chat-completions client).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

MARK = "\u200b"
"""Zero-width space: splits a control spelling without changing how the text reads."""

_GENERIC = re.compile(
    r"<\|[^\s|<>]{1,64}\|>"                    # <|im_start|>, <|eot_id|>, <|start_header_id|>, ...
    r"|</?s>|<unk>|<pad>|<bos>|<eos>"            # sentencepiece-style markers
    r"|\[/?INST\]|\[/?(?:AVAILABLE_)?TOOL(?:S|_CALLS|_RESULTS)\]|\[/?SYSTEM_PROMPT\]"  # Mistral
    r"|<(?:start|end)_of_turn>"                   # Gemma
    r"|</?tool_(?:call|response)>|</?tools>"      # Hermes / Qwen tool markup
)


def _escape_with(pattern: re.Pattern) -> Callable[[str], str]:
    def escape(text: str) -> str:
        # each pass splits every match; a second pass catches a spelling hidden inside another's tail
        for _ in range(4):
            new = pattern.sub(lambda m: m.group(0)[0] + MARK + m.group(0)[1:], text)
            if new == text:
                break
            text = new
        return text
    return escape


def escaper(tokens: Iterable[str]) -> Callable[[str], str]:
    """``escape(text)`` for exactly these control spellings (a tokenizer's added tokens);
    the identity when there are none. Spellings of one character cannot be split and are left."""
    spellings = sorted({t for t in tokens if isinstance(t, str) and len(t) > 1}, key=len, reverse=True)
    if not spellings:
        return lambda text: text
    return _escape_with(re.compile("|".join(re.escape(t) for t in spellings)))


escape_generic = _escape_with(_GENERIC)
"""Escape the common control spellings, for a model whose tokenizer is not at hand."""


def escape_message(message: dict, escape: Callable[[str], str]) -> dict:
    """A copy of a chat message with its text escaped: string content (or the text of content
    parts) and tool-call arguments given as JSON text. Keys and roles are left alone."""
    m = dict(message)
    content = m.get("content")
    if isinstance(content, str):
        m["content"] = escape(content)
    elif isinstance(content, list):
        m["content"] = [{**p, "text": escape(p["text"])} if isinstance(p, dict) and isinstance(p.get("text"), str)
                        else p for p in content]
    calls = m.get("tool_calls")
    if isinstance(calls, list):
        m["tool_calls"] = [_escape_call(c, escape) for c in calls]
    return m


def _escape_call(call, escape: Callable[[str], str]):
    if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
        return call
    fn = dict(call["function"])
    if isinstance(fn.get("arguments"), str):
        fn["arguments"] = escape(fn["arguments"])  # U+200B is a valid character inside JSON strings
    elif isinstance(fn.get("arguments"), (dict, list)):
        fn["arguments"] = _escape_values(fn["arguments"], escape)
    return {**call, "function": fn}


def _escape_values(value, escape: Callable[[str], str], depth: int = 0):
    if depth > 64:
        return value
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, list):
        return [_escape_values(v, escape, depth + 1) for v in value]
    if isinstance(value, dict):
        return {escape(k) if isinstance(k, str) else k: _escape_values(v, escape, depth + 1)
                for k, v in value.items()}
    return value
