package collective

import "github.com/batchkit/batchkit/trainer/collective/backend"

// BackendOf is c's backend (the tests of package collective_test).
func BackendOf(c *Comm) backend.Backend { return c.b }
