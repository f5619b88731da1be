# Set-up is part of every target: a fresh machine needs only python3 (and apt for bubblewrap).
VENV   := .venv
PY     := $(VENV)/bin/python
LH     := $(VENV)/bin/longhorizon
SEEDS  ?= 10
DEMO   ?= runs/demo

.PHONY: setup demo test bench clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@command -v bwrap >/dev/null || { echo "installing bubblewrap (the shell app's sandbox)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get install -y -q bubblewrap >/dev/null 2>&1 || { $$SUDO apt-get update -q && $$SUDO apt-get install -y -q bubblewrap; }; }
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install -q --upgrade pip
	$(VENV)/bin/pip install -q torch==2.13.0
	$(VENV)/bin/pip install -q -e '.[test,model]'
	touch $@

# The main job on the embedded defaults: oracle and null policies over the train split,
# evaluated and compared. Reruns resume (delete $(DEMO) to start over).
demo: setup
	$(LH) run --policy oracle --split train --seeds $(SEEDS) --out $(DEMO)/oracle
	$(LH) run --policy null --split train --seeds $(SEEDS) --out $(DEMO)/null
	$(LH) eval $(DEMO)/oracle
	$(LH) eval $(DEMO)/null
	$(LH) compare $(DEMO)/null $(DEMO)/oracle

test: setup
	$(VENV)/bin/pytest

bench: setup
	$(PY) benchmarks/world_and_tools.py

clean:
	rm -rf $(VENV) runs .pytest_cache
