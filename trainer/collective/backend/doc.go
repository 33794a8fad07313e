// Package backend is the contract between collective.Comm and a transport
// (tcp, mpi, collective's own self backend): the Backend interface and its
// optional operations, the untyped Buffer a transport sees, the closed sets
// Op and DType, the elementwise reduction a transport that reduces in Go
// uses (Reduce), and the errors more than one transport returns (ErrClosed,
// SetupError).
//
// It depends on nothing but the standard library, and every other package
// under trainer/collective depends on it. Programs do not import it:
// collective re-exports what they name (collective.Op, collective.Sum,
// collective.DType, ...). Start with backend.go; reduce.go is the loops.
package backend
