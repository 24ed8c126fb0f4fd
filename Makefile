# OSM — Operating System Manager. `make help` lists the targets.
SHELL := /usr/bin/env bash -o pipefail
.DEFAULT_GOAL := help

export GOFLAGS ?= -buildvcs=false
CONTROLLER_GEN ?= go run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.22.0
GO_TEST_FLAGS ?= -count=1 -timeout 30m
RACE ?= -race
PHASE := hack/phase.sh
# -race multiplies a test's CPU time by 2 to 10 and finds bugs only where goroutines share memory, so it is kept
# for the packages with real concurrency: the controller's wiring, reconcilers and webhooks, the plugin manager
# and host and their sources, OCI pulls, node credentials, the render pipeline the workers share, admission's
# bounded plugin waits, and in the SDK the sandbox runtime. The rest is single-goroutine CPU work (osmctl, the
# default plugins, templates, encoders, API types) and runs without it: in a cold CI run under -race on two
# cores, cmd/osmctl took 580 s and plugins 297 s. RACE= turns -race off everywhere.
RACE_PKGS := ^github.com/osmhq/osm/(cmd/osm-controller|host/(app|clusterinfo|controllers/.*|credentials|internal/parallel|oci|plugin|pluginhost|render|validation|webhooks))$$
SDK_RACE_PKGS := ^github.com/osmhq/osm/sdk/runtime$$
BENCH_FLAGS ?= -run '^$$' -bench . -benchmem -count 5

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

##@ Main job and tests (the two commands of the README)

.PHONY: demo
demo: plugins ## Render a MachineDeployment's user-data offline with the embedded default profiles and plugins.
	go run ./cmd/osmctl render -f deploy/examples/machinedeployment-ubuntu.yaml --stage both

.PHONY: run
# Built and exec'd rather than go run, which exits 1 when Ctrl-C stops the program however cleanly it stopped;
# in a directory of its own, so no bin/osm-plugin-host of another build is taken for its plugin host.
run: plugins controlplane ## Local control plane with OSM's CRDs and the controller, webhooks on 127.0.0.1; prints how to kubectl it. RUN_FLAGS passes flags.
	go build -o bin/run/osm-run ./hack/run
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh)" exec bin/run/osm-run $(RUN_FLAGS)

.PHONY: test
test: ## Everything CI runs: generated files, lint, unit, integration and node e2e tests; prints each phase's time.
	@$(PHASE) verify-generate $(MAKE) --no-print-directory verify-generate
	@$(PHASE) lint $(MAKE) --no-print-directory lint
	@$(PHASE) plugins $(MAKE) --no-print-directory plugins
	@$(PHASE) controlplane $(MAKE) --no-print-directory controlplane
	@# make test does all the set-up on a fresh machine, so it allows the upgrades install-deps lists (README).
	@$(PHASE) deps env OSM_INSTALL_DEPS_UPGRADE=1 hack/install-deps.sh validate node-e2e
	@hack/e2e-node/prepare.sh start
	@$(PHASE) go-test-race $(MAKE) --no-print-directory go-test-race
	@$(PHASE) go-test $(MAKE) --no-print-directory go-test
	@$(PHASE) sdk-test $(MAKE) --no-print-directory sdk-test
	@$(PHASE) e2e-node $(MAKE) --no-print-directory e2e-node

.PHONY: unit
unit: plugins sdk-deps ## The fast loop: every package's tests with -short (no race, no lint, no root; tests that start a kube-apiserver skip).
	go test -short -count=1 ./...
	cd sdk && go test -short -count=1 ./...
	cd sdk/examples/opensuse && go test -short -count=1 ./...

# The test groups of make test (see RACE_PKGS); they expect plugins and controlplane built.
.PHONY: go-test-race go-test sdk-test sdk-deps
# The osmctl tests build scaffolded plugins offline (GOPROXY=off) against the local sdk module, so every module
# the sdk needs must be in the module cache first, which a build of the plugins alone does not download.
sdk-deps:
	cd sdk && go mod download
go-test-race:
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh)" go test $(GO_TEST_FLAGS) $(RACE) $$(go list ./... | grep -E '$(RACE_PKGS)')
go-test: sdk-deps
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh)" go test $(GO_TEST_FLAGS) $$(go list ./... | grep -vE '$(RACE_PKGS)')
sdk-test:
	cd sdk && go test $(GO_TEST_FLAGS) $(RACE) $$(go list ./... | grep -E '$(SDK_RACE_PKGS)')
	cd sdk && go test $(GO_TEST_FLAGS) $$(go list ./... | grep -vE '$(SDK_RACE_PKGS)')
	cd sdk/examples/opensuse && go test $(GO_TEST_FLAGS) ./...

.PHONY: e2e-node
e2e-node: plugins controlplane ## Boot real nodes (systemd-nspawn, needs root) from OSM's user-data against a real kube-apiserver.
	@$(PHASE) e2e-deps hack/install-deps.sh node-e2e
	@$(PHASE) e2e-prepare hack/e2e-node/prepare.sh wait
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh)" go test -tags e2e -count=1 -timeout 60m -v $(E2E_FLAGS) ./host/e2e/

.PHONY: e2e-machine-controller
# MACHINE_CONTROLLER_SRC builds machine-controller from a checkout with OSM's fake provider (hack/machine-controller);
# MACHINE_CONTROLLER and MACHINE_CONTROLLER_CRDS take a binary built some other way.
MACHINE_CONTROLLER_SRC ?=
e2e-machine-controller: controlplane ## Prove rollouts against a real machine-controller (fake provider): MACHINE_CONTROLLER_SRC=<checkout of kubermatic/machine-controller> (docs/drift.md).
	@test -n "$(MACHINE_CONTROLLER_SRC)$(MACHINE_CONTROLLER)" || { echo "usage: make e2e-machine-controller MACHINE_CONTROLLER_SRC=/path/to/machine-controller/checkout (see docs/drift.md, Proof)"; exit 2; }
	set -e; \
	if [[ -n "$(MACHINE_CONTROLLER_SRC)" ]]; then \
		mc="$$(hack/machine-controller/build.sh "$(MACHINE_CONTROLLER_SRC)")"; crds="$${mc}.yaml"; \
	else \
		mc="$(abspath $(MACHINE_CONTROLLER))"; crds="$(abspath $(MACHINE_CONTROLLER_CRDS))"; \
	fi; \
	OSM_MACHINE_CONTROLLER="$$mc" OSM_MACHINE_CONTROLLER_CRDS="$$crds" KUBEBUILDER_ASSETS="$$(hack/control-plane.sh)" \
		go test -tags machinecontroller -count=1 -timeout 20m -v ./host/e2e/machinecontroller/

# The vendor conformance run (host/e2e/conformance_test.go): the node e2e's harness boots PLUGIN with PROFILE on
# ROOTFS and reports each step of the boot contract, in the log and in REPORT.
PLUGIN ?=
PROFILE ?=
ROOTFS ?=
PROVIDER ?=
REPORT ?= conformance-report.md

.PHONY: conformance
conformance: plugins controlplane ## Boot PLUGIN (.wasm or OCI ref) with PROFILE (osp.yaml) on ROOTFS (dir or tarball) and report each boot contract step (root).
	@test -n "$(PROFILE)" || { echo "usage: make conformance PROFILE=osp.yaml [PLUGIN=myos.wasm|registry/osm/myos:tag] [ROOTFS=dir|rootfs.tar[.gz|.zst]] [PROVIDER=edge] [REPORT=conformance-report.md]"; exit 2; }
	@$(PHASE) e2e-deps hack/install-deps.sh node-e2e
	@$(PHASE) e2e-prepare hack/e2e-node/prepare.sh wait
	OSM_CONFORMANCE_PROFILE="$(abspath $(PROFILE))" OSM_CONFORMANCE_PLUGIN="$(if $(wildcard $(PLUGIN)),$(abspath $(PLUGIN)),$(PLUGIN))" \
	OSM_CONFORMANCE_ROOTFS="$(if $(ROOTFS),$(abspath $(ROOTFS)))" OSM_CONFORMANCE_PROVIDER="$(PROVIDER)" OSM_CONFORMANCE_REPORT="$(abspath $(REPORT))" \
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh)" go test -tags e2e -count=1 -timeout 30m -v -run '^TestConformance$$' ./host/e2e/

##@ Building

.PHONY: build
# The release version: stamped into the binaries and the image, and deploy/kustomization.yaml's image tag (a test
# keeps them equal).
VERSION ?= v0.1.0
IMAGE ?= ghcr.io/osmhq/osm-controller

build: plugins ## Build osm-controller and osmctl into bin/.
	go build -buildvcs=true -ldflags "-X github.com/osmhq/osm/host/buildinfo.Version=$(VERSION)" -o bin/ ./cmd/...

.PHONY: image
image: plugins ## Build the container image without a container daemon into dist/image (an OCI layout); PUSH=1 pushes $(IMAGE):$(VERSION).
	go run ./hack/image -version $(VERSION) -oci-layout dist/image $(if $(PUSH),-push $(IMAGE):$(VERSION))

.PHONY: plugins
plugins: ## Build the default OS plugins to wasm (plugins/dist), skipping unchanged ones.
	hack/build-plugins.sh

.PHONY: controlplane
controlplane: ## Build kube-apiserver, etcd and kubectl from the Go module proxy into the cache (once).
	hack/control-plane.sh >/dev/null

##@ Code generation and checks

.PHONY: generate
generate: ## Regenerate deepcopy code and the CRD YAML from the API types.
	$(CONTROLLER_GEN) object paths=./crds/...
	$(CONTROLLER_GEN) crd paths=./crds/osm/... output:crd:artifacts:config=crds/bases
	$(CONTROLLER_GEN) crd:generateEmbeddedObjectMeta=true paths=./crds/cluster/... output:crd:artifacts:config=crds/external

.PHONY: verify-generate
verify-generate: ## Fail if the generated files are stale (compares a fresh generation with the working tree).
	@before="$$(mktemp -d)"; cp -r crds "$$before/"; \
	$(MAKE) --no-print-directory generate >/dev/null; \
	diff -r "$$before/crds" crds || { echo "generated files under crds/ were stale; they are regenerated now: review and commit"; rm -rf "$$before"; exit 1; }; \
	rm -rf "$$before"

.PHONY: lint
lint: ## gofmt, go vet and golangci-lint on both modules.
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	go vet ./...
	cd sdk && go vet ./...
	"$$(hack/tools.sh golangci-lint)" run ./...
	cd sdk && "$$(../hack/tools.sh golangci-lint)" run --config ../.golangci.yml ./...
	cd sdk/examples/opensuse && go vet ./... && "$$(../../../hack/tools.sh golangci-lint)" run --config ../../../.golangci.yml ./...

.PHONY: fuzz
fuzz: plugins ## Fuzz every parser of untrusted input for FUZZTIME each (default 30s); crashers land in testdata/fuzz.
	hack/fuzz.sh $(FUZZTIME)

##@ Measurements

.PHONY: bench-controller
bench-controller: plugins controlplane ## Drop-in controller (default profiles, warm plugin cache), OSM_BENCH_MDS (500) MDs over OSM_BENCH_OS (ubuntu): time, process tree's peak RSS and CPU, writes per MD.
	KUBEBUILDER_ASSETS="$$(hack/control-plane.sh)" go test ./host/app -run '^$$' -bench '^BenchmarkController$$' -benchtime 1x -timeout 60m -v

.PHONY: bench-compare
bench-compare: plugins controlplane ## Alternate this controller and UPSTREAM=/path/to/osm-controller on fresh control planes; medians and ratios. OSM_BENCH_OS=ubuntu,flatcar,rhel,rockylinux,amzn2 mixes OSes.
	@test -n "$(UPSTREAM)" || { echo "usage: make bench-compare UPSTREAM=/path/to/osm-controller (see hack/bench/README.md)"; exit 1; }
	OSM_BENCH_UPSTREAM="$(abspath $(UPSTREAM))" KUBEBUILDER_ASSETS="$$(hack/control-plane.sh)" go test ./host/app -run '^$$' -bench '^BenchmarkCompare$$' -benchtime 1x -timeout 180m -v

.PHONY: bench-limits
bench-limits: plugins controlplane ## As a new pod under upstream's limits: this controller and UPSTREAM=... each in a cgroup v1 of cpu 100m and memory 256Mi (root), empty plugin cache, five default OSes; medians and ratios.
	@test -n "$(UPSTREAM)" || { echo "usage: make bench-limits UPSTREAM=/path/to/osm-controller (see hack/bench/README.md)"; exit 1; }
	OSM_BENCH_CGROUP=cpu=100m,memory=256Mi OSM_BENCH_EMPTY_CACHE=1 OSM_BENCH_OS=ubuntu,flatcar,rhel,rockylinux,amzn2 OSM_BENCH_MDS=$${OSM_BENCH_MDS:-5} \
		OSM_BENCH_UPSTREAM="$(abspath $(UPSTREAM))" KUBEBUILDER_ASSETS="$$(hack/control-plane.sh)" go test ./host/app -run '^$$' -bench '^BenchmarkCompare$$' -benchtime 1x -timeout 180m -v

.PHONY: bench-baseline
bench-baseline: plugins controlplane ## Alternate this controller and BASELINE=/path/to/an/earlier/osm-controller build of ours; medians and ratios.
	@test -n "$(BASELINE)" || { echo "usage: make bench-baseline BASELINE=/path/to/osm-controller (built from an earlier commit)"; exit 1; }
	OSM_BENCH_BASELINE="$(abspath $(BASELINE))" KUBEBUILDER_ASSETS="$$(hack/control-plane.sh)" go test ./host/app -run '^$$' -bench '^BenchmarkCompare$$' -benchtime 1x -timeout 180m -v

.PHONY: bench
bench: plugins ## Run the benchmarks (plugin runtime, render pipeline, default plugins) and print medians.
	go test $(BENCH_FLAGS) ./host/plugin/... ./host/render/... ./plugins/... | tee bench.out
	cd sdk && go test $(BENCH_FLAGS) ./... | tee ../bench-sdk.out
