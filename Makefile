# Every target bootstraps .venv from pyproject.toml on first use (and again when it changes).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The LiteLLM suite's gateway lives in a venv of its own (its dependencies are not calltap's);
# tests/with_litellm runs only once `make litellm` has built it, and is skipped with a reason before.
LITELLM_VENV  := .venv-litellm
LITELLM_STAMP := $(LITELLM_VENV)/.installed
# tests/with_phoenix exports calltap's spans to a real Arize Phoenix from a venv of its own (about
# 850 MB); it runs once `make phoenix` has built it, and is skipped with a reason before.
PHOENIX_VENV  := .venv-phoenix
PHOENIX_STAMP := $(PHOENIX_VENV)/.installed
# tests/with_gateway_bugs runs one LiteLLM release per venv: .venv-gw-<release> from
# tests/with_gateway_bugs/releases/<release>/requirements.txt.
GW_RELEASES := $(notdir $(wildcard tests/with_gateway_bugs/releases/*))
GW_STAMPS   := $(foreach release,$(GW_RELEASES),.venv-gw-$(release)/.installed)
# tests/with_portkey runs the Portkey gateway (Node.js) from node_modules of its own, installed by
# `npm ci` from the committed package-lock.json; skipped with a reason before `make portkey`.
PORTKEY_DIR   := tests/with_portkey/gateway
PORTKEY_STAMP := $(PORTKEY_DIR)/node_modules/.installed
# `make mutation` adds mutmut (the `mutation` extra) to .venv; [tool.mutmut] in pyproject.toml says
# what it mutates and which tests it runs. MUTANTS narrows a run to some mutant names, for example
# MUTANTS='calltap.sse.*'; MUTATION_CHILDREN is how many mutants run at once.
MUTATION_STAMP    := $(VENV)/.mutation-installed
MUTANTS           ?=
MUTATION_CHILDREN ?= $(shell nproc)
# `make image` builds the Dockerfile as IMAGE with podman (docker where podman is missing); see
# docs/image.md. IMAGE_BASE builds it on a local image instead of python:3.11-slim: `make
# image-base` makes one from Debian packages (as IMAGE_BASE_TAG) for machines that reach no
# registry, as CI. CA_BUNDLE, when it names a file, is handed to the build as the secret `ca`: pip
# trusts it behind a TLS-intercepting proxy, and it never enters a layer.
CONTAINER      ?= $(if $(shell command -v podman),podman,docker)
IMAGE          ?= localhost/calltap:latest
IMAGE_BASE     ?=
IMAGE_BASE_TAG ?= localhost/calltap-base:bookworm
CA_BUNDLE      ?= $(or $(PIP_CERT),$(SSL_CERT_FILE))
comma := ,
ifeq ($(notdir $(CONTAINER)),podman)
# chroot isolation: RUN steps need no OCI runtime (podman's default one cannot raise rlimits on
# some VMs); docker format: an OCI image would drop the HEALTHCHECK.
IMAGE_BUILD = $(CONTAINER) build --isolation chroot --format docker $(if $(IMAGE_BASE),--from $(IMAGE_BASE))
else
IMAGE_BUILD = DOCKER_BUILDKIT=1 $(CONTAINER) build \
	$(if $(IMAGE_BASE),--build-context base=docker-image://$(IMAGE_BASE))
endif
# The base: Debian bookworm's python3 (3.11) and venv module, without docs, man pages and locales.
IMAGE_BASE_PACKAGES := python3,python3-venv,ca-certificates
IMAGE_BASE_PATH     := /usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

.PHONY: demo test lint docs-check bench reliability litellm phoenix gateway-bugs portkey mutation clean \
	image image-base

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

$(LITELLM_STAMP): tests/with_litellm/requirements.txt
	$(PYTHON) -m venv $(LITELLM_VENV)
	$(LITELLM_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(LITELLM_VENV)/bin/python -m pip install --quiet -r tests/with_litellm/requirements.txt
	touch $(LITELLM_STAMP)

$(MUTATION_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,mutation]'
	touch $(MUTATION_STAMP)

litellm: $(LITELLM_STAMP)

$(PHOENIX_STAMP): tests/with_phoenix/requirements.txt
	$(PYTHON) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(PHOENIX_VENV)/bin/python -m pip install --quiet -r tests/with_phoenix/requirements.txt
	touch $(PHOENIX_STAMP)

phoenix: $(PHOENIX_STAMP)

.venv-gw-%/.installed: tests/with_gateway_bugs/releases/%/requirements.txt
	rm -rf .venv-gw-$*
	$(PYTHON) -m venv .venv-gw-$*
	.venv-gw-$*/bin/python -m pip install --quiet --upgrade pip
	.venv-gw-$*/bin/python -m pip install --quiet -r $<
	touch $@

gateway-bugs: $(GW_STAMPS)

# No install scripts run: the gateway's own (patch-package) patches nothing in its published build.
$(PORTKEY_STAMP): $(PORTKEY_DIR)/package.json $(PORTKEY_DIR)/package-lock.json
	cd $(PORTKEY_DIR) && npm ci --ignore-scripts --no-audit --no-fund
	touch $(PORTKEY_STAMP)

portkey: $(PORTKEY_STAMP)

demo: $(STAMP)
	$(BIN)/calltap demo

test: lint docs-check
	$(BIN)/python -m pytest -q

reliability: $(STAMP)
	$(BIN)/python -m pytest -q tests/reliability

lint: $(STAMP)
	$(BIN)/ruff check src tests bench tools

# Every relative link and anchor in README.md and docs/*.md resolves, and every `calltap` and `make`
# command in their shell blocks is one the CLI and this Makefile accept.
docs-check: $(STAMP)
	$(BIN)/python tools/docs_check.py

bench: $(STAMP)
	$(BIN)/python bench/compare_throughput.py
	$(BIN)/python bench/relay.py
	$(BIN)/python bench/streams.py

# Every run starts from fresh mutants, so the scores are those of the code and tests as they are.
mutation: $(MUTATION_STAMP)
	rm -rf mutants
	$(BIN)/mutmut run --max-children $(MUTATION_CHILDREN) $(MUTANTS)
	$(BIN)/python tools/mutation_scores.py

image:
	$(IMAGE_BUILD) $(if $(wildcard $(CA_BUNDLE)),--secret id=ca$(comma)src=$(CA_BUNDLE)) --tag $(IMAGE) .

# Built once: an existing IMAGE_BASE_TAG is kept (remove it to build it again).
image-base:
	@if $(CONTAINER) image inspect $(IMAGE_BASE_TAG) >/dev/null 2>&1; then \
		echo "$(IMAGE_BASE_TAG) exists"; \
	else \
		rootfs=$$(mktemp -d) && \
		mmdebstrap --variant=minbase --include=$(IMAGE_BASE_PACKAGES) \
			--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
			--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
			bookworm $$rootfs/rootfs.tar && \
		$(CONTAINER) import --change 'ENV PATH=$(IMAGE_BASE_PATH)' $$rootfs/rootfs.tar $(IMAGE_BASE_TAG); \
		status=$$?; rm -rf $$rootfs; exit $$status; \
	fi

clean:
	rm -rf $(VENV) $(LITELLM_VENV) $(PHOENIX_VENV) .venv-gw-* $(PORTKEY_DIR)/node_modules build src/*.egg-info .pytest_cache .ruff_cache .hypothesis \
		mutants
