#!/usr/bin/python3
"""torch_train.py: the PyTorch DDP reference for `batchkit train`.

Trains the MLP `batchkit train` trains, on the same data with the same
hyperparameters, the way a PyTorch user would: DistributedDataParallel over
gloo on CPU, torch.optim.SGD, DistributedSampler. Runs on the current
PyTorch of torch-venv.sh (its MKL and oneDNN CPU kernels) and on Debian's
/usr/bin/python3 with python3-torch (PyTorch 1.13, the netlib reference
BLAS). Start it with that python's torchrun:

    /opt/batchkit/torch/bin/torchrun --standalone --nproc_per_node 2 \\
        trainer/bench/reference/torch_train.py --metrics torch.jsonl
    torchrun --standalone --redirects 1 --tee 1 --nproc_per_node 2 \\
        trainer/bench/reference/torch_train.py --metrics torch113.jsonl

(--redirects 1 --tee 1 work around torchrun 1.13's enum bug on Python 3.11.)

Rank 0 writes one JSON line per epoch to --metrics (and stdout), with the
keys of `batchkit train --metrics`: epoch, step, loss, train_acc, test_acc,
test_loss, samples_per_second, elapsed; then one summary line with
time_to_target (the elapsed of the first epoch whose test accuracy reaches
--target, null if none does), peak memory and thread count.

What is the same as batchkit (trainer/data.go, model.go, optim.go,
sampler.go, train.go):
  - data: the CSV (default: the repo's trainer/data/digits.csv.gz), every
    5th row (i % 5 == 4) a test row, features standardised with the train
    rows' mean and 1/std (sums in float64, 1 where std is 0);
  - model: Linear layers (torch.nn.Linear's default init, which batchkit
    copies: U(±1/sqrt(fan_in)) for weights and biases) with ReLU between,
    softmax cross-entropy, mean over each rank's batch; gradients averaged
    over the ranks (DDP's allreduce);
  - SGD with momentum, dampening 0, weight decay (torch is the spec);
  - the sample order: DistributedSampler(shuffle, seed, drop_last=False),
    set_epoch every epoch, batches of --batch-size per rank, the last short;
  - every rank evaluates the whole test set after every epoch, in batches of
    256, in the same process and the same timed window;
  - elapsed: from just before the first step (after imports, data, model,
    DDP's initial broadcast of the weights) to the end of the epoch's
    evaluation; samples_per_second: the epoch's samples on all ranks (padding
    included) over the epoch's training steps, evaluation excluded.
What differs: torch's random numbers (init, permutation) are not batchkit's,
so the two runs see other initial weights and sample orders; batches are
taken from the in-memory tensors with the sampler's indices (no DataLoader,
whose per-sample collation would slow torch down for no reason here).
"""

import argparse
import csv
import gzip
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data.distributed import DistributedSampler

TEST_EVERY = 5
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))


def load(path):
    """The CSV's features (float32 as batchkit parses them) and labels."""
    opener = gzip.open if path.endswith(".gz") else open
    xs, ys = [], []
    with opener(path, "rt") as f:
        for row in csv.reader(f):
            if row:
                xs.append([float(v) for v in row[:-1]])
                ys.append(int(row[-1]))
    return torch.tensor(xs, dtype=torch.float32), torch.tensor(ys, dtype=torch.int64)


def split(x, y):
    """Every 5th row a test row; standardise both with the train statistics."""
    test = torch.arange(len(y)) % TEST_EVERY == TEST_EVERY - 1
    xtr, ytr, xte, yte = x[~test], y[~test], x[test], y[test]
    mean = xtr.double().mean(0).float()
    sd = (xtr.double() - mean.double()).pow(2).mean(0).sqrt()
    scale = torch.where(sd > 0, 1 / sd, torch.ones_like(sd)).float()
    return (xtr - mean) * scale, ytr, (xte - mean) * scale, yte


def mlp(sizes):
    layers = []
    for i in range(1, len(sizes)):
        layers.append(nn.Linear(sizes[i - 1], sizes[i]))
        if i < len(sizes) - 1:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def evaluate(model, x, y):
    loss, correct = 0.0, 0
    with torch.no_grad():
        for i in range(0, len(y), 256):
            z = model(x[i:i + 256])
            loss += F.cross_entropy(z, y[i:i + 256], reduction="sum").item()
            correct += (z.argmax(1) == y[i:i + 256]).sum().item()
    return loss / len(y), correct / len(y)


def peak_rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default=os.path.join(REPO, "trainer", "data", "digits.csv.gz"))
    p.add_argument("--hidden", default="64", help="hidden layer sizes, comma-separated")
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=1e-4)
    p.add_argument("--epochs", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--target", type=float, default=0.95, help="test accuracy for time_to_target")
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads (0: torch's default)")
    p.add_argument("--metrics", help="write the JSON lines to this file too (rank 0)")
    a = p.parse_args()

    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    if "RANK" not in os.environ:  # alone: a world of 1, like batchkit train
        os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="0")
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()

    xtr, ytr, xte, yte = split(*load(a.data))
    hidden = [int(h) for h in a.hidden.split(",") if h.strip()]
    sizes = [xtr.shape[1]] + hidden + [int(max(ytr.max(), yte.max())) + 1]
    model = mlp(sizes)  # same seed on every rank; DDP broadcasts rank 0's anyway
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay)
    sampler = DistributedSampler(range(len(ytr)), num_replicas=world, rank=rank, shuffle=True, seed=a.seed, drop_last=False)

    out = open(a.metrics, "w") if rank == 0 and a.metrics else None

    def emit(obj):
        if rank != 0:
            return
        line = json.dumps(obj)
        print(line, flush=True)
        if out:
            out.write(line + "\n")
            out.flush()

    step, reached = 0, None
    began = time.perf_counter()
    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        idx = torch.tensor(list(sampler))
        model.train()
        t0 = time.perf_counter()
        loss_sum = correct = count = 0.0
        for i in range(0, len(idx), a.batch_size):
            b = idx[i:i + a.batch_size]
            x, y = xtr[b], ytr[b]
            opt.zero_grad(set_to_none=True)
            z = ddp(x)
            loss = F.cross_entropy(z, y)
            loss.backward()
            opt.step()
            step += 1
            # The epoch's figures over all ranks, as batchkit's loop sums
            # them (it piggybacks them on the gradient's allreduce; here
            # they are summed once at the epoch's end).
            loss_sum += loss.item() * len(b)
            correct += (z.argmax(1) == y).sum().item()
            count += len(b)
        train_s = time.perf_counter() - t0
        stats = torch.tensor([loss_sum, correct, count], dtype=torch.float64)
        dist.all_reduce(stats)
        model.eval()
        test_loss, test_acc = evaluate(model, xte, yte)
        elapsed = time.perf_counter() - began
        if reached is None and test_acc >= a.target:
            reached = elapsed
        emit({"epoch": epoch + 1, "step": step, "loss": stats[0].item() / stats[2].item(),
              "train_acc": stats[1].item() / stats[2].item(), "test_acc": test_acc, "test_loss": test_loss,
              "samples_per_second": stats[2].item() / train_s, "elapsed": elapsed})
    emit({"time_to_target": reached, "target": a.target, "epochs": a.epochs, "steps": step, "world_size": world,
          "backend": "gloo", "threads": torch.get_num_threads(), "peak_rss_kib": peak_rss_kib(),
          "torch": torch.__version__})
    if out:
        out.close()
    dist.barrier()  # leave together: gloo's teardown can abort a rank whose peer is already gone
    dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
