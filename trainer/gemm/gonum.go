package gemm

import (
	"runtime"
	"sync"
	"sync/atomic"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/gonum"
)

// gonumImpl is gonum's pure-Go Sgemm, called directly (not through
// blas32.Use's process-wide choice), on at most threads goroutines at once.
// gonum itself runs a large product on GOMAXPROCS goroutines, which a
// program shares with everything else; here a rank's thread count (Threads)
// bounds it as it bounds OpenBLAS and MKL, with gonum's numbers bit for bit:
// parallel does gonum's own split (see there).
type gonumImpl struct {
	gonum.Implementation
	threads int
}

func openGonum(threads int) (Impl, error) { return gonumImpl{threads: threads}, nil }

func (gonumImpl) Name() string { return Gonum }

// Threads: more goroutines than GOMAXPROCS would not run at once.
func (g gonumImpl) Threads() int { return min(g.threads, runtime.GOMAXPROCS(0)) }

// Sgemm checks as the cgo libraries do, so every Impl panics alike.
func (g gonumImpl) Sgemm(tA, tB blas.Transpose, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int) {
	if err := checkArgs(tA, tB, m, n, k, a, lda, b, ldb, c, ldc); err != nil {
		panic(err)
	}
	if g.Threads() >= runtime.GOMAXPROCS(0) || blocks(m)*blocks(n) < minParBlock || alpha == 0 || k == 0 {
		g.Implementation.Sgemm(tA, tB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
		return
	}
	scale(beta, m, n, c, ldc)
	g.parallel(tA != blas.NoTrans, tB != blas.NoTrans, m, n, k, alpha, a, lda, b, ldb, c, ldc)
}

// gonum's blocking (blas/gonum: blockSize, minParBlock): a product with
// fewer blocks of C runs serially, and gonum does the same.
const (
	blockSize   = 64
	minParBlock = 4
)

func blocks(dim int) int { return (dim + blockSize - 1) / blockSize }

// scale is gonum's C = beta·C before the product: zero for 0, none for 1.
func scale(beta float32, m, n int, c []float32, ldc int) {
	if beta == 1 {
		return
	}
	for i := range m {
		row := c[i*ldc : i*ldc+n]
		if beta == 0 {
			clear(row)
			continue
		}
		for j := range row {
			row[j] *= beta
		}
	}
}

// parallel is gonum's sgemmParallel on g.Threads() goroutines: each
// blockSize² block of C in turn along k, in k-blocks, each k-block a serial
// gonum Sgemm (one block: gonum runs it serially) with beta 1. The same
// blocks summed in the same order give gonum's result bit for bit
// (TestGonumThreadsBitIdentical).
func (g gonumImpl) parallel(aT, bT bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, c []float32, ldc int) {
	tA, tB := blas.NoTrans, blas.NoTrans
	if aT {
		tA = blas.Trans
	}
	if bT {
		tB = blas.Trans
	}
	bn := blocks(n)
	total := blocks(m) * bn
	var next atomic.Int64
	work := func() {
		for {
			blk := int(next.Add(1)) - 1
			if blk >= total {
				return
			}
			i, j := blk/bn*blockSize, blk%bn*blockSize
			li, lj := min(blockSize, m-i), min(blockSize, n-j)
			cSub := c[i*ldc+j : (i+li-1)*ldc+j+lj]
			for l := 0; l < k; l += blockSize {
				lk := min(blockSize, k-l)
				var aSub, bSub []float32
				if aT {
					aSub = view(a, lda, l, i, lk, li)
				} else {
					aSub = view(a, lda, i, l, li, lk)
				}
				if bT {
					bSub = view(b, ldb, j, l, lj, lk)
				} else {
					bSub = view(b, ldb, l, j, lk, lj)
				}
				g.Implementation.Sgemm(tA, tB, li, lj, lk, alpha, aSub, lda, bSub, ldb, 1, cSub, ldc)
			}
		}
	}
	var wg sync.WaitGroup
	for range g.Threads() - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
}

// view is rows×cols of the row-major d (stride ld) from (i, j).
func view(d []float32, ld, i, j, rows, cols int) []float32 {
	return d[i*ld+j : (i+rows-1)*ld+j+cols]
}

// Default is gonum on GOMAXPROCS goroutines, the Impl a nil one stands for.
func Default() Impl { return gonumImpl{threads: runtime.GOMAXPROCS(0)} }
