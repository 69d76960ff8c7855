# The project's commands. Each one creates .venv and installs what it needs on first use.
SHELL := /bin/bash
PY := .venv/bin/python
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1

.PHONY: demo test lint synth bench clean setup java

.venv/.installed: requirements.txt requirements-dev.txt requirements-lambda.txt once_cdk/requirements-lambda.txt pyproject.toml
	@test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps -e .
	@touch $@

node_modules/.installed: package.json
	npm install --no-audit --no-fund --silent
	@touch $@

# The Lambda's dependencies, for its platform, cached before anything runs offline.
build/.lambda-deps: once_cdk/requirements-lambda.txt once_cdk/bundling.py .venv/.installed
	$(PY) -c "from once_cdk.bundling import cached_dependencies; cached_dependencies()"
	@touch $@

java:
	@command -v java >/dev/null || (apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless)

setup: .venv/.installed node_modules/.installed build/.lambda-deps java

demo: setup
	.venv/bin/once demo

lint: .venv/.installed
	.venv/bin/ruff check .
	.venv/bin/ruff format --check functions oncecli once_cdk infra examples tests app.py
	.venv/bin/mypy

# DynamoDB Local cannot choose its listen address, so the suite runs in a private network
# namespace with loopback up (the chaos and DynamoDB Local tests check that they are in one).
test: setup lint
	@unshare -n true 2>/dev/null || { echo "make test: 'unshare -n' is not permitted here, and the DynamoDB Local suites need a private network namespace: run as root or with CAP_SYS_ADMIN." >&2; exit 1; }
	unshare -n sh -c 'ip link set lo up && exec $(PY) -m pytest'

synth: setup
	npx cdk synth --quiet -o cdk.out

bench: setup
	$(PY) -m oncecli.bench

clean:
	rm -rf .venv node_modules cdk.out build .pytest_cache .ruff_cache
