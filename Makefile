# batchkit — build, demo, test. `make demo` and `make test` are the two
# commands a newcomer runs on a fresh Debian machine (see README.md).

SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)

BIN      := bin/batchkit
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
GO       ?= go
FUZZTIME ?= 20s

.PHONY: all build build-mpi demo bench bench-train test vet unit integration fuzz cluster-up cluster-down cluster-status clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/batchkit

# The binary with the cgo MPI backend: MPI=openmpi (build tag mpi) or
# MPI=mpich (tag mpich). Written to bin/batchkit-$(MPI).
#
# MPI=mpich-abi: the MPICH build for the MPICH ABI family (Intel MPI, Cray
# MPICH, MVAPICH2, MPICH installed from source or Spack), whose library is
# libmpi.so.12; Debian's MPICH names it libmpich.so.12, so the binary's
# dependency is renamed with patchelf (run it here with LD_LIBRARY_PATH
# pointing at a libmpi.so.12 link to Debian's library; see README).
MPI ?=
build-mpi:
	@set -e; case '$(MPI)' in \
	  openmpi)   tag=mpi pc=ompi pkg=libopenmpi-dev ;; \
	  mpich)     tag=mpich pc=mpich pkg=libmpich-dev ;; \
	  mpich-abi) tag=mpich pc=mpich pkg=libmpich-dev ;; \
	  *) echo "make build-mpi: set MPI=openmpi, MPI=mpich or MPI=mpich-abi (got '$(MPI)')" >&2; exit 2 ;; \
	esac; \
	pkg-config --exists $$pc || { echo "make build-mpi: pkg-config finds no '$$pc': apt-get install $$pkg" >&2; exit 2; }; \
	if [ '$(MPI)' = mpich-abi ]; then command -v patchelf >/dev/null || { echo "make build-mpi: MPI=mpich-abi needs patchelf: apt-get install patchelf" >&2; exit 2; }; fi; \
	set -x; $(GO) build -trimpath -tags $$tag -ldflags '$(LDFLAGS)' -o $(BIN)-$(MPI) ./cmd/batchkit; \
	{ set +x; } 2>/dev/null; \
	if [ '$(MPI)' = mpich-abi ] && patchelf --print-needed $(BIN)-$(MPI) | grep -qx 'libmpich\.so\.12'; then \
	  set -x; patchelf --replace-needed libmpich.so.12 libmpi.so.12 $(BIN)-$(MPI); \
	fi

# The main job: the data-parallel trainer on two local ranks over the
# pure-Go TCP collectives (no Slurm, no MPI), the embedded digits data set.
DEMO_PLOT := bin/demo-train.png
demo: build
	@echo '$$ batchkit run -n 2 -- batchkit train --plot $(DEMO_PLOT) --force'
	@$(BIN) run -n 2 -- $(BIN) train --plot $(DEMO_PLOT) --force
	@echo
	@echo 'The plot of loss and accuracy against step is in $(DEMO_PLOT).'
	@echo 'The collectives alone: make bench, or $(BIN) run -n 2 -- $(BIN) bench --backend tcp'

# The collectives' speed goals as ratios against C MPI and PyTorch gloo,
# measured in one run (scripts/bench.sh; ROUNDS, MAX_BYTES, OUT override).
bench:
	scripts/bench.sh

# The trainer against PyTorch DDP (time to 95 %, memory, samples/s, scaling
# 1 -> 2 ranks on every backend), a few minutes (scripts/bench-train.sh;
# REPS, OUT override). Kept apart from bench, the collectives' long run.
bench-train:
	scripts/bench-train.sh

# Everything: install what is missing, bring the local two-node Slurm
# cluster up, vet, unit + fuzz-seed + integration tests. BATCHKIT_REQUIRE_CLUSTER
# turns "cluster not up" skips into failures, so nothing is silently skipped.
test: cluster-up vet
	BATCHKIT_REQUIRE_CLUSTER=1 $(GO) test -count=1 -timeout 20m ./...

# The cgo MPI backend is vetted with each build tag (its files are excluded
# from the default build).
vet:
	$(GO) vet ./...
	$(GO) vet -tags mpi ./trainer/...
	$(GO) vet -tags mpich ./trainer/...

unit:
	$(GO) test -count=1 -short ./...

# Longer fuzzing than the seed runs in `make test`.
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzExpandHostlist -fuzztime=$(FUZZTIME) ./slurm/
	$(GO) test -run='^$$' -fuzz=FuzzParseTasksPerNode -fuzztime=$(FUZZTIME) ./slurm/
	$(GO) test -run='^$$' -fuzz=FuzzDetect -fuzztime=$(FUZZTIME) ./detect/
	$(GO) test -run='^$$' -fuzz=FuzzQuote -fuzztime=$(FUZZTIME) ./internal/shquote/
	$(GO) test -run='^$$' -fuzz=FuzzSiteTemplate -fuzztime=$(FUZZTIME) ./templates/
	$(GO) test -run='^$$' -fuzz=FuzzParseSize -fuzztime=$(FUZZTIME) ./trainer/bench/

cluster-up:
	scripts/local-cluster.sh up

cluster-down:
	scripts/local-cluster.sh down

cluster-status:
	scripts/local-cluster.sh status

clean:
	rm -rf bin
