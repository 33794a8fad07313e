# batchkit — build, demo, test. `make demo` and `make test` are the two
# commands a newcomer runs on a fresh Debian machine (see README.md).

SHELL := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)

BIN      := bin/batchkit
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The commit is stamped by the Go toolchain too; COMMIT= also serves a
# build from a tarball, which has no .git.
# The full hash, -dirty for a modified tree (--exclude: never a tag name).
COMMIT   ?= $(shell git describe --always --dirty --abbrev=40 --exclude='*' 2>/dev/null)
LDFLAGS  := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
GO       ?= go
FUZZTIME ?= 20s
FUZZJOBS ?= 2

.PHONY: all build build-mpi build-ccl build-blas mkl-stack test-blas test-ccl man install demo bench bench-ab bench-train test vet unit integration fuzz cluster-up cluster-down cluster-status intel-stack clean

all: build

build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/batchkit

# The man page batchkit(1), generated from the commands' help (batchkit man),
# so it is never out of date with the binary; not kept in git.
MAN ?= man/batchkit.1
man: build
	@mkdir -p $(dir $(MAN))
	$(BIN) man > $(MAN)

# Where packagers expect them: the binary, the man page and the completion
# scripts of bash, zsh and fish (each loads it from these directories by
# itself), under $(DESTDIR)$(PREFIX). The scripts are generated next to the
# binary first.
PREFIX  ?= /usr/local
DESTDIR ?=
COMPLETIONS = $(dir $(BIN))completion
install: build man
	@mkdir -p $(COMPLETIONS)
	$(BIN) completion bash > $(COMPLETIONS)/batchkit
	$(BIN) completion zsh > $(COMPLETIONS)/_batchkit
	$(BIN) completion fish > $(COMPLETIONS)/batchkit.fish
	install -Dm755 $(BIN) $(DESTDIR)$(PREFIX)/bin/batchkit
	install -Dm644 $(MAN) $(DESTDIR)$(PREFIX)/share/man/man1/batchkit.1
	install -Dm644 $(COMPLETIONS)/batchkit $(DESTDIR)$(PREFIX)/share/bash-completion/completions/batchkit
	install -Dm644 $(COMPLETIONS)/_batchkit $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_batchkit
	install -Dm644 $(COMPLETIONS)/batchkit.fish $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d/batchkit.fish

# The binary with the cgo MPI backend: MPI=openmpi (build tag mpi) or
# MPI=mpich (tag mpich). Written to bin/batchkit-$(MPI).
#
# MPI=mpich-abi: the MPICH build for the MPICH ABI family (Intel MPI, Cray
# MPICH, MVAPICH2, MPICH installed from source or Spack), whose library is
# libmpi.so.12; Debian's MPICH names it libmpich.so.12, so the binary's
# dependency is renamed with patchelf (run it here with LD_LIBRARY_PATH
# pointing at a libmpi.so.12 link to Debian's library; see
# docs/reference/collectives.md, "MPI builds").
#
# MPI=intel: the MPICH build against Intel MPI itself, the impi-devel wheel
# of scripts/intel-wheels.txt in BATCHKIT_INTEL_PREFIX (make intel-stack):
# its own mpi.h and libmpi.so.12, found through a pkg-config file that
# scripts/intel-stack.sh writes next to the binary, with a RUNPATH to the
# wheel's lib/ (no patchelf; LD_LIBRARY_PATH still wins when set).
# INTEL_CGO_KEY goes into CGO_CFLAGS: Go's build cache keys a cgo package by
# the pkg-config command, not by PKG_CONFIG_PATH or its output, so without a
# difference here the Intel objects would be reused for MPI=mpich (and the
# reverse). scripts/intel-stack.sh cgo-key prints it for other builds.
INTEL_CGO_KEY = $(shell scripts/intel-stack.sh cgo-key 2>/dev/null)
MPI ?=
build-mpi:
	@set -e; case '$(MPI)' in \
	  openmpi)   tag=mpi pc=ompi pkg=libopenmpi-dev ;; \
	  mpich)     tag=mpich pc=mpich pkg=libmpich-dev ;; \
	  mpich-abi) tag=mpich pc=mpich pkg=libmpich-dev ;; \
	  intel)     tag=mpich pc=mpich pkg='the Intel MPI wheels (make intel-stack)'; \
	             scripts/intel-stack.sh pkgconfig $(dir $(BIN))pkgconfig-intel || exit 2; \
	             export PKG_CONFIG_PATH=$(abspath $(dir $(BIN))pkgconfig-intel); \
	             export CGO_CFLAGS="$${CGO_CFLAGS:--O2 -g} $(INTEL_CGO_KEY)" ;; \
	  *) echo "make build-mpi: set MPI=openmpi, MPI=mpich, MPI=mpich-abi or MPI=intel (got '$(MPI)')" >&2; exit 2 ;; \
	esac; \
	pkg-config --exists $$pc || { echo "make build-mpi: pkg-config finds no '$$pc': apt-get install $$pkg" >&2; exit 2; }; \
	if [ '$(MPI)' = mpich-abi ]; then command -v patchelf >/dev/null || { echo "make build-mpi: MPI=mpich-abi needs patchelf: apt-get install patchelf" >&2; exit 2; }; fi; \
	set -x; $(GO) build -trimpath -tags $$tag -ldflags '$(LDFLAGS)' -o $(BIN)-$(MPI) ./cmd/batchkit; \
	{ set +x; } 2>/dev/null; \
	if [ '$(MPI)' = mpich-abi ] && patchelf --print-needed $(BIN)-$(MPI) | grep -qx 'libmpich\.so\.12'; then \
	  set -x; patchelf --replace-needed libmpich.so.12 libmpi.so.12 $(BIN)-$(MPI); \
	fi

# The binary with the oneCCL backend (build tag ccl), bin/batchkit-ccl, against
# the Intel stack of `make intel-stack` (scripts/intel-stack.sh) at
# BATCHKIT_INTEL_PREFIX. The prefix's include and lib directories reach cgo
# through CGO_CPPFLAGS/CGO_LDFLAGS (ahead of the default prefix in
# trainer/collective/ccl/ccl.go), and the binary finds libccl through a
# DT_RPATH to that lib directory, not LD_LIBRARY_PATH: a DT_RPATH also
# serves what libccl dlopens itself (libfabric and its providers), and no
# launcher has to forward the environment.
BATCHKIT_INTEL_PREFIX ?= /opt/batchkit/intel
CCL_CGO_ENV = CGO_CPPFLAGS='-I$(BATCHKIT_INTEL_PREFIX)/include' \
	CGO_LDFLAGS='-L$(BATCHKIT_INTEL_PREFIX)/lib -Wl,--disable-new-dtags -Wl,-rpath,$(BATCHKIT_INTEL_PREFIX)/lib'
# ccl_stack: true when the prefix has oneCCL's header and library.
ccl_stack = test -f '$(BATCHKIT_INTEL_PREFIX)/include/oneapi/ccl.hpp' -a -e '$(BATCHKIT_INTEL_PREFIX)/lib/libccl.so.1'
build-ccl:
	@$(ccl_stack) || { echo "make build-ccl: no oneCCL in $(BATCHKIT_INTEL_PREFIX) (include/oneapi/ccl.hpp, lib/libccl.so.1): run \`make intel-stack\` or set BATCHKIT_INTEL_PREFIX" >&2; exit 2; }
	$(CCL_CGO_ENV) $(GO) build -trimpath -tags ccl -ldflags '$(LDFLAGS)' -o $(BIN)-ccl ./cmd/batchkit

# The binary whose trainer multiplies with an optimised BLAS through cgo:
# BLAS=openblas (build tag openblas: Debian's libopenblas-dev, found by
# pkg-config) or BLAS=mkl (tag mkl: oneMKL from the wheels of `make
# mkl-stack` at BATCHKIT_MKL_PREFIX, reached as oneCCL is, through
# CGO_CPPFLAGS/CGO_LDFLAGS and an RPATH to its lib/). Written to
# bin/batchkit-$(BLAS); `batchkit train --blas` still chooses at run time
# (auto: this library). One library a binary: both define cblas_sgemm.
BATCHKIT_MKL_PREFIX ?= /opt/batchkit/mkl
MKL_CGO_ENV = CGO_CPPFLAGS='-I$(BATCHKIT_MKL_PREFIX)/include' \
	CGO_LDFLAGS='-L$(BATCHKIT_MKL_PREFIX)/lib -Wl,--disable-new-dtags -Wl,-rpath,$(BATCHKIT_MKL_PREFIX)/lib'
# mkl_stack: true when the prefix has oneMKL's header and library.
mkl_stack = test -f '$(BATCHKIT_MKL_PREFIX)/include/mkl_cblas.h' -a -e '$(BATCHKIT_MKL_PREFIX)/lib/libmkl_rt.so.3'
openblas_dev = pkg-config --exists openblas
BLAS ?=
build-blas:
	@case '$(BLAS)' in \
	  openblas) $(openblas_dev) || { echo "make build-blas: pkg-config finds no 'openblas': apt-get install libopenblas-dev" >&2; exit 2; }; \
	            set -x; $(GO) build -trimpath -tags openblas -ldflags '$(LDFLAGS)' -o $(BIN)-openblas ./cmd/batchkit ;; \
	  mkl) $(mkl_stack) || { echo "make build-blas: no oneMKL in $(BATCHKIT_MKL_PREFIX) (include/mkl_cblas.h, lib/libmkl_rt.so.3): run \`make mkl-stack\` or set BATCHKIT_MKL_PREFIX" >&2; exit 2; }; \
	       set -x; $(MKL_CGO_ENV) $(GO) build -trimpath -tags mkl -ldflags '$(LDFLAGS)' -o $(BIN)-mkl ./cmd/batchkit ;; \
	  *) echo "make build-blas: set BLAS=openblas or BLAS=mkl (got '$(BLAS)')" >&2; exit 2 ;; \
	esac

# oneMKL, the pinned wheels of scripts/mkl-wheels.txt, in a virtual
# environment outside the clone (BATCHKIT_MKL_PREFIX, default /opt/batchkit/mkl).
mkl-stack:
	scripts/mkl-stack.sh install

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
# measured in one run (scripts/bench.sh; ROUNDS, MPI_ROUNDS, CCL_ROUNDS, MAX_BYTES, OUT override;
# the oneCCL rows when the Intel stack of `make intel-stack` is there).
bench:
	scripts/bench.sh

# The MPI backend of this tree against BASE's (default main), old against
# old as the A/A control, launches taking turns (scripts/bench-ab.sh; BASE,
# ROUNDS, SIZES, VARIANTS, OUT override). ~10-15 minutes.
bench-ab:
	scripts/bench-ab.sh

# The trainer against PyTorch DDP, a current PyTorch (MKL) and Debian's 1.13
# (time to 95 %, memory, samples/s and GFLOP/s beside the machine's FP32 peak,
# scaling 1 -> 2 ranks on every backend), ~25 minutes (scripts/bench-train.sh;
# REPS, OUT, PARTS, REFS, BACKENDS override). The samples/s rows also for the
# BLAS builds (build-blas BLAS=mkl and openblas; oneMKL installed as mkl-stack
# does, a build that cannot be made skipped with its reason). Installs the
# current PyTorch into a venv when missing (trainer/bench/reference/torch-venv.sh,
# ~2.9 GB once). Not part of test.
bench-train:
	scripts/bench-train.sh

# Everything: install what is missing, bring the local two-node Slurm
# cluster up, vet, unit + fuzz-seed + integration tests. BATCHKIT_REQUIRE_CLUSTER
# turns "cluster not up" skips into failures, so nothing is silently skipped.
# -timeout 20m: the integration package, one test binary, runs its waiting
# tests side by side (integration/share_test.go); on two cores loaded by
# other work (load average 10-15) it took 13-16 minutes, where one test at
# a time took 29.
test: cluster-up intel-stack mkl-stack vet
	BATCHKIT_REQUIRE_CLUSTER=1 $(GO) test -count=1 -timeout 20m ./...
	$(MAKE) --no-print-directory test-blas
	$(MAKE) --no-print-directory test-ccl
	$(MAKE) --no-print-directory fuzz FUZZTIME=3s

# The GEMM libraries' packages again with each cgo library installed here
# (make test installs both): every library against gonum, the loss curves
# within float32 noise (TestLossCurvesAgree), the thread count applied.
BLAS_TESTS = ./trainer/gemm ./trainer/job
BLAS_TRAINER_RUN = 'TestMatchesPyTorchSGD|TestSGDKernelBitIdentical|TestReluForwardBitIdentical|TestReluBackwardBitIdentical|TestSGDReportsNonFinite|TestTrainStopsOnNonFiniteWeights|TestLossGradFusedBitIdentical|TestLossGradOntoClearedBitIdentical|TestStepMeanIsTheReference|TestLossCurvesAgree|TestLossGradUsesGemm|TestNaiveLinearMatchesGemm|TestGradient'
test-blas:
	@if $(openblas_dev); then set -x; \
	  $(GO) test -count=1 -tags openblas $(BLAS_TESTS) && \
	  $(GO) test -count=1 -tags openblas -run $(BLAS_TRAINER_RUN) ./trainer; \
	else echo "make test-blas: no libopenblas-dev: -tags openblas not tested (apt-get install libopenblas-dev)"; fi
	@if $(mkl_stack); then set -x; \
	  $(MKL_CGO_ENV) $(GO) test -count=1 -tags mkl $(BLAS_TESTS) && \
	  $(MKL_CGO_ENV) $(GO) test -count=1 -tags mkl -run $(BLAS_TRAINER_RUN) ./trainer; \
	else echo "make test-blas: no oneMKL in $(BATCHKIT_MKL_PREFIX): -tags mkl not tested (make mkl-stack)"; fi

# The oneCCL binding's own tests (build tag ccl, so not in ./...'s run): a
# world of one in this process through the conformance suite, the shim's
# refusals. The worlds of 2-4 ranks run in ./integration (TestCollectiveCCL).
test-ccl:
	@if $(ccl_stack); then set -x; $(CCL_CGO_ENV) $(GO) test -count=1 -tags ccl ./trainer/collective/ccl; \
	else echo "make test-ccl: no oneCCL in $(BATCHKIT_INTEL_PREFIX): -tags ccl not tested (make intel-stack)"; fi

# The cgo backends are vetted with each build tag (their files are excluded
# from the default build); ccl only where the Intel stack is installed.
vet:
	$(GO) vet ./...
	$(GO) vet -tags mpi ./trainer/...
	$(GO) vet -tags mpich ./trainer/...
	@if $(ccl_stack); then set -x; $(CCL_CGO_ENV) $(GO) vet -tags ccl ./trainer/...; \
	else echo "make vet: no oneCCL in $(BATCHKIT_INTEL_PREFIX): -tags ccl not vetted (make intel-stack)"; fi
	@if $(openblas_dev); then set -x; $(GO) vet -tags openblas ./trainer/... ./buildinfo; \
	else echo "make vet: no libopenblas-dev: -tags openblas not vetted"; fi
	@if $(mkl_stack); then set -x; $(MKL_CGO_ENV) $(GO) vet -tags mkl ./trainer/... ./buildinfo; \
	else echo "make vet: no oneMKL in $(BATCHKIT_MKL_PREFIX): -tags mkl not vetted (make mkl-stack)"; fi

unit:
	$(GO) test -count=1 -short ./...

# Every fuzz target, one for each parser of outside input, as PACKAGE:TARGET;
# each has its corpus in PACKAGE/testdata/fuzz/TARGET. `make test` fuzzes
# each for a few seconds; `make fuzz FUZZTIME=5m` for longer. Two targets
# run at a time (FUZZJOBS=1 for one, each with every core).
FUZZ_TARGETS := ./slurm:FuzzExpandHostlist ./slurm:FuzzCompressHostlist ./slurm:FuzzParseTasksPerNode \
	./mpirun:FuzzParseHostfile ./profile:FuzzParseFile ./profile:FuzzSet ./templates:FuzzSiteTemplate \
	./trainer/bench:FuzzParseSize ./internal/shquote:FuzzQuote ./detect:FuzzDetect \
	./internal/printable:FuzzLine

fuzz:
	@GO=$(GO) FUZZTIME=$(FUZZTIME) FUZZJOBS=$(FUZZJOBS) scripts/fuzz.sh $(FUZZ_TARGETS)

cluster-up:
	scripts/local-cluster.sh up

# Intel MPI and oneCCL, the pinned wheels of scripts/intel-wheels.txt, in a virtual
# environment outside the clone (BATCHKIT_INTEL_PREFIX, default /opt/batchkit/intel).
intel-stack:
	scripts/intel-stack.sh install

cluster-down:
	scripts/local-cluster.sh down

cluster-status:
	scripts/local-cluster.sh status

clean:
	rm -rf bin $(MAN)
