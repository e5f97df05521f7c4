# errorownership — see README.md.
GO       ?= go
PKGS     ?= ./...
BENCHTIME ?= 1s

.PHONY: all build test lint bench fuzz demo clean

all: lint build test

## build: compile every package and the CLI into bin/
build:
	$(GO) build $(PKGS)
	$(GO) build -o bin/errorownership ./cmd/errorownership

## test: unit, integration and end-to-end tests (needs the PostgreSQL binaries)
test:
	$(GO) test -count=1 -timeout 30m $(PKGS)

## lint: go vet and gofmt
lint:
	$(GO) vet $(PKGS)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## bench: the benchmarks named in the issues, with their figures
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) $(PKGS)

## demo: the article's retry-storm chains and a coincidental error, analysed from the bundled traces
demo:
	@for s in chain_retry_every_hop chain_retry_budget chain_ownership coincidental; do \
		echo "=== $$s: $$(sed -n 's/.*"story": "\(.*\)",/\1/p' testdata/scenarios/$$s.expected.json | cut -c1-160)…"; \
		$(GO) run ./cmd/errorownership analyze --max-verdicts 5 testdata/scenarios/$$s.json || exit 1; \
	done

## fuzz: a short run of the analysis fuzzer
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzAnalyze -fuzztime 60s ./dependencyanalysis

clean:
	rm -rf bin
