# rocketkv build entry points. `make run` and `make test` are the two
# commands a fresh machine needs; see README.md.

GO        ?= go
BIN       := bin
CMDS      := $(notdir $(wildcard cmd/*))
FUZZTIME  ?= 15s
FUZZMINIMIZETIME ?= 2s
BENCHTIME ?= 1s
BENCHCOUNT ?= 5

.PHONY: all build run test test-unit test-e2e test-node bench bench-broker bench-cq bench-scale fuzz lint clean

all: build

## build: compile every binary under cmd/ into bin/
build:
	@mkdir -p $(BIN)
	@for c in $(CMDS); do \
		echo "go build -o $(BIN)/$$c ./cmd/$$c"; \
		$(GO) build -o $(BIN)/$$c ./cmd/$$c || exit 1; \
	done

## run: build, then start a name server (:9876), a broker (:10911) with the store under ./data and the gRPC proxy (:8081);
## NAMESRV_PORT, BROKER_PORT and PROXY_PORT move them
run: build
	@scripts/run.sh

## test: lint, unit/integration tests with the race detector, then real-client tests
test: lint test-unit test-e2e test-node

test-unit:
	$(GO) test -race -timeout 20m ./...

test-e2e: build
	@if [ -d e2e ]; then cd e2e && ROCKETKV_BIN=$(CURDIR)/$(BIN) $(GO) test -timeout 20m -count=1 ./...; fi

test-node: build
	@if [ -f e2e/node/package.json ]; then scripts/node-test.sh; fi

## bench: go test benchmarks (BENCHCOUNT runs each, for medians)
bench:
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -count $(BENCHCOUNT) ./...

## bench-broker: build, then the broker figures of docs/BENCHMARKS.md (about 15 minutes); BENCHDIR holds the temporary stores
BENCHDIR ?= /var/tmp
bench-broker: build
	$(BIN)/bench produce --mode async --runs 5 --gogc 400 --dir $(BENCHDIR)
	$(BIN)/bench produce --mode sync --baseline=false --gogc 400 --dir $(BENCHDIR)
	$(BIN)/bench produce --mode async --baseline=false --gogc 400 --dir $(BENCHDIR) --broker-set flushDiskType=SYNC_FLUSH
	$(BIN)/bench produce --mode async --runs 3 --gogc 400 --dir $(BENCHDIR) --batch 16 -k 8
	$(BIN)/bench consume --mode push --gogc 400 --dir $(BENCHDIR)
	$(BIN)/bench e2e-latency --gogc 400 --dir $(BENCHDIR)
	$(BIN)/bench e2e-latency --rate 2000 --gogc 400 --dir $(BENCHDIR)
	$(BIN)/bench dispatch-lag --dir $(BENCHDIR)
	$(BIN)/bench dispatch-lag --rate 25000 --baseline=false --dir $(BENCHDIR)
	$(BIN)/bench dispatch-lag --rate 60000 --baseline=false --dir $(BENCHDIR)

## bench-cq: build, then the ConsumeQueue layout figures of docs/BENCHMARKS.md (about 90 minutes)
bench-cq: build
	$(BIN)/bench cq --stores kv --queues 1k,100k,1M --runs 3 --dir $(BENCHDIR)
	$(BIN)/bench cq --stores file --queues 1k --runs 3 --budget 4m --dir $(BENCHDIR)
	$(BIN)/bench cq --stores file --queues 100k --runs 1 --budget 4m --dir $(BENCHDIR)
	$(BIN)/bench cq --stores file --queues 1M --runs 1 --budget 6m --dir $(BENCHDIR)
	$(BIN)/bench cq --stores kv --queues 1k --runs 3 --compact=false --dir $(BENCHDIR)

## bench-scale: build, then a small `bench scale` (1k and 10k queues, KV and file ConsumeQueue side by side, a few minutes); docs/BENCHMARKS.md ("Scale: a million queues") has the full-size commands
bench-scale: build
	$(BIN)/bench scale --sizes 10x100,100x100 --messages 300000 --runs 3 --namesrv --dir $(BENCHDIR)

## fuzz: run every fuzz target for FUZZTIME each
fuzz:
	@FUZZTIME=$(FUZZTIME) FUZZMINIMIZETIME=$(FUZZMINIMIZETIME) scripts/fuzz.sh

## lint: gofmt and go vet (both modules)
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@if [ -d e2e ]; then cd e2e && $(GO) vet ./...; fi

clean:
	rm -rf $(BIN)
