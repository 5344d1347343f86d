# The library, the examples and the benchmark build with a plain `go build`.
# Only ring's test binary links giouring (the oracle of ring's own io_uring
# binding), which reaches syscall.munmap through a go:linkname that Go 1.23+
# rejects unless the linker is told otherwise: test-go passes that flag to
# ring's tests alone (docs/decisions/0014-own-io_uring-binding.md).
RING_TEST_LDFLAGS := -ldflags=github.com/percore/percore/ring=-checklinkname=0

GO ?= go
SHELL_SCRIPTS := $(wildcard scripts/*.sh scripts/lib/*.sh scripts/testdata/fake-* .ci/run)

# The modules of the repository: the library (the root), the benchmark module
# (the peer servers, the load tools, the WebSocket interop tests and
# staticcheck: examples/bench, docs/decisions/0037-benchmark-module.md), the
# charts (scripts/benchplot), and examples/http_api, whose go-redis must not
# reach the library's go.mod (docs/decisions/0040-http-api-example-module.md).
# scripts/vegeta holds no code (a pinned tool).
BENCH_MOD := examples/bench
API_MOD := examples/http_api
MODULES := . $(BENCH_MOD) scripts/benchplot $(API_MOD)

.PHONY: all build test test-go tools lint bench bench-smoke clean

all: build

build:
	$(GO) build ./...
	$(GO) build -C $(BENCH_MOD) ./...
	$(GO) build -C $(API_MOD) -o /dev/null ./...

## test: the whole suite: lint, the benchmark harness in smoke mode, then
## go test -race over every package (the script tests included, and
## internal/buildcheck, which builds a module outside the checkout with a
## plain go build), last so that its summary lines end the output. Missing
## tools are installed first where that is possible (scripts/ensure-tools.sh).
test: tools lint bench-smoke test-go

tools:
	@./scripts/ensure-tools.sh

# Where io_uring cannot run (a container's seccomp profile,
# kernel.io_uring_disabled, an old kernel) its tests skip, and test-go says
# so first; PERCORE_REQUIRE_URING=1 (set by .ci/run) makes them fail instead.
# (echo -probe exits 3 for exactly that; go run reports it as status 1 and
# prints "exit status 3".) The allocation tests run once without -race first:
# under -race sync.Pool drops what is put back at random, by design, so the
# tests that count what the pool saves skip there.
test-go:
	@why=$$($(GO) run ./examples/echo -probe -backend uring 2>&1) || \
	  if echo "$$why" | grep -q '^exit status 3$$'; then \
	    fate="are skipped"; \
	    if [ -n "$${PERCORE_REQUIRE_URING:-}" ]; then fate="will fail (PERCORE_REQUIRE_URING is set)"; fi; \
	    echo "note: io_uring cannot run here ($$(echo "$$why" | grep -m 1 '^echo: ' | cut -c 7-)): its tests $$fate"; \
	  fi
	$(GO) test -count=1 -timeout 5m -run 'Alloc' $(RING_TEST_LDFLAGS) ./...
	$(GO) test -C $(BENCH_MOD) -count=1 -timeout 5m -run 'Alloc' ./...
	$(GO) test -C scripts/benchplot -count=1 ./...
	$(GO) test -C $(BENCH_MOD) -race -count=1 -timeout 10m ./...
	$(GO) test -C $(API_MOD) -race -count=1 -timeout 5m ./...
	$(GO) test -race -count=1 -timeout 15m $(RING_TEST_LDFLAGS) ./...

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@for m in $(MODULES); do echo "$(GO) vet ./... (in $$m)"; $(GO) vet -C $$m ./... || exit 1; done
	@# staticcheck is pinned by a tool line in the benchmark module's go.mod
	@# (so that the library's go.mod does not require it) and run over every
	@# module from its own directory.
	@sc=$$(mktemp -d)/staticcheck && trap 'rm -rf "$$(dirname "$$sc")"' EXIT && \
	  $(GO) build -C $(BENCH_MOD) -o "$$sc" honnef.co/go/tools/cmd/staticcheck && \
	  for m in $(MODULES); do echo "staticcheck ./... (in $$m)"; (cd $$m && "$$sc" ./...) || exit 1; done
	@if [ -n "$(SHELL_SCRIPTS)" ]; then \
	  if command -v shellcheck >/dev/null; then shellcheck -x $(SHELL_SCRIPTS); \
	  else echo "shellcheck is not installed (apt-get install -y shellcheck)"; exit 1; fi; fi

## bench: the side-by-side benchmark (scripts/bench.sh); BENCH=full for more, BENCH=resp for
## examples/kv against redis-server and examples/redis_proxy against twemproxy (scripts/bench-resp.sh),
## BENCH=http for examples/http and examples/http_proxy against nginx, h2o, fasthttp, gnet and
## net/http (scripts/bench-http.sh), BENCH=transports for UDP and
## Unix-socket echo against gnet, std net and a C recvmmsg loop (scripts/bench-transports.sh),
## BENCH=latency for open-loop latency against throughput of the echo, HTTP and RESP servers
## and their peers, with the issue-29 floors and vegeta beside examples/bench/load
## (scripts/bench-latency.sh; in batches: PROTOCOLS, CONNS, REPEAT_FROM, see its --help).
bench:
	./scripts/bench.sh

## bench-smoke: a few seconds of the harness, so that it cannot rot.
bench-smoke:
	BENCH=smoke ./scripts/bench.sh

clean:
	$(GO) clean ./...
	$(GO) clean -C $(BENCH_MOD) ./...
	$(GO) clean -C $(API_MOD) ./...
