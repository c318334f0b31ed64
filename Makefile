# msa-release: two commands for a new user: `make release` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
UV_VERSION := 0.13.9
# uv from PATH if present, else a pinned copy bootstrapped into .tools/ from PyPI
UV := $(shell command -v uv 2>/dev/null || echo .tools/bin/uv)
VENV := .venv
export MSA_RELEASE_HOME ?= $(CURDIR)/var
export GX_ANALYTICS_ENABLED := false
export DAGSTER_HOME ?= $(MSA_RELEASE_HOME)/dagster

.PHONY: dagster-home ui-screenshots release test test-fast lint typecheck experiments attacks privacy-report kl-quality bench bench-kl ui env kernels clean

.tools/bin/uv:
	$(PYTHON) -m venv .tools
	.tools/bin/pip install --quiet uv==$(UV_VERSION)

$(VENV)/.installed: pyproject.toml uv.lock | $(UV)
	$(UV) sync --frozen --compile-bytecode --python $(PYTHON)
	touch $@

# the release's compiled loops, ahead of time (pipeline/core/compiled.py): built once for the kernels' current sources
# (nothing to do, and nothing printed, when that module is there); without a C compiler the step says so and the
# kernels run just in time (numba), with the same results
kernels: $(VENV)/.installed
	$(VENV)/bin/python -m pipeline.core.compiled

env: $(VENV)/.installed kernels

# the instance configuration of pipeline/cli/common.py (run queue, run monitoring, run retries, no telemetry)
# (always run: it writes the file when missing and upgrades the telemetry-only file of earlier versions)
dagster-home: env
	$(VENV)/bin/python -c 'import sys; from pathlib import Path; from pipeline.cli.common import write_dagster_yaml; write_dagster_yaml(Path(sys.argv[1]))' '$(DAGSTER_HOME)'

# Adult's default release deletes about 19.8 % of its eligible records, above the utility gate's default of 10 %:
# the example accepts up to 25 % explicitly (shown as an override in the summary, report.html and the manifest).
# publishes UCI Adult through the default engine (local: the sharded_release job, Adult is one shard); its gates print PASS
release: env dagster-home
	$(VENV)/bin/msa-release run --max-deleted-share 0.25

experiments: env dagster-home
	$(VENV)/bin/msa-release experiments --output reports/experiments

attacks: env dagster-home
	$(VENV)/bin/msa-release attacks --output reports/attacks

# the attacks of issue 12 (order replay, learned model, certain cells, composition, one known value) -> reports/attacks/PRIVACY.md
privacy-report: env
	$(VENV)/bin/msa-release privacy-report --output reports/attacks

kl-quality: env
	$(VENV)/bin/msa-release kl-quality --output reports/kl_quality

# release benchmark (issues 5, 17 and 18): make bench [SECTIONS=sizes,peers] [SIZES=adult,kdd,1m,3m,10m,30m,100m] [RUNS=3]
#   [RUNS_LARGE=1] [ENGINE=memory|local|spark, or a comma-separated list; default memory = today's job] [WORKERS=2]
#   [SPARK_MASTER=local[2]] [SPARK_REMOTE=sc://host:15002] [OUTPUT=reports/bench] -> reports/bench/
# SECTIONS=peers: msa-release and anjana side by side on Adult (anjana in its own pinned environment under
#   var/bench/peers/, built once with uv from benchmarks/peers-requirements.txt) -> peers.md, peers.json
bench: env
	$(VENV)/bin/python benchmarks/bench_release.py $(if $(SECTIONS),--sections $(SECTIONS)) $(if $(SIZES),--sizes $(SIZES)) $(if $(RUNS),--runs $(RUNS)) $(if $(RUNS_LARGE),--runs-large $(RUNS_LARGE)) $(if $(ENGINE),--engine $(ENGINE)) $(if $(WORKERS),--workers $(WORKERS)) $(if $(SPARK_MASTER),--spark-master '$(SPARK_MASTER)') $(if $(SPARK_REMOTE),--spark-remote '$(SPARK_REMOTE)') $(if $(OUTPUT),--output $(OUTPUT))

# (k, ℓ) blocked method on all of Adult: time and memory targets
bench-kl: env
	$(VENV)/bin/python benchmarks/bench_kl_adult.py

test: env lint typecheck
	$(VENV)/bin/python -m pytest -q

# ruff (pyproject.toml [tool.ruff]): lint and format, zero findings; part of make test
lint: env
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# mypy (pyproject.toml [tool.mypy]): strict on pipeline/core, pipeline/models and pipeline/engines, zero findings; part of make test
typecheck: env
	$(VENV)/bin/mypy

# the fast loop for development: everything but the end-to-end, browser and full-Adult tests (CI runs `make test`)
test-fast: env
	$(VENV)/bin/python -m pytest -q -n 2 -m "not e2e and not browser and not slow"

ui: env dagster-home
	$(VENV)/bin/dagster dev -w workspace.yaml -h 127.0.0.1 -p $${PORT:-3000}

ui-screenshots: env
	MSA_RELEASE_SAVE_SCREENSHOTS=1 $(VENV)/bin/python -m pytest -q tests/e2e/test_browser.py

clean:
	rm -rf $(VENV) .tools pipeline/core/_compiled
