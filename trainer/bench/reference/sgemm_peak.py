"""sgemm_peak.py: the machine's practical FP32 peak, from the BLAS a python has.

Times C = A @ B in float32 (row-major, A m x k, B k x n: 2*m*n*k FLOPs a call) through torch
(whatever BLAS it was built with: MKL for PyPI's torch, the netlib reference BLAS for Debian's
1.13) and numpy (the OpenBLAS its wheel bundles), each at every --threads count. Per shape and
thread count: one untimed call, then calls until --seconds have passed; prints one JSON line
with the best and the median call's GFLOP/s. The untimed call's product is checked against
float64 once per shape (relative error under 1e-4, else exit 1 naming the product): a BLAS
that is fast because it is wrong would set a false ceiling. The best of a large product is the practical peak
that make bench-train sets beside every GFLOP/s figure; --shapes also takes the trainer's own
products (batch x in x out) to show what a BLAS gets at the size a step uses.

    /opt/batchkit/torch/bin/python sgemm_peak.py --threads 1,2 --shapes 2048x2048x2048

Keys: lib ("torch" or "numpy"), version, blas (what it runs: torch's BLAS_INFO, threadpoolctl's
internal_api/architecture for numpy), threads, m, n, k, calls, gflops_best, gflops_median.
"""

import argparse
import json
import os
import statistics
import sys
import time


def timed_calls(f, seconds):
    f()  # warm-up: page faults, packing buffers, thread start
    times, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 3:
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return times


TOLERANCE = 1e-4  # relative Frobenius error; float32 sums of k terms stay far below it


def check(lib, m, n, k, err):
    if not err < TOLERANCE:
        sys.exit("sgemm_peak: %s's %dx%dx%d product is wrong: relative error %.3g (over %g)" % (lib, m, n, k, err, TOLERANCE))


def torch_rows(shapes, threads, seconds):
    import torch
    info = torch.__config__.show()
    blas = next((w.split("=", 1)[1] for w in info.replace(",", " ").split() if w.startswith("BLAS_INFO=")), "?")
    for t in threads:
        torch.set_num_threads(t)
        for m, n, k in shapes:
            a, b = torch.randn(m, k), torch.randn(k, n)
            c = torch.empty(m, n)
            times = timed_calls(lambda: torch.mm(a, b, out=c), seconds)
            if t == threads[0]:
                ref = a.double() @ b.double()
                check("torch", m, n, k, ((c.double() - ref).norm() / ref.norm()).item())
            yield "torch", torch.__version__, blas, t, m, n, k, times


def numpy_rows(shapes, threads, seconds):
    import numpy as np
    from threadpoolctl import threadpool_info, threadpool_limits
    pools = [p for p in threadpool_info() if p.get("user_api") == "blas"]
    blas = ",".join("%s %s %s" % (p.get("internal_api"), p.get("version"), p.get("architecture", "")) for p in pools)
    rng = np.random.default_rng(1)
    for t in threads:
        with threadpool_limits(limits=t, user_api="blas"):
            for m, n, k in shapes:
                a = rng.standard_normal((m, k), dtype=np.float32)
                b = rng.standard_normal((k, n), dtype=np.float32)
                c = np.empty((m, n), dtype=np.float32)
                times = timed_calls(lambda: np.matmul(a, b, out=c), seconds)
                if t == threads[0]:
                    ref = a.astype(np.float64) @ b.astype(np.float64)
                    check("numpy", m, n, k, float(np.linalg.norm(c - ref) / np.linalg.norm(ref)))
                yield "numpy", np.__version__, blas.strip(), t, m, n, k, times


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--libs", default="torch,numpy", help="torch, numpy or both (numpy is skipped when missing)")
    p.add_argument("--threads", default="1,%d" % os.cpu_count(), help="thread counts, comma-separated")
    p.add_argument("--shapes", default="2048x2048x2048", help="MxNxK products, comma-separated")
    p.add_argument("--seconds", type=float, default=1.0, help="timed calls per shape and thread count")
    a = p.parse_args()
    try:
        shapes = [tuple(int(v) for v in s.split("x")) for s in a.shapes.split(",")]
        threads = [int(t) for t in a.threads.split(",")]
        if any(len(s) != 3 or min(s) < 1 for s in shapes) or min(threads) < 1:
            raise ValueError
    except ValueError:
        p.error("--shapes takes MxNxK,... and --threads N,... of positive integers")
    for lib in a.libs.split(","):
        gen = {"torch": torch_rows, "numpy": numpy_rows}.get(lib)
        if gen is None:
            p.error("--libs: unknown library %r (torch, numpy)" % lib)
        if lib == "numpy":
            try:
                import numpy, threadpoolctl  # noqa: F401
            except ImportError:
                continue
        for lib_, version, blas, t, m, n, k, times in gen(shapes, threads, a.seconds):
            flop = 2.0 * m * n * k
            print(json.dumps({"lib": lib_, "version": version, "blas": blas, "threads": t, "m": m, "n": n, "k": k,
                              "calls": len(times), "gflops_best": flop / min(times) / 1e9,
                              "gflops_median": flop / statistics.median(times) / 1e9}), flush=True)


if __name__ == "__main__":
    sys.exit(main())
