// Package mpi is the cgo binding of package collective to the MPI library
// the binary is built against: build tag mpi for Open MPI, mpich for MPICH
// and ABI-compatible Intel MPI (make build-mpi MPI=openmpi|mpich). Without
// either tag it has no cgo: Library is "" and New returns ErrNotBuilt.
//
// collective uses it through New (the backend, one cgo call per
// collective), Library, and Offered and CheckWireUp (can this launcher's
// world be joined by this binary's MPI, asked before MPI_Init). A program
// that runs on it calls SetupProcess once, at its edge (GOMAXPROCS,
// SIGABRT). It depends on package backend and topology, never on
// collective.
//
// Where to read: check.go (what needs no MPI: the errors, the wire-up and
// world checks), shim.c and shim.h (the C side: one MPI call per function,
// and the max and min ops on the shared internal/handoff/reduce.h), mpi.go
// (the binding: MPI_Init, the collectives, and the hand-over of large calls
// to the shared worker thread, internal/handoff), handoff.go (the worker's
// threshold; the yields before sysmon's 10 ms are the shared
// internal/yield's), process.go (SetupProcess), and the build-tag
// variants none.go, openmpi.go, mpich.go, both.go. docs/mpi-backend.md
// has the measurements behind the choices.
package mpi
