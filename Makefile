# strandlab: see README.md. `make help` lists the targets.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

GO        ?= go
OUTPUT    ?= _output
BIN       := $(OUTPUT)/bin
ACTIONLINT_VERSION := v1.7.12
# staticcheck, run by make lint on both modules (go run fetches it through the
# module proxy; its analysis is cached in the Go build cache).
STATICCHECK_VERSION := v0.8.2

# make e2e variables (the contract in docs/design.md, "Contracts").
SCENARIO  ?= scenarios/seed-122413.yaml,scenarios/control.yaml
BUILDS    ?=
PROVIDER  ?=
CYCLES    ?=
SEED      ?=
# SEEDS: make calibrate's seeds (1-10, 1,3,7).
SEEDS     ?=
KEEP      ?=
# CHECK=1: exit 3 when a build is outside the scenario's expect band.
# RUN_ID_SUFFIX: appended to the run id, so CI shards run in the same second
# stay distinct for strandlab merge (docs/ci.md).
CHECK     ?=
RUN_ID_SUFFIX ?=
# PROVIDER=existing (docs/existing.md): the cluster of KUBECONFIG=<file>
# (read from the environment), only with CLUSTER_OWNER_CONSENT=1
# (--cluster-owner-consent).
CLUSTER_OWNER_CONSENT ?=
# CSI_DRIVER=upstream (kind, 1 worker): upstream's csi-driver-host-path from
# registry.k8s.io instead of strandlab's driver (docs/kind.md).
CSI_DRIVER ?=
# UNTIL_VERDICT=1: rounds of CYCLES (default: the scenario's) until each
# build's sequential test against stock decides (docs/statistics.md, "Until
# a verdict"); MAX_CYCLES bounds each build's cycles, VERDICT_ALPHA and
# VERDICT_MARGIN set the design.
UNTIL_VERDICT ?=
MAX_CYCLES ?=
VERDICT_ALPHA ?=
VERDICT_MARGIN ?=

RUN_FLAGS := --scenario $(SCENARIO) \
	$(if $(BUILDS),--builds $(BUILDS)) \
	$(if $(PROVIDER),--provider $(PROVIDER)) \
	$(if $(CYCLES),--cycles $(CYCLES)) \
	$(if $(SEED),--seed $(SEED)) \
	$(if $(filter 1 true yes,$(KEEP)),--keep) \
	$(if $(filter 1 true yes,$(CHECK)),--check) \
	$(if $(RUN_ID_SUFFIX),--run-id-suffix $(RUN_ID_SUFFIX)) \
	$(if $(CSI_DRIVER),--csi-driver $(CSI_DRIVER)) \
	$(if $(RUNTIME_TIMINGS),--runtime-timings $(RUNTIME_TIMINGS)) \
	$(if $(filter 1 true yes,$(CLUSTER_OWNER_CONSENT)),--cluster-owner-consent) \
	$(if $(filter 1 true yes,$(UNTIL_VERDICT)),--until-verdict) \
	$(if $(filter 0 false no,$(UNTIL_VERDICT)),--until-verdict=false) \
	$(if $(MAX_CYCLES),--max-cycles $(MAX_CYCLES)) \
	$(if $(VERDICT_ALPHA),--verdict-alpha $(VERDICT_ALPHA)) \
	$(if $(VERDICT_MARGIN),--verdict-margin $(VERDICT_MARGIN)) \
	--output $(OUTPUT)

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

.PHONY: binaries
binaries: ## build the pinned upstream binaries (cached by pin) and strandlab's own
	@tools/upstream/build.sh $(BIN) >/dev/null
	@$(GO) build -o $(BIN)/strandlab ./tools/strandlab

.PHONY: e2e
e2e: binaries ## run SCENARIO on a local cluster and write the report (vars: SCENARIO BUILDS PROVIDER CYCLES SEED KEEP CHECK RUN_ID_SUFFIX RUNTIME_TIMINGS CLUSTER_OWNER_CONSENT UNTIL_VERDICT MAX_CYCLES VERDICT_ALPHA VERDICT_MARGIN)
	@$(BIN)/strandlab run $(RUN_FLAGS)

.PHONY: soak
soak: ## run the long scenario (scenarios/soak.yaml)
	@$(MAKE) --no-print-directory e2e SCENARIO=scenarios/soak.yaml

# make bench (docs/performance.md): cycles per profile; BENCH_SCENARIOS
# replaces the two soak profiles (comma-separated files).
BENCH_CYCLES ?= 1000
BENCH_SCENARIOS ?=

.PHONY: bench
bench: binaries ## what a cycle costs: the soak's load without and with its faults, stock, BENCH_CYCLES cycles each (default 1000; PROVIDER=kind, BENCH_SCENARIOS=<files>; TIME_TO_VERDICT=3 adds the time to a verdict); writes _output/bench/<run>/bench.json
	@$(BIN)/strandlab bench --cycles $(BENCH_CYCLES) --output $(OUTPUT) \
	  $(if $(PROVIDER),--provider $(PROVIDER)) $(if $(BENCH_SCENARIOS),--scenario $(BENCH_SCENARIOS)) \
	  $(if $(TIME_TO_VERDICT),--time-to-verdict $(TIME_TO_VERDICT)) $(if $(VERDICT_SCENARIOS),--verdict-scenario $(VERDICT_SCENARIOS))

.PHONY: time-to-verdict
time-to-verdict: binaries ## minutes to a verdict alone: seed-122413, node-delay and soak until fix vs stock decides at p <= 0.001, TIME_TO_VERDICT runs each (default 3; VERDICT_SCENARIOS=<files>, PROVIDER=kind); hours for the soak
	@$(BIN)/strandlab bench --scenario '' --time-to-verdict $(or $(TIME_TO_VERDICT),3) --output $(OUTPUT) \
	  $(if $(PROVIDER),--provider $(PROVIDER)) $(if $(VERDICT_SCENARIOS),--verdict-scenario $(VERDICT_SCENARIOS))

.PHONY: calibrate
calibrate: binaries ## SCENARIO on local and kind, same SEEDS (e.g. 1-10), BUILDS and CYCLES (RUNTIME_TIMINGS=reference: kubelet-sim draws from the kind runs), and whether they agree: writes _output/calibration/<run>/calibration.md (docs/kind.md)
	@$(BIN)/strandlab calibrate --scenario $(SCENARIO) --output $(OUTPUT) \
	  $(if $(SEEDS),--seeds $(SEEDS)) $(if $(BUILDS),--builds $(BUILDS)) $(if $(CYCLES),--cycles $(CYCLES)) \
	  $(if $(RUNTIME_TIMINGS),--runtime-timings $(RUNTIME_TIMINGS))

.PHONY: test
test: lint binaries ## run all tests: lint, unit tests, e2e-framework suites (local provider; kind too when Docker runs)
	$(GO) test -count=1 -timeout 40m $$($(GO) list ./... | grep -v -e /e2e/kind$$ -e /e2e/kindrun$$)
	@# kubelet-sim's upstream volume manager: a module of its own.
	cd tools/upstream/kubelet-sim && CGO_ENABLED=0 $(GO) test -trimpath -count=1 ./...
	@# The kind suites run alone and one after the other (-p 1): their nodes
	@# would take the CPU the local suites' timings need (2 cores), and two
	@# kind clusters side by side starve a joining worker. The first run
	@# builds the node image.
	@docker version >/dev/null 2>&1 || echo "make test: no Docker daemon answers here: the kind suites (e2e/kind, e2e/kindrun) are skipped"
	$(GO) test -count=1 -p 1 -timeout 40m ./e2e/kind/ ./e2e/kindrun/

# STRANDLAB_UNIT_ONLY=1: a test that starts a component or builds the cluster
# binaries fails (internal/process, internal/upstream) instead of doing it.
.PHONY: unit
unit: ## unit tests only (no cluster)
	STRANDLAB_UNIT_ONLY=1 $(GO) test -short -count=1 ./...
	cd tools/upstream/kubelet-sim && CGO_ENABLED=0 $(GO) test -trimpath -short -count=1 ./...

.PHONY: lint
lint: ## gofmt, go vet and staticcheck on both modules, actionlint on the CI workflows, scenario validation
	@unformatted=$$(find . -name '*.go' -not -path './_output/*' -not -path './.git/*' | xargs gofmt -l); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed: $$unformatted"; exit 1; fi
	$(GO) vet ./...
	cd tools/upstream/kubelet-sim && $(GO) vet ./...
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	cd tools/upstream/kubelet-sim && $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...
	$(GO) run github.com/rhysd/actionlint/cmd/actionlint@$(ACTIONLINT_VERSION) .github/workflows/*.yml
	$(GO) run ./tools/strandlab validate scenarios/*.yaml scenarios/family/*.yaml

.PHONY: kind-image
kind-image: ## build the offline kind node image (no registry; cached by its inputs; prints its tag last)
	@tools/kind-image/build-node.sh $(OUTPUT)

.PHONY: images
images: ## build the FROM-scratch images of the programs run inside kind clusters (prints name=tag)
	@tools/images/build.sh $(OUTPUT)

# IMAGE_BUILDS: the controller builds the strandlab image carries besides stock.
IMAGE_BUILDS ?= fix

.PHONY: image
image: ## build the strandlab image: the local provider with its binaries and IMAGE_BUILDS (default fix), for the soak Job (prints strandlab=tag)
	@tools/images/build-strandlab.sh $(OUTPUT) $(IMAGE_BUILDS)

.PHONY: clean
clean: ## remove build outputs and reports (keeps the Go caches)
	rm -rf $(OUTPUT)

# make kcm / kcm-test: controller builds (tools/upstream/builds, docs/controller-builds.md).
BUILD     ?= fix

.PHONY: kcm
kcm: ## build a controller build's kube-controller-manager, cached (BUILD=<name>, default fix; prints its path last)
	@$(GO) run ./tools/strandlab kcm build $(BUILD)

.PHONY: kcm-test
kcm-test: ## go test the upstream packages a controller build touches, patched (BUILD=<name>, default fix)
	@$(GO) run ./tools/strandlab kcm test $(BUILD)
