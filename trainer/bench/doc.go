// Package bench measures the collectives of package collective the way
// nccl-tests and the OSU micro-benchmarks do, so that batchkit's numbers can
// be set beside theirs and beside the C (MPI) and Python (gloo) references in
// reference/.
//
// One run sweeps message sizes from MinBytes to MaxBytes in ×2 steps (Sizes),
// after running the first size untimed for SettleTime (process start-up).
// For each size every rank runs Schedule's warm-up iterations, a Barrier,
// then the timed iterations; a rank's time is its mean per operation, and the
// reported avg, min and max are the mean, minimum and maximum of the ranks'
// times, computed with the collectives themselves. After the timing, each
// size is checked once: inputs are filled with exactly representable
// rank- and index-dependent values, the operation runs once, and every
// element must equal the expected value exactly and be bit-identical across
// ranks (CheckError otherwise).
//
// Sizes follow nccl-tests: for allreduce and broadcast, bytes is each rank's
// buffer; for allgather it is the gathered (receive) buffer and for
// reducescatter the input buffer, rounded down to a multiple of
// element size × ranks. Bandwidths are in GB/s (1e9 bytes per second):
//
//	algbw = bytes / time
//	busbw = algbw × factor, factor = 2(n−1)/n for allreduce,
//	        (n−1)/n for allgather and reducescatter, 1 for broadcast
//
// busbw is the figure comparable across world sizes and with the hardware's
// link speed. With a single rank the factor would be 0 (nothing crosses a
// link); batchkit then reports busbw = algbw instead, so that a one-rank run
// still shows the cost of the local copy.
//
// Allreduce is timed out of place with Sum (as nccl-tests does); broadcast is
// in place from root 0.
//
// Results are written as an aligned text table or as JSON lines (Result);
// ReadResults reads such lines back, from batchkit or from the references,
// for Plot and Compare. The package has no CLI of its own: cmd/batchkit's
// bench command drives it.
package bench
