# The two commands a user needs: `make demo` (try it) and `make test` (run the tests).
# `make bench` runs the benchmarks (bench/README.md). `make test-stress` runs the tests
# with every core kept busy by another process (hack/cpu_load.py), as on a shared machine.
# Everything they need is installed here: Python deps into .venv, and kube-apiserver,
# etcd, kube-controller-manager, helm, and for the e2e tier kube-scheduler, kwok and the
# KubeRay operator, and Argo CD (server, CLI, application controller: one binary), built
# side by side from the Go module proxy into ~/.cache/gitops-ray (first run only); and
# Debian's redis-server (Argo CD's cache), chromium + chromium-driver (the web page's
# browser tests) and docker-registry (the OCI chart tests), apt-installed only when they
# are not on PATH.
# `python -m localcluster --kuberay` runs that Ray stack by hand, `--argocd` Argo CD.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# The test modules run side by side in PYTEST_WORKERS processes (pytest-xdist): the tests
# wait far more than they compute (control planes, controllers, subprocess CLIs, leases).
# Each worker is a pytest session of its own: its own control plane (and Ray stack, Argo CD
# when its modules need them), its own temporary directories; `--dist loadgroup` keeps a
# module's tests (and its module-scoped fixtures) on one worker, and each heavy stack's
# tests on one (tests/harness/groups.py). PYTEST_WORKERS=0 runs
# them in this process, one after another. Measured in DEVELOPMENT.md ("Where the
# suite's time goes").
PYTEST_WORKERS ?= 4
# Python writes its bytecode caches (`__pycache__`, and pytest's rewritten test modules)
# here even where the environment says not to: the suite starts hundreds of Python
# processes (controllers, `python -m gitops_ray`, child pools, the autoscaler's provider),
# and each one compiled gitops_ray, the kubernetes client and ray from source again,
# 2.5 CPU-seconds a start instead of 1 (DEVELOPMENT.md, "Where the suite's time goes").
unexport PYTHONDONTWRITEBYTECODE
XDIST := $(if $(filter 0,$(PYTEST_WORKERS)),,-n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder)

.PHONY: test test-fast test-stress lint tools redis chromium docker-registry dev-cluster demo bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip uv
	$(VENV)/bin/uv pip install -q --python $(PY) -e '.[test]'
	touch $@

tools: $(VENV)/.installed redis chromium docker-registry
	$(PY) -m localcluster build

# redis-server for the Argo CD tests: installed only when missing (sudo only when not root).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT := $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get
redis:
	@command -v redis-server >/dev/null || $(APT) install -y redis-server \
		|| { $(APT) update && $(APT) install -y redis-server; }

# Headless Chromium and chromedriver for the web page's browser tests
# (tests/e2e/test_web_browser.py): Debian's packages, installed only when missing.
chromium:
	@{ command -v chromium && command -v chromedriver; } >/dev/null \
		|| $(APT) install -y chromium chromium-driver \
		|| { $(APT) update && $(APT) install -y chromium chromium-driver; }

# The CNCF distribution registry for the OCI chart tests (tests/chartservers.py): Debian's
# docker-registry, installed only when missing. Its systemd unit is not needed (the tests
# run their own registry on 127.0.0.1).
docker-registry:
	@command -v docker-registry >/dev/null || $(APT) install -y docker-registry \
		|| { $(APT) update && $(APT) install -y docker-registry; }

lint: $(VENV)/.installed
	$(VENV)/bin/ruff check gitops_ray localcluster tests bench examples
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q -p no:cacheprovider tests/unit/test_code_size.py  # module/function sizes

# Lint runs beside the tests, not before them: it is one process on one core for ~25 s (mypy
# without a cache in a clean clone), and the tests' workers leave a core idle often enough
# to take it. Its output is printed after the tests' (from $(LINT_LOG)); either failing
# fails `make test`.
LINT_LOG := $(VENV)/lint.log
test: tools
	@$(MAKE) --no-print-directory lint > $(LINT_LOG) 2>&1 & lint=$$!; \
	$(PY) -m pytest $(XDIST) $(PYTEST_ARGS); tests=$$?; \
	wait $$lint; linted=$$?; cat $(LINT_LOG); \
	[ $$linted = 0 ] || echo "make test: lint failed (above)" >&2; \
	exit $$(( tests || linted ))

# The development loop: the unit and integration tiers only (markers set from each test's
# directory by tests/conftest.py); `make test` runs every tier.
test-fast: tools
	$(PY) -m pytest $(XDIST) -m "unit or integration" $(PYTEST_ARGS)

STRESS_CORES ?= $(shell $(PYTHON) -c 'import os; print(len(os.sched_getaffinity(0)))')

test-stress: lint tools
	$(PY) hack/cpu_load.py --cores $(STRESS_CORES) -- $(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

dev-cluster: tools
	$(PY) -m localcluster

demo: tools
	$(PY) examples/demo.py

bench: tools
	$(PY) -m bench.run

clean:
	rm -rf $(VENV)

# `make image`: the controller image the Helm chart runs by default,
# ghcr.io/gitops-ray/gitops-ray:<appVersion of charts/gitops-ray/Chart.yaml>. Override
# IMAGE to push elsewhere (then set the chart's image.repository/image.tag to match).
# The base images are the *_IMAGE ARGs of the Dockerfile, which must be pinned by digest
# (name:tag@sha256:...); UNPINNED=1 builds from their tags anyway.
IMAGE ?= ghcr.io/gitops-ray/gitops-ray:$(shell sed -n 's/^appVersion: *"*\([^"]*\)"*$$/\1/p' charts/gitops-ray/Chart.yaml)
DOCKER ?= docker

.PHONY: image
image:
	@if grep -E '^ARG [A-Z_]+_IMAGE=' Dockerfile | grep -v '@sha256:' && [ -z "$(UNPINNED)" ]; then \
		echo "Dockerfile: the base images above are not pinned by digest; see the comment" \
		     "above them (or build from the tags with: make image UNPINNED=1)" >&2; exit 1; fi
	$(DOCKER) build -t $(IMAGE) .
