// Package integration drives the built batchkit binary on the real local
// two-node Slurm cluster (scripts/local-cluster.sh) with the real Open MPI
// and MPICH launchers. The tests skip when the cluster is not up, unless
// BATCHKIT_REQUIRE_CLUSTER=1 (set by `make test`), which makes that a failure.
package integration
