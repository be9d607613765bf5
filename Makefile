# gleaner: build, test and demo. `make help` lists the targets.
GO      ?= go
BIN     := bin/gleaner
PKGS    := ./...
FUZZTIME ?= 20s

.PHONY: help build test console-shots race lint demo images demo-image model-image bench bench-smoke fuzz soak sim clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

build: ## build bin/gleaner
	$(GO) build -o $(BIN) ./cmd/gleaner

test: lint ## lint, then every test (unit, 20-node network, RPC transcripts, CLI harness, the console in Chromium)
	@command -v chromium >/dev/null || (echo "installing chromium for the console's browser test"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || echo "could not install chromium (not root?): TestConsoleInChromium will skip, loudly"
	$(GO) test -count=1 -parallel $(TEST_PARALLEL) -timeout 25m $(call longest_first,$(SLOW_TESTS)) $(PKGS)

console-shots: ## regenerate docs/console/*.png: the console's pages in headless Chromium against real nodes
	GLEANER_CONSOLE_SHOTS=$(CURDIR)/docs/console $(GO) test -count=1 -run 'InChromium' ./node/console/

race: ## every test under the race detector (slower; about 6 minutes on 2 cores)
	$(GO) test -race -count=1 -timeout 30m $(PKGS)

lint: ## gofmt and go vet must be clean
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

demo: build demo-image ## a 5-node local testnet: 3 nodes sell simulated GPUs, one rents one and runs a job in Docker
	./$(BIN) testnet up --nodes 5 --providers 3 --job docs/examples/demo-job.yaml --run-for 3s

# The images are built through the Engine API with BuildKit, as the tests
# build them (testnet/staticimage): the docker CLI without buildx would
# use its legacy builder and print its deprecation warning.
demo-image: ## the demo workload as a Docker image built FROM scratch (no registry needed)
	$(GO) run ./testnet/staticimage/cmd/build-image demo

images: demo-image model-image ## every image the docs use: gleaner-demojob:1 (job examples) and gleaner-modelserver:dev (service examples)

model-image: ## the test model server (testnet/modelserver) as gleaner-modelserver:dev, FROM scratch, uid 65534, port 8000
	$(GO) run ./testnet/staticimage/cmd/build-image model

.PHONY: gpu-check
GPU_IMAGE ?= nvidia/cuda:12.4.1-base-ubuntu22.04
gpu-check: ## on a host with an NVIDIA GPU: NVML inventory, signed telemetry, a container on one GPU by UUID, a CUDA job and an owner's process (skips without one; docs/INSTALL.md)
	GO=$(GO) BIN=$(BIN) GPU_IMAGE=$(GPU_IMAGE) sh scripts/gpu-check.sh

.PHONY: node-image
NODE_IMAGE ?= gleaner-node:latest
node-image: ## the node's container image from deploy/Dockerfile as NODE_IMAGE (pulls golang; docs/INSTALL.md)
	docker build -f deploy/Dockerfile -t $(NODE_IMAGE) .

bench: build ## every benchmark; results go in docs/PERFORMANCE.md
	$(GO) test -run '^$$' -bench . -benchtime 20x -timeout 30m ./p2p
	$(GO) test -run '^$$' -bench . -benchtime 3s -timeout 10m ./node/rpc
	$(GO) test -run '^$$' -bench . -benchtime 20x -timeout 10m ./auction
	$(GO) test -run '^$$' -bench . -benchtime 10x -timeout 20m ./node
	$(GO) test -run '^$$' -bench . -benchtime 10x -timeout 20m ./node/offers
	$(GO) test -run '^$$' -bench . -benchtime 3x -timeout 10m ./node/replicate
	$(GO) test -run '^$$' -bench . -benchtime 10x -timeout 10m ./cmd/gleaner
	$(GO) test -run '^$$' -bench . -benchtime 3x -timeout 20m ./testnet/sim
	$(GO) test -run '^$$' -bench . -benchtime 5x -benchmem -timeout 10m ./node/data
	$(GO) test -run '^$$' -bench . -benchtime 20x -timeout 10m ./node/gangnet

# Most tests wait on their own daemons and containers, not on the CPU:
# those marked parallel (waitsOnItsOwnJobs, waitsApart) run this many at
# once in a package, not GOMAXPROCS (two on a 2-core machine).
TEST_PARALLEL ?= 4

# go test starts packages in the order given (-p at a time): the slowest
# go first, so that none starts last and runs alone. Only for the whole
# tree; PKGS=./auction runs just that.
SLOW_TESTS   := ./node ./cmd/gleaner ./testnet ./testnet/readme ./node/executor
SLOW_BENCHES := ./testnet ./node
longest_first = $(if $(filter ./...,$(PKGS)),$(1))

# Two packages' benchmarks at once: each benchmark runs once, so its
# figures are not the point here (`make bench` runs them alone), and the
# testnet's Docker and NAT benchmarks wait more than they compute. The
# soak runs 75 s of faults here (three kills and a partition with seed 1;
# `make soak` runs the full one).
bench-smoke: ## every benchmark once, so that a change that breaks one does not land (CI runs it)
	GLEANER_SOAK_DURATION=$${GLEANER_SOAK_DURATION:-75s} $(GO) test -count=1 -p 2 -run '^$$' -bench . -benchtime 1x -timeout 30m $(call longest_first,$(SLOW_BENCHES)) $(PKGS)

DURATION ?= 10m
SEED     ?= 1
soak: ## the fault soak: 8 daemons in containers, kill -9, clean stops, partitions, for DURATION (10m) with SEED (1); report in build/soak-report.json
	@mkdir -p build
	GLEANER_SOAK_DURATION=$(DURATION) GLEANER_SOAK_SEED=$(SEED) GLEANER_SOAK_REPORT=$(CURDIR)/build/soak-report.json \
	  $(GO) test -count=1 -run '^$$' -bench '^BenchmarkFaultSoak$$' -benchtime 1x -v -timeout 60m ./testnet

PROVIDERS ?= 200
DAYS      ?= 7
sim: build ## the market simulator on the traces: PROVIDERS (200) for DAYS (7) with SEED (1); report in build/sim (docs/SIM.md)
	./bin/gleaner sim --providers $(PROVIDERS) --days $(DAYS) --seed $(SEED) --out build/sim

fuzz: ## run each fuzzer for FUZZTIME
	$(GO) test -run '^$$' -fuzz '^FuzzReadFrame$$' -fuzztime $(FUZZTIME) ./p2p
	$(GO) test -run '^$$' -fuzz '^FuzzFrameMeter$$' -fuzztime $(FUZZTIME) ./p2p
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRequest$$' -fuzztime $(FUZZTIME) ./node/rpc
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeSignedOffer$$' -fuzztime $(FUZZTIME) ./auction
	$(GO) test -run '^$$' -fuzz '^FuzzParseQuery$$' -fuzztime $(FUZZTIME) ./auction
	$(GO) test -run '^$$' -fuzz '^FuzzParseJobSpec$$' -fuzztime $(FUZZTIME) ./auction
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeSignedBid$$' -fuzztime $(FUZZTIME) ./auction
	$(GO) test -run '^$$' -fuzz '^FuzzJobMessages$$' -fuzztime $(FUZZTIME) ./node
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeSignedLease$$' -fuzztime $(FUZZTIME) ./auction
	$(GO) test -run '^$$' -fuzz '^FuzzHostOrigin$$' -fuzztime $(FUZZTIME) ./node/rpc
	$(GO) test -run '^$$' -fuzz '^FuzzGatewayHostOrigin$$' -fuzztime $(FUZZTIME) ./node/gateway
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeSignedVoucher$$' -fuzztime $(FUZZTIME) ./ledger
	$(GO) test -run '^$$' -fuzz '^FuzzVerifyAnyProof$$' -fuzztime $(FUZZTIME) ./ledger
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeSignedEntry$$' -fuzztime $(FUZZTIME) ./ledger
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeClaim$$' -fuzztime $(FUZZTIME) ./attest
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeSignedSample$$' -fuzztime $(FUZZTIME) ./attest
	$(GO) test -run '^$$' -fuzz '^FuzzReadDemandCSV$$' -fuzztime $(FUZZTIME) ./testnet/sim
	$(GO) test -run '^$$' -fuzz '^FuzzExportBlock$$' -fuzztime $(FUZZTIME) ./node/data
	$(GO) test -run '^$$' -fuzz '^FuzzGangHeader$$' -fuzztime $(FUZZTIME) ./node/gangnet
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeRoster$$' -fuzztime $(FUZZTIME) ./node/gangnet

clean: ## remove build output
	rm -rf bin build
