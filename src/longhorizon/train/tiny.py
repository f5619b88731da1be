"""A tiny local model: a byte-level BPE trained on the suite's own text and a random Qwen3.

For fast unit tests only (the embedded default is the pretrained SmolLM2 of
``train.pretrained``). Everything runs offline in seconds, so every code path that needs a
"real model" (the local policy, SFT, RL) can run in a test. Its tokenizer carries the project's
one chat template (``train.template``: tools, ``<tool_call>`` calls, ``<tool_response>``
results, ``{% generation %}`` markers) with the same turn tokens as SmolLM2.

    path = build_tiny_model(tmp / "tiny", default_corpus())
    model = AutoModelForCausalLM.from_pretrained(path); tok = AutoTokenizer.from_pretrained(path)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from longhorizon.core.aio import run_sync
from longhorizon.train.template import CHAT_TEMPLATE, IM_END, IM_START, PAD, save_tokenizer

SPECIAL_TOKENS = [PAD, IM_START, IM_END]
MARKUP_TOKENS = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<tools>", "</tools>"]
"""Atomic but not special: they survive ``decode(skip_special_tokens=True)``, so parsers see them."""


def train_tokenizer(corpus: list[str], vocab_size: int = 1024, max_length: int = 32768):
    """A byte-level BPE trained on ``corpus``, wrapped as a transformers fast tokenizer."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(corpus, trainer)
    bpe.add_tokens([AddedToken(t, special=False, normalized=False) for t in MARKUP_TOKENS])
    tok = PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token=IM_END, pad_token=PAD, model_max_length=max_length,
    )
    tok.add_special_tokens({"additional_special_tokens": [IM_START]})
    tok.chat_template = CHAT_TEMPLATE
    return tok


def build_tiny_model(
    out_dir: str | Path,
    corpus: list[str] | None = None,
    *,
    vocab_size: int = 1024,
    seed: int = 0,
    hidden_size: int = 256,
    num_layers: int = 4,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int = 1024,
    max_positions: int = 32768,
) -> Path:
    """Train the tokenizer, create a random-init Qwen3 causal LM, save both to ``out_dir``.

    Deterministic in (corpus, sizes, seed). Loads back with ``from_pretrained(out_dir)``.
    """
    import torch
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok = train_tokenizer(default_corpus() if corpus is None else corpus, vocab_size, max_positions)
    config = Qwen3Config(
        vocab_size=len(tok),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        head_dim=hidden_size // num_heads,
        max_position_embeddings=max_positions,
        max_window_layers=num_layers,
        tie_word_embeddings=True,
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, do_sample=False,
    )
    model.save_pretrained(out)
    save_tokenizer(tok, out)
    return out


# -- corpus -------------------------------------------------------------------------------

_EXAMPLE_TOOLS = [
    {"type": "function", "function": {
        "name": "files__read_file", "description": "Read a text file from the workspace.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
    {"type": "function", "function": {
        "name": "files__write_file", "description": "Write a text file in the workspace.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                       "required": ["path", "content"]}}},
]


def _example_value(name: str, schema: dict) -> Any:
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    return {
        "integer": 1, "number": 2.5, "boolean": True, "array": [], "object": {},
    }.get(kind, f"{name}.txt" if "path" in name else f"example {name}")


def _example_call(tool: dict, n: int) -> dict:
    fn = tool["function"]
    props = (fn.get("parameters") or {}).get("properties") or {}
    args = {k: _example_value(k, v if isinstance(v, dict) else {}) for k, v in props.items()}
    return {"id": f"call_{n}", "type": "function",
            "function": {"name": fn["name"], "arguments": json.dumps(args, ensure_ascii=False)}}


def _conversations(system: str, instructions: list[str], tools: list[dict]) -> list[tuple[list[dict], list[dict]]]:
    """Synthetic episodes (one per instruction) that call every tool once, so BPE sees the markup."""
    convs = []
    for k, instruction in enumerate(instructions or ["Summarise the notes in the workspace."]):
        msgs: list[dict] = [{"role": "system", "content": system}, {"role": "user", "content": instruction}]
        for n, tool in enumerate(tools):
            call = _example_call(tool, n)
            msgs.append({"role": "assistant", "content": "Let me check that first." if n % 2 else "",
                         "tool_calls": [call]})
            msgs.append({"role": "tool", "tool_call_id": call["id"], "content": f"ok ({tool['function']['name']})"})
        msgs.append({"role": "assistant", "content": "Done: the request is complete and checked."})
        convs.append((msgs, tools))
    return convs


async def _tools_of(tasks) -> list[dict]:
    """Every tool the apps of ``tasks`` expose, by name (the corpus is made before any episode,
    so there is no Trajectory to read them from)."""
    from longhorizon.env.episode import tool_schemas

    tools: dict[str, dict] = {}
    for listed in (await tool_schemas(list(tasks))).values():
        for t in listed:
            tools.setdefault(t["function"]["name"], t)
    return [tools[k] for k in sorted(tools)]


def default_corpus(families=None, seeds: tuple[int, ...] = (0, 1, 2)) -> list[str]:
    """Text from the suite: system prompt, each family's instructions and the tools its apps
    expose, plus synthetic tool-call episodes rendered with the chat template.

    ``families`` defaults to every registered family; with none, the corpus is the system
    prompt and a built-in example episode.
    """
    from transformers.utils.chat_template_utils import render_jinja_template

    from longhorizon.env.episode import SYSTEM_PROMPT
    from longhorizon.tasks import registry

    fams = registry.families() if families is None else list(families)
    instructions, firsts, probe_tasks, apps_seen = [], [], [], set()
    for fam in fams:
        tasks = [fam.generate(s) for s in seeds or (0,)]
        instructions.extend(t.instruction for t in tasks)
        firsts.append(tasks[0].instruction)
        if not set(tasks[0].apps) <= apps_seen:  # one World per new set of apps, to list their tools
            probe_tasks.append(tasks[0])
            apps_seen |= set(tasks[0].apps)
    tools = run_sync(_tools_of(probe_tasks)) if probe_tasks else _EXAMPLE_TOOLS
    texts = [SYSTEM_PROMPT, *instructions, *(json.dumps(t, ensure_ascii=False) for t in tools)]
    for msgs, tls in _conversations(SYSTEM_PROMPT, firsts[:8], tools):
        rendered, _ = render_jinja_template([msgs], tools=tls, chat_template=CHAT_TEMPLATE)
        texts.extend(rendered)
    return texts


def init_model(out_dir: str | Path, cfg=None, families: list[str] | None = None) -> dict[str, Any]:
    """``longhorizon model init``: the tiny model from a ``ModelConfig``, its corpus from the suite
    (every family, or only ``families``). Returns what was built."""
    from longhorizon.tasks import registry
    from longhorizon.train.config import ModelConfig

    cfg = cfg or ModelConfig()
    fams = [registry.get_family(f) for f in families] if families else None
    corpus = default_corpus(fams, seeds=tuple(range(max(1, cfg.corpus_seeds))))
    path = build_tiny_model(out_dir, corpus, vocab_size=cfg.vocab_size, seed=cfg.seed, hidden_size=cfg.hidden_size,
                            num_layers=cfg.num_layers, num_heads=cfg.num_heads, num_kv_heads=cfg.num_kv_heads,
                            intermediate_size=cfg.intermediate_size, max_positions=cfg.max_positions)
    config = json.loads((Path(path) / "config.json").read_text())
    return {"model": str(path), "model_type": config.get("model_type"), "vocab_size": config.get("vocab_size"),
            "hidden_size": config.get("hidden_size"), "layers": config.get("num_hidden_layers"),
            "corpus_texts": len(corpus), "corpus_chars": sum(map(len, corpus))}
