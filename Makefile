# batchkit — build, demo, test. `make demo` and `make test` are the two
# commands a newcomer runs on a fresh Debian machine (see README.md).

SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)

BIN      := bin/batchkit
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -X main.version=$(VERSION)
GO       ?= go
FUZZTIME ?= 20s

.PHONY: all build build-mpi demo bench test vet unit integration fuzz cluster-up cluster-down cluster-status clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/batchkit

# The binary with the cgo MPI backend: MPI=openmpi (build tag mpi) or
# MPI=mpich (tag mpich; the same binary runs with Intel MPI, which keeps
# MPICH's ABI). Written to bin/batchkit-$(MPI).
MPI ?=
build-mpi:
	@case '$(MPI)' in \
	  openmpi) tag=mpi pc=ompi pkg=libopenmpi-dev ;; \
	  mpich)   tag=mpich pc=mpich pkg=libmpich-dev ;; \
	  *) echo "make build-mpi: set MPI=openmpi or MPI=mpich (got '$(MPI)')" >&2; exit 2 ;; \
	esac; \
	pkg-config --exists $$pc || { echo "make build-mpi: pkg-config finds no '$$pc': apt-get install $$pkg" >&2; exit 2; }; \
	set -x; $(GO) build -trimpath -tags $$tag -ldflags '$(LDFLAGS)' -o $(BIN)-$(MPI) ./cmd/batchkit

# The main job. For now (until the trainer lands): what batchkit detects, a local
# multi-rank run with the torchrun contract, host lists and a generated batch script.
demo: build
	@echo '$$ batchkit env'
	@$(BIN) env
	@echo
	@echo '$$ batchkit env --format json'
	@$(BIN) env --format json
	@echo
	@echo "$$ batchkit hostlist expand 'rack[1-2]-node[01-02]'"
	@$(BIN) hostlist expand 'rack[1-2]-node[01-02]'
	@echo
	@echo '$$ batchkit hostlist compress node1 node2 node3 node7'
	@$(BIN) hostlist compress node1 node2 node3 node7
	@echo
	@echo '$$ batchkit run -n 4 -- batchkit env --format json   # four local ranks'
	@$(BIN) run -n 4 -- $(BIN) env --format json
	@echo
	@echo '$$ batchkit sbatch --dry-run -N 2 --ntasks-per-node 2 -- python3 train.py'
	@$(BIN) sbatch --dry-run -N 2 --ntasks-per-node 2 -- python3 train.py
	@echo
	@echo '$$ RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 batchkit exec -- sh -c ...'
	@RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 $(BIN) exec -- sh -c 'echo "rank $$RANK of $$WORLD_SIZE, master $$MASTER_ADDR:$$MASTER_PORT"'

# Everything: install what is missing, bring the local two-node Slurm
# cluster up, vet, unit + fuzz-seed + integration tests. BATCHKIT_REQUIRE_CLUSTER
# turns "cluster not up" skips into failures, so nothing is silently skipped.
test: cluster-up vet
	BATCHKIT_REQUIRE_CLUSTER=1 $(GO) test -count=1 -timeout 20m ./...

vet:
	$(GO) vet ./...

unit:
	$(GO) test -count=1 -short ./...

# Longer fuzzing than the seed runs in `make test`.
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzExpandHostlist -fuzztime=$(FUZZTIME) ./slurm/
	$(GO) test -run='^$$' -fuzz=FuzzParseTasksPerNode -fuzztime=$(FUZZTIME) ./slurm/

cluster-up:
	scripts/local-cluster.sh up

cluster-down:
	scripts/local-cluster.sh down

cluster-status:
	scripts/local-cluster.sh status

clean:
	rm -rf bin
