#!/usr/bin/python3
"""gloo_bench.py: the PyTorch gloo reference for `batchkit bench`.

Measures torch.distributed's gloo collectives with batchkit bench's sizes,
iteration schedule, timing and JSON keys, so that its lines can be read by
`batchkit bench --baseline gloo.jsonl ...` and `batchkit bench --plot ...`.
Written for Debian's /usr/bin/python3 with python3-torch (PyTorch 1.13).

Launch it like torchrun would (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT):

    bin/batchkit run -n 2 -- /usr/bin/python3 trainer/bench/reference/gloo_bench.py --max-bytes 16MiB > gloo.jsonl

Rank 0 prints one JSON object per size on stdout; backend is "gloo".

Differences from batchkit that torch imposes (see reference/README.md):
  - all_reduce is in place (torch has no out-of-place all_reduce); the timed
    buffer holds zeros so that repeated sums stay finite.
  - gloo in PyTorch 1.13 has no reduce_scatter: it is emulated as all_reduce
    of the input plus a copy of this rank's block, and its lines carry
    "note": "emulated".
  - allgather gathers into views of one output tensor (all_gather with a
    list; gloo has no all_gather_into_tensor).
"""

import argparse
import datetime
import json
import os
import re
import sys
import time

import torch
import torch.distributed as dist

OPS = ("allreduce", "broadcast", "allgather", "reducescatter")
MAX_SIZE = 16 << 30


def parse_size(s):
    """A byte count: a number, optionally with K, KiB, M, MiB, G or GiB
    (binary multiples, any case, optional B), like batchkit's ParseSize."""
    m = re.fullmatch(r"\s*([0-9]+)\s*([A-Za-z]*)\s*", s)
    if not m:
        raise argparse.ArgumentTypeError("%r is not a size: want a number of bytes, optionally with K, KiB, M, MiB, G or GiB" % s)
    mult = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10,
            "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
            "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30}.get(m.group(2).lower())
    if mult is None:
        raise argparse.ArgumentTypeError("%r is not a size: unknown unit %r (want K, KiB, M, MiB, G or GiB)" % (s, m.group(2)))
    return int(m.group(1)) * mult


def schedule(nbytes, iters=0):
    """(warmup, iters): the schedule batchkit (bench.Schedule) and the C
    reference use. iters > 0 overrides it, with max(1, iters // 10) warm-up."""
    if iters > 0:
        return max(1, iters // 10), iters
    if nbytes <= 64 << 10:
        return 100, 1000
    if nbytes <= 1 << 20:
        return 20, 200
    if nbytes <= 16 << 20:
        return 5, 50
    return 2, 20


def unit(op, elem, ranks):
    return elem * ranks if op in ("allgather", "reducescatter") else elem


def sizes(op, elem, ranks, lo, hi):
    """min, 2·min, ... <= max, rounded down to a multiple of unit(); sizes
    that round to 0, and repeats, skipped (bench.Sizes)."""
    u = unit(op, elem, ranks)
    out = []
    b = lo
    while 0 < b <= hi:
        s = b // u * u
        if s > 0 and (not out or out[-1] != s):
            out.append(s)
        b *= 2
    return out


def bus_factor(op, n):
    """nccl-tests' busbw/algbw; 1 for a single rank (batchkit's choice)."""
    if n <= 1:
        return 1.0
    f = (n - 1) / n
    return {"allreduce": 2 * f, "allgather": f, "reducescatter": f}.get(op, 1.0)


def sum_pattern(n):
    """(M, weighted) of batchkit's check patterns (trainer/bench/check.go)."""
    k = n * (n + 1) // 2
    weighted = k <= 1 << 20
    if not weighted:
        k = n
    m = max(1, min(1 << 20, (1 << 24) // k))
    if m > 1 and m % 2 == 0:
        m -= 1
    return m, weighted


class Bench:
    def __init__(self, op, dtype, rank, n):
        self.op, self.dtype, self.rank, self.n = op, dtype, rank, n

    def buffers(self, count):
        """(send, recv) for count elements, in batchkit's size semantics;
        recv is None for broadcast and in-place allreduce."""
        n = self.n
        if self.op == "allgather":
            out = torch.empty(count, dtype=self.dtype)
            return torch.empty(count // n, dtype=self.dtype), out
        if self.op == "reducescatter":
            return torch.empty(count, dtype=self.dtype), torch.empty(count // n, dtype=self.dtype)
        return torch.empty(count, dtype=self.dtype), None

    def once(self, send, recv):
        op = self.op
        if op == "allreduce":
            dist.all_reduce(send, op=dist.ReduceOp.SUM)
        elif op == "broadcast":
            dist.broadcast(send, src=0)
        elif op == "allgather":
            dist.all_gather(list(recv.chunk(self.n)), send)
        else:  # reducescatter, emulated: gloo in torch 1.13 has none
            dist.all_reduce(send, op=dist.ReduceOp.SUM)
            k = recv.numel()
            recv.copy_(send[self.rank * k:(self.rank + 1) * k])

    def settle(self, count, seconds=0.3):
        """The first size's operation, untimed, in batches of 10 until every
        rank has run for 300 ms (batchkit's bench.SettleTime)."""
        send, recv = self.buffers(count)
        send.zero_()
        t0 = time.perf_counter()
        done = torch.zeros(1)
        while not done.item():
            for _ in range(10):
                self.once(send, recv)
            done.fill_(1.0 if time.perf_counter() - t0 >= seconds else 0.0)
            dist.all_reduce(done, op=dist.ReduceOp.MIN)

    def time(self, count, warmup, iters):
        send, recv = self.buffers(count)
        send.zero_()
        for _ in range(warmup):
            self.once(send, recv)
        dist.barrier()
        t0 = time.perf_counter()
        for _ in range(iters):
            self.once(send, recv)
        mine = (time.perf_counter() - t0) / iters
        total = torch.tensor([mine], dtype=torch.float64)
        hi = torch.tensor([mine], dtype=torch.float64)
        lo = torch.tensor([mine], dtype=torch.float64)
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        dist.all_reduce(hi, op=dist.ReduceOp.MAX)
        dist.all_reduce(lo, op=dist.ReduceOp.MIN)
        return total.item() / self.n, lo.item(), hi.item()

    def check(self, count):
        """Exactly representable inputs, one operation, every element
        compared with the expected value. Returns None or an error line;
        every rank learns whether any failed."""
        op, rank, n = self.op, self.rank, self.n
        send, recv = self.buffers(count)
        m, weighted = sum_pattern(n)
        period = (1 << 23) - 1
        if op in ("allreduce", "reducescatter"):
            idx = torch.arange(send.numel(), dtype=torch.float64)
            send.copy_((torch.remainder(idx, m) + 1) * (rank + 1 if weighted else 1))
        elif op == "allgather":
            idx = torch.arange(send.numel(), dtype=torch.float64) + rank * send.numel()
            send.copy_(torch.remainder(idx, period) + 1)
        elif rank == 0:
            send.copy_(torch.remainder(torch.arange(count, dtype=torch.float64), period) + 1)
        else:
            send.fill_(-1)
        if recv is not None:
            recv.fill_(-1)
        self.once(send, recv)

        total = n * (n + 1) // 2 if weighted else n
        if op == "allreduce":
            result = send
            want = (torch.remainder(torch.arange(count, dtype=torch.float64), m) + 1) * total
        elif op == "reducescatter":
            result = recv
            idx = torch.arange(recv.numel(), dtype=torch.float64) + rank * recv.numel()
            want = (torch.remainder(idx, m) + 1) * total
        else:
            result = send if op == "broadcast" else recv
            want = torch.remainder(torch.arange(result.numel(), dtype=torch.float64), period) + 1
        bad = (result.to(torch.float64) != want).nonzero()
        msg = None
        if bad.numel() > 0:
            i = int(bad[0][0])
            msg = "%s %d bytes: wrong result on rank %d: element %d is %r, want %r" % (
                op, count * result.element_size(), rank, i, result[i].item(), want[i].item())
        flag = torch.tensor([1.0 if msg else 0.0], dtype=torch.float64)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        if flag.item() > 0 and msg is None:
            msg = "%s %d bytes: wrong result on another rank" % (op, count * result.element_size())
        return msg


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--op", choices=OPS, default="allreduce")
    p.add_argument("--min-bytes", type=parse_size, default=8)
    p.add_argument("--max-bytes", type=parse_size, default=64 << 20)
    p.add_argument("--iters", type=int, default=None, help="timed iterations for every size (warm-up max(1, N/10))")
    p.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    p.add_argument("--timeout", type=float, default=1800, help="collective timeout, seconds")
    p.add_argument("--label", default="", help="stored in every result (the plot legend)")
    a = p.parse_args()
    if a.min_bytes < 1:
        p.error("--min-bytes must be at least 1 byte")
    if a.max_bytes < a.min_bytes:
        p.error("--max-bytes is smaller than --min-bytes")
    if a.max_bytes > MAX_SIZE:
        p.error("--max-bytes: at most 16 GiB")
    if a.iters is not None and a.iters < 1:
        p.error("--iters must be at least 1")
    for var in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        if not os.environ.get(var):
            p.error("%s is unset: launch with batchkit run -n N (or torchrun)" % var)

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://", timeout=datetime.timedelta(seconds=a.timeout))
    rank, n = dist.get_rank(), dist.get_world_size()
    dtype = torch.float32 if a.dtype == "float32" else torch.float64
    elem = 4 if a.dtype == "float32" else 8
    sweep = sizes(a.op, elem, n, a.min_bytes, a.max_bytes)
    if not sweep:
        p.error("no message sizes: %s of %s on %d ranks needs multiples of %d bytes" % (a.op, a.dtype, n, unit(a.op, elem, n)))

    b = Bench(a.op, dtype, rank, n)
    b.settle(sweep[0] // elem)
    for nbytes in sweep:
        count = nbytes // elem
        warmup, iters = schedule(nbytes, a.iters or 0)
        avg, lo, hi = b.time(count, warmup, iters)
        err = b.check(count)
        if err:
            print("gloo_bench.py: " + err, file=sys.stderr)
            dist.destroy_process_group()
            sys.exit(1)
        if rank != 0:
            continue
        algbw = nbytes / avg / 1e9 if avg > 0 else 0.0
        res = {"op": a.op, "backend": "gloo"}
        if a.label:
            res["label"] = a.label
        res.update({
            "dtype": a.dtype, "ranks": n, "bytes": nbytes, "count": count,
            "iters": iters, "warmup": warmup,
            "avg_us": round(avg * 1e6, 3), "min_us": round(lo * 1e6, 3), "max_us": round(hi * 1e6, 3),
            "algbw_gbs": round(algbw, 6), "busbw_gbs": round(algbw * bus_factor(a.op, n), 6),
        })
        if a.op == "reducescatter":
            res["note"] = "emulated"
        print(json.dumps(res, separators=(",", ":")), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
