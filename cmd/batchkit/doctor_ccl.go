//go:build ccl

package main

import "github.com/batchkit/batchkit/trainer/collective/ccl"

// A binary with the ccl collective backend (make build-ccl) reports
// oneCCL's version from oneCCL's own call, ccl::get_library_version, for
// the library it runs on; doctor reads the version from the library
// otherwise (doctor.Env.CCLVersion).
func init() { cclVersion = ccl.Version }
