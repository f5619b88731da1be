"""`longhorizon serve`'s server (real vLLM, CPU wheel, on the embedded SmolLM2) answering the
`openai` policy: tool calls parsed into OpenAI format, token ids and log-probs recorded.

The server starts once per session (minutes the first time: vLLM compiles its kernels). It is
skipped only when the vLLM venv cannot be built here, with pip's reason."""

from __future__ import annotations

import json
import os
import tempfile

import pytest

from longhorizon.policies.openai_client import OpenAIPolicy

TOOLS = [{"type": "function", "function": {
    "name": "read_file", "description": "Read a text file of the workspace.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}}]
MESSAGES = [{"role": "system", "content": "You are a careful assistant with file tools."},
            {"role": "user", "content": "What does notes.txt say?"}]
CALL_TEXT = '<tool_call>\n{"name": "read_file", "arguments": {"path": "notes.txt"}}\n</tool_call>'
"""What the template renders for that call; the test makes the model write exactly it."""


@pytest.fixture(scope="session")
def default_model():
    from longhorizon.train.pretrained import default_model_dir, init_pretrained

    return init_pretrained(default_model_dir())["model"]


@pytest.fixture(scope="session")
def vllm_server(default_model):
    from longhorizon.serve.venvs import VenvError
    from longhorizon.serve.vllm import VLLMServer, ensure_vllm

    try:
        ensure_vllm()
    except VenvError as exc:
        print(f"SKIP reason: {exc}")
        pytest.skip(f"vLLM cannot be installed here: {exc}")
    with VLLMServer(default_model, kv_cache_gib=1) as server:
        yield server


def forced(text: str) -> dict:
    """vLLM's structured-output regex: the model must write ``text`` (greedy sampling inside it)."""
    import re

    return {"structured_outputs": {"regex": re.escape(text)}}


async def test_a_tool_call_the_model_writes_comes_back_as_an_openai_tool_call(vllm_server):
    policy = OpenAIPolicy(vllm_server.base_url, vllm_server.model_name, max_tokens=64,
                          extra_body=forced(CALL_TEXT))
    async with policy:
        msg = await policy.act(MESSAGES, TOOLS)
    assert [c["function"]["name"] for c in msg.get("tool_calls", [])] == ["read_file"]
    assert json.loads(msg["tool_calls"][0]["function"]["arguments"]) == {"path": "notes.txt"}
    assert "<tool_call>" not in msg["content"]


async def test_token_ids_and_logprobs_of_the_sampled_reply_are_recorded(vllm_server):
    from transformers import AutoTokenizer

    policy = OpenAIPolicy(vllm_server.base_url, vllm_server.model_name, max_tokens=64,
                          extra_body=forced(CALL_TEXT), logprobs=True, return_token_ids=True)
    async with policy:
        msg = await policy.act(MESSAGES, TOOLS)
    tok = AutoTokenizer.from_pretrained(vllm_server.model_path)
    assert tok.decode(msg["token_ids"], skip_special_tokens=True).strip() == CALL_TEXT
    assert len(msg["logprobs"]) == len(msg["token_ids"]) and all(lp <= 0.0 for lp in msg["logprobs"])


async def test_the_server_renders_prompts_with_the_projects_template_token_for_token(vllm_server):
    from transformers import AutoTokenizer

    from longhorizon.policies.render import ChatRenderer
    from longhorizon.train.template import CHAT_TEMPLATE

    history = MESSAGES + [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "notes.txt"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "buy milk"}]
    policy = OpenAIPolicy(vllm_server.base_url, vllm_server.model_name, max_tokens=1, return_token_ids=True)
    async with policy:
        msg = await policy.act(history, TOOLS)
    local = ChatRenderer(AutoTokenizer.from_pretrained(vllm_server.model_path), CHAT_TEMPLATE)
    assert msg["prompt_ids"] == local.prompt_ids(history, TOOLS)


def test_run_with_token_data_records_each_served_turns_ids_and_logprobs(vllm_server, tmp_path):
    from longhorizon.cli import main

    out = tmp_path / "run"
    assert main(["run", "--policy", "openai", "--base-url", vllm_server.base_url, "--model", vllm_server.model_name,
                 "--token-data", "--split", "train", "--family", "invoice_followup", "--seeds", "1",
                 "--max-turns", "1", "--max-tokens", "16", "--out", str(out), "--quiet"]) == 0
    [traj] = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    [turn] = traj["turns"]
    assert turn["prompt_ids"] and 0 < len(turn["token_ids"]) <= 16
    assert len(turn["logprobs"]) == len(turn["token_ids"])


def test_a_server_that_dies_while_starting_is_an_infra_error_with_its_log(default_model):
    from longhorizon.core.errors import InfraError
    from longhorizon.serve.venvs import VenvError
    from longhorizon.serve.vllm import VLLMServer, ensure_vllm

    try:
        ensure_vllm()
    except VenvError as exc:
        pytest.skip(f"vLLM cannot be installed here: {exc}")
    server = VLLMServer(default_model, extra_args=["--no-such-flag"])
    with pytest.raises(InfraError, match="exited .* before it was ready") as err:
        server.start()
    assert "--no-such-flag" in str(err.value) and server.proc is None
    assert server.log_path.is_file()  # kept: the error names it


def test_serve_on_a_folder_that_is_no_model_is_a_one_line_usage_error(tmp_path, capsys):
    from longhorizon.cli import main

    assert main(["serve", "--model", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "not a transformers model folder" in err and "\n" not in err


def test_pipeline_evaluation_on_a_served_model_resumes_under_its_endpoint_label(vllm_server, tmp_path):
    """eval.engine vllm: the run's identity names the served model, not the session's free port, so
    a rerun behind a server on another port resumes the run instead of being refused."""
    from longhorizon.train.config import EvalConfig
    from longhorizon.train.pipeline import evaluate_model

    cfg = EvalConfig(split="train", families=["log_first_error"], seeds=1, max_new_tokens=16, max_turns=1)
    label = "vllm:/models/base"
    first = OpenAIPolicy(vllm_server.base_url, vllm_server.model_name, max_tokens=16, endpoint_label=label)
    summary = evaluate_model("unused", tmp_path / "eval", cfg, progress=False, policy=first)
    assert summary["overall"]["episodes"] == 1 and summary["complete"]
    manifest = json.loads((tmp_path / "eval" / "run.json").read_text())
    assert manifest["policy"]["base_url"] == label
    elsewhere = OpenAIPolicy("http://127.0.0.1:1/v1", vllm_server.model_name, max_tokens=16, endpoint_label=label)
    again = evaluate_model("unused", tmp_path / "eval", cfg, progress=False, policy=elsewhere)
    assert again["overall"]["episodes"] == 1  # resumed: nothing left to play, no request sent to port 1


def test_a_second_start_loads_the_compiled_model_from_the_cache_instead_of_compiling(vllm_server):
    """vLLM 0.32's default AOT cache is written but never loads, so every start compiled again;
    the server uses inductor's cache under VLLM_CACHE_ROOT instead, which a second start of the
    same model reads without writing anything. (SmolLM2 in bf16 compiles kernels; the tiny test
    model in tests/serve/test_vllm_rl.py compiles none, so it could not show this.)"""
    import time
    from pathlib import Path

    from longhorizon.serve.vllm import VLLMServer, ensure_vllm

    again = VLLMServer(str(vllm_server.model_path), kv_cache_gib=1)  # the session server's settings
    cache = Path(again.env(ensure_vllm())["VLLM_CACHE_ROOT"])
    assert any(cache.rglob("*.so"))  # the session server's start compiled kernels into it
    started = time.time()
    with again:
        pass
    # a server of another model on this machine (tests/serve/test_vllm_rl.py on the other test
    # worker) may record its own architecture's model info meanwhile: only this model's files count
    import json

    arch = json.loads((Path(vllm_server.model_path) / "config.json").read_text())["architectures"][0]
    written = [str(p.relative_to(cache)) for p in cache.rglob("*") if p.is_file() and p.stat().st_mtime >= started
               and not (p.parent.name == "modelinfos" and arch not in p.name)]
    assert written == []


def _model_folder(tmp_path):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text("{}")
    return tmp_path / "m"


def test_the_server_keeps_its_persistent_inductor_cache_after_torch_compiled_in_this_process(tmp_path, monkeypatch):
    """Any torch compile in this process writes inductor's /tmp default into os.environ (a full
    pytest run does); the server must still compile into its own cache, or the next start compiles
    again. A folder the user chose is kept."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    from longhorizon.serve.vllm import VLLMServer, compile_cache_dir

    monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
    monkeypatch.delenv("VLLM_CACHE_ROOT", raising=False)
    cache_dir()  # what torch does on its first compile here
    assert os.environ["TORCHINDUCTOR_CACHE_DIR"].startswith(tempfile.gettempdir())
    server = VLLMServer(str(_model_folder(tmp_path)))
    python = tmp_path / "venv" / "bin" / "python"
    try:
        assert server.env(python)["TORCHINDUCTOR_CACHE_DIR"] == str(compile_cache_dir(python) / "inductor")
        monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "mine"))
        assert server.env(python)["TORCHINDUCTOR_CACHE_DIR"] == str(tmp_path / "mine")
    finally:
        server.stop()


@pytest.mark.parametrize("cuda", [False, True])
def test_a_reproducible_server_takes_one_sequence_at_a_time_without_prefix_cache(tmp_path, cuda):
    from longhorizon.serve.vllm import VLLMServer

    server = VLLMServer(str(_model_folder(tmp_path)), reproducible=True, max_num_seqs=8, cuda=cuda)
    try:
        cmd = server.command("python")
        env = server.env()
    finally:
        server.stop()
    assert cmd[cmd.index("--max-num-seqs") + 1] == "1" and cmd.count("--max-num-seqs") == 1
    assert "--no-enable-prefix-caching" in cmd and cmd[cmd.index("--seed") + 1] == "0"
    # vLLM's batch-invariant kernels are Triton GPU kernels: set on CUDA only (they fail on CPU tensors)
    assert env.get("VLLM_BATCH_INVARIANT") == ("1" if cuda else None)


@pytest.mark.parametrize("cuda", [False, True])
def test_the_cpu_server_runs_without_chunked_prefill_unless_asked(tmp_path, cuda):
    """On CPU a seeded request split across steps kills the engine (serve.vllm.CPU_CHUNKED_PREFILL;
    the live check is in test_vllm_rl.py); CUDA keeps vLLM's default; an explicit flag wins."""
    from longhorizon.serve.vllm import VLLMServer

    plain = VLLMServer(str(_model_folder(tmp_path)), cuda=cuda)
    asked = VLLMServer(str(tmp_path / "m"), cuda=False, extra_args=["--enable-chunked-prefill"])
    try:
        assert ("--no-enable-chunked-prefill" in plain.command("python")) == (not cuda)
        assert "--no-enable-chunked-prefill" not in asked.command("python")
    finally:
        plain.stop()
        asked.stop()


def _server_options(tmp_path, monkeypatch, *flags) -> dict:
    """The keyword options `longhorizon serve FLAGS` starts its VLLMServer with (none is started)."""
    import longhorizon.serve.vllm as vllm
    from longhorizon.cli import main

    seen = {}

    class Stop(Exception):
        pass

    def server(model, **kw):
        seen.update(kw)
        raise Stop

    monkeypatch.setattr(vllm, "VLLMServer", server)
    with pytest.raises(Stop):
        main(["serve", "--model", str(_model_folder(tmp_path)), *flags])
    return seen


def test_serve_reproducible_defaults_to_float32_and_passes_the_flag(tmp_path, monkeypatch):
    seen = _server_options(tmp_path, monkeypatch, "--reproducible")
    assert (seen["reproducible"], seen["dtype"]) == (True, "float32")


@pytest.mark.parametrize("cuda, expected", [(False, "float32"), (True, "bfloat16")])
def test_serve_defaults_to_the_dtype_that_is_fast_where_it_runs(tmp_path, monkeypatch, cuda, expected):
    import longhorizon.serve.vllm as vllm

    monkeypatch.setattr(vllm, "has_cuda", lambda: cuda)
    assert _server_options(tmp_path, monkeypatch)["dtype"] == expected


@pytest.fixture(scope="module")
def reproducible_server(default_model):
    from longhorizon.serve.venvs import VenvError
    from longhorizon.serve.vllm import VLLMServer, ensure_vllm

    try:
        ensure_vllm()
    except VenvError as exc:
        pytest.skip(f"vLLM cannot be installed here: {exc}")
    with VLLMServer(default_model, kv_cache_gib=1, dtype="float32", reproducible=True, enforce_eager=True) as server:
        yield server


def test_two_reproducible_served_runs_give_identical_per_episode_results(reproducible_server, tmp_path):
    """`serve --reproducible` + `run --reproducible`: the second run, on a server that has already
    answered every prompt once, writes the same replies and grades, episode by episode."""
    from longhorizon.cli import main

    def replies(run):
        rows = [json.loads(line) for line in (run / "trajectories.jsonl").read_text().splitlines()]
        said = lambda m: (m.get("content"), [(c["function"]["name"], c["function"]["arguments"])  # noqa: E731
                                             for c in m.get("tool_calls") or []])  # call ids are the server's random ones
        return {r["episode_id"]: ([said(m) for m in r["messages"] if m["role"] == "assistant"],
                                  r["grade"]["passed"], r["grade"]["reward"]) for r in rows}

    for name in ("a", "a2"):
        assert main(["run", "--policy", "openai", "--base-url", reproducible_server.base_url,
                     "--model", reproducible_server.model_name, "--family", "log_first_error", "--split", "holdout",
                     "--seeds", "1", "--max-turns", "2", "--max-tokens", "16", "--reproducible", "--quiet",
                     "--out", str(tmp_path / name)]) == 0
    a, a2 = replies(tmp_path / "a"), replies(tmp_path / "a2")
    assert len(a) == 1 and all(turns for turns, _, _ in a.values())
    assert a == a2
