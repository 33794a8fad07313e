//go:build !ccl

package ccl

import "github.com/batchkit/batchkit/trainer/collective/backend"

// Built reports whether this binary has the ccl backend.
const Built = false

// Version is the oneCCL this binary runs on: "" without it.
func Version() string { return "" }

func New(Options) (backend.Backend, error) { return nil, ErrNotBuilt }
