# Developer entry points. `make test` is exactly what CI runs (.ci/run).

GO        ?= go
BIN       ?= bin/upgrade-agent
PKG       := github.com/upgrade-agent/upgrade-agent
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse --short=12 HEAD 2>/dev/null)
LDFLAGS   := -X $(PKG)/cmd.version=$(VERSION) -X $(PKG)/cmd.commit=$(COMMIT)
BENCHTIME ?= 1s
FUZZTIME  ?= 10s

.PHONY: all build test bench lint fuzz-smoke clean

all: lint test build

# A static binary (CGO_ENABLED=0), as gh, kubectl and terraform release
# theirs: nothing of it needs cgo (Go's own DNS resolver and user lookup),
# and a dynamically linked one pays about 2 ms of loading at every start.
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) .

test:
	bash scripts/test

# One table of every figure of spec/quality.md, each with its target and
# PASS/MISS, ratios measured in the same run (cmd/benchtable). The Go
# benchmarks of the packages stay runnable with
# go test -run '^$' -bench . -benchtime $(BENCHTIME) ./... (BENCHTIME above).
bench:
	$(GO) run ./cmd/benchtable

# staticcheck and deadcode are pinned in tools/go.mod (a module of their
# own, so building and testing the agent never fetches them); the first run
# downloads them through the Go module proxy.
TOOLS := -modfile=tools/go.mod

lint:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt -l reports:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) tool $(TOOLS) staticcheck ./...
	@out="$$($(GO) tool $(TOOLS) deadcode -test ./...)"; if [ -n "$$out" ]; then echo "deadcode reports:"; echo "$$out"; exit 1; fi

# Every Fuzz target of the module for FUZZTIME each (go test runs one
# fuzz target per package and invocation, hence the loop).
fuzz-smoke:
	@set -e; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' . | sort); do \
		dir=$$(dirname "$$f"); \
		for fn in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' "$$f"); do \
			echo "== $$dir $$fn"; \
			$(GO) test -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5s "./$$dir"; \
		done; \
	done

clean:
	rm -rf bin
