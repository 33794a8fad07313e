// Package commhook lets the conformance suite (internal/conform) reach the
// two corners of package collective it needs without making them API:
// wrapping a backend the test opened itself in a Comm, and switching a
// Comm to the Allreduce-based fallbacks. Package collective sets the
// functions at init; the values are *collective.Comm (this package cannot
// name the type: collective imports it).
package commhook

import "github.com/batchkit/batchkit/trainer/collective/backend"

var (
	// NewComm wraps b (rank localRank on its host) in a *collective.Comm,
	// with the fallbacks forced when fallback is set.
	NewComm func(b backend.Backend, localRank int, fallback bool) any
	// SetFallback forces (or stops forcing) c's fallbacks.
	SetFallback func(c any, on bool)
	// Fallback reports whether c's fallbacks are forced.
	Fallback func(c any) bool
)
