"""New weights into a running vLLM server, without restarting it (RL's sampler after each step).

The mechanism (chosen by trying each on vLLM 0.32's CPU wheel; docs/serving.md says why):
the trainer writes its weights as one safetensors file into a folder (``write_weights``), then

    POST /pause?mode=wait                       finish what is in flight, admit nothing new
    POST /collective_rpc  {"method": "reload_weights", "kwargs": {"weights_path": FOLDER}}
    POST /reset_prefix_cache                    cached KV of the old weights must not be reused
    POST /resume

(``push_weights``). These are vLLM's dev-mode endpoints: the server must run with
``VLLM_SERVER_DEV_MODE=1`` (``VLLMServer(weight_sync=True)``, ``longhorizon serve --weight-sync``).
``reload_weights`` is the same worker call on the CPU and the CUDA wheel.

Tied embeddings: a model whose output layer shares the input embedding (SmolLM2, the tiny
Qwen3) is served *untied* (``tie_word_embeddings: false`` and its own ``lm_head.weight``), because
on CPU vLLM prepacks the output layer into its own copy that ``reload_weights`` does not rebuild:
a tied model kept sampling from its old output layer. The trainer's model stays tied; only the
served copy holds the weight twice (``servable_folder``, ``untied_copy``).
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from longhorizon.core.errors import InfraError

WEIGHTS_FILE = "model.safetensors"


def root_url(base_url: str) -> str:
    """The server's root (dev-mode endpoints live there) from its API root (``.../v1``)."""
    url = base_url.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


def push_weights(base_url: str, folder: str | Path, *, timeout_s: float = 600.0) -> float:
    """Make the server at ``base_url`` load the weights in ``folder``; the seconds it took.
    InfraError (with the server's answer) when a step is refused: a server without dev mode
    answers 404."""
    import httpx2

    root = root_url(base_url)
    t0 = time.perf_counter()
    with httpx2.Client(timeout=timeout_s) as client:
        _ok(client.post(f"{root}/pause", params={"mode": "wait"}), "pause")
        try:
            _ok(client.post(f"{root}/collective_rpc",
                            json={"method": "reload_weights", "kwargs": {"weights_path": str(folder)}}),
                "collective_rpc reload_weights")
            _ok(client.post(f"{root}/reset_prefix_cache"), "reset_prefix_cache")
        finally:
            _ok(client.post(f"{root}/resume"), "resume")
    return time.perf_counter() - t0


def _ok(resp, what: str) -> None:
    if resp.status_code == 404:
        raise InfraError(f"the server refused {what} (404): weight syncing needs vLLM's dev-mode endpoints "
                         "(start it with `longhorizon serve --weight-sync`, i.e. VLLM_SERVER_DEV_MODE=1)")
    if resp.status_code != 200:
        raise InfraError(f"the server refused {what} ({resp.status_code}): {resp.text[:500]}")


# -- the weights -------------------------------------------------------------------------------
def plain_state_dict(model) -> dict[str, Any]:
    """The model's weights under a plain transformers model's names: a PEFT model's LoRA deltas
    merged into fresh tensors (the trained model is left as it is), an untied ``lm_head.weight``."""
    from peft import PeftModel

    if isinstance(model, PeftModel):
        from peft.tuners.lora import LoraLayer

        base = model.get_base_model()
        state = {k: v for k, v in base.state_dict().items() if "lora_" not in k}
        for name, module in base.named_modules():
            if isinstance(module, LoraLayer):
                key = f"{name}.base_layer.weight"
                for adapter in module.active_adapters:
                    state[key] = state[key] + module.get_delta_weight(adapter).to(state[key].dtype)
        state = {k.replace(".base_layer.", "."): v for k, v in state.items()}
        model = base
    else:
        state = dict(model.state_dict())
    out = model.get_output_embeddings()
    if out is not None and "lm_head.weight" not in state:
        state["lm_head.weight"] = out.weight
    return state


def write_weights(model, folder: str | Path, dtype: str | None = None) -> Path:
    """``model``'s weights (``plain_state_dict``) as ``folder/model.safetensors`` in ``dtype``
    (the server's: fewer bytes to write and read, and vLLM rounds to it anyway)."""
    import torch
    from safetensors.torch import save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cast = getattr(torch, dtype) if dtype else None
    with torch.no_grad():
        tensors = {k: v.detach().to("cpu", dtype=cast if cast is not None and v.is_floating_point() else v.dtype)
                   .contiguous().clone() for k, v in plain_state_dict(model).items()}
    tmp = folder / (WEIGHTS_FILE + ".tmp")
    save_file(tensors, str(tmp), metadata={"format": "pt"})
    tmp.replace(folder / WEIGHTS_FILE)
    return folder / WEIGHTS_FILE


def untied_config(config: dict) -> dict:
    config = dict(config)
    config["tie_word_embeddings"] = False
    if isinstance(config.get("text_config"), dict):
        config["text_config"] = {**config["text_config"], "tie_word_embeddings": False}
    return config


def servable_folder(model, tokenizer, folder: str | Path, dtype: str | None = None) -> Path:
    """A model folder vLLM can serve and reload: ``model``'s config (untied), ``tokenizer`` with
    its chat template, and its current weights."""
    from peft import PeftModel

    from longhorizon.train.template import save_tokenizer

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    base = model.get_base_model() if isinstance(model, PeftModel) else model
    config = base.config.to_dict()
    config.setdefault("architectures", [type(base).__name__])
    (folder / "config.json").write_text(json.dumps(untied_config(config), indent=2) + "\n")
    if getattr(base, "generation_config", None) is not None:
        base.generation_config.save_pretrained(folder)
    save_tokenizer(tokenizer, folder)
    write_weights(model, folder, dtype)
    return folder


def is_tied(model_dir: str | Path) -> bool:
    try:
        config = json.loads((Path(model_dir) / "config.json").read_text())
    except (OSError, ValueError):
        return False
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    return bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False)))


def untied_copy(model_dir: str | Path, folder: str | Path) -> Path:
    """A copy of a model folder with an untied output layer (+ one embedding matrix of disk), for
    a server whose weights will be reloaded; a folder that is not tied is returned as it is."""
    model_dir = Path(model_dir)
    if not is_tied(model_dir):
        return model_dir
    from safetensors.torch import load_file, save_file

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state: dict = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        state.update(load_file(str(f)))
    if "lm_head.weight" not in state:
        embed = next((k for k in state if k.endswith("embed_tokens.weight")), None)
        if embed is None:
            raise InfraError(f"{model_dir}: tied embeddings, but no embed_tokens weight to untie")
        state["lm_head.weight"] = state[embed].clone()
    save_file({k: v.contiguous() for k, v in state.items()}, str(folder / WEIGHTS_FILE), metadata={"format": "pt"})
    config = json.loads((model_dir / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(untied_config(config), indent=2) + "\n")
    for f in model_dir.iterdir():  # tokenizer, chat template, generation config, provenance
        if f.is_file() and f.name != "config.json" and not f.name.startswith("model.safetensors") \
                and f.suffix != ".safetensors":
            shutil.copy2(f, folder / f.name)
    return folder
