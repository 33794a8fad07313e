// Package trainer is batchkit's data-parallel trainer: a multi-layer
// perceptron trained with SGD on a CSV data set, one process per rank, the
// gradients summed by allreduces that start during the backward pass and
// averaged by the update as it reads them.
//
// The pieces, each usable alone:
//
//   - data.go: the embedded digits set (trainer/data), CSV parsing of any
//     "features..., label" file, the fixed train/test split and scaling.
//   - model.go: the MLP, its parameters in one contiguous []float32, forward
//     and backward on the trainer/gemm Impl it is given (gonum's pure Go by
//     default; OpenBLAS or oneMKL in a cgo build).
//   - buckets.go: the gradient's buckets, each summed on a goroutine of
//     its own as soon as backward has made it final (PyTorch DDP's shape).
//   - optim.go: SGD with momentum and weight decay, PyTorch's semantics
//     (the update in C in a cgo build: optim.c, bit for bit the Go loop),
//     taking the mean of the ranks' summed gradient in its pass (StepMean).
//   - sampler.go: the per-epoch permutation and DistributedSampler sharding.
//   - loop.go: Train, the data-parallel loop: resume, steps, checks that the
//     ranks' weights agree, checkpoints and preemption.
//   - checkpoint.go: the versioned, checksummed, atomically written format;
//     pruning and resume count only checkpoints that verify.
//   - lock.go: one run at a time in a checkpoint directory (trainer/dirlock:
//     flock and a lock file naming host, PID and job), rank 0's verdict
//     shared with every rank, and the sweep of dead writers' temporary files.
//   - comm.go: Comm, the four collectives the loop needs, over
//     trainer/collective or in process (NewLocalWorld, for tests).
//
// The library changes no process-wide state: the caller (batchkit train)
// owns signals, GOMAXPROCS and output.
package trainer
