#!/usr/bin/python3
"""train_ddp.py: a plain PyTorch DDP training script (CPU, gloo; --backend ccl
for Intel's oneCCL bindings).

Nothing in it knows about batchkit: it reads the torchrun contract (RANK,
WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) through
init_process_group(init_method="env://"), as under torchrun. batchkit
provides that contract under every launcher; see README.md here.

It trains a small MLP on the UCI handwritten digits (the CSV batchkit's
own trainer uses: 64 features, then the label) with DistributedSampler and
DistributedDataParallel. Every 5th row is a test row. Each rank prints one
line when it has joined; rank 0 ends with

    final test_accuracy=0.9xx world_size=N
"""

import argparse
import csv
import gzip
import os
import socket

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

HERE = os.path.dirname(os.path.abspath(__file__))
DIGITS = os.path.join(HERE, "..", "..", "trainer", "data", "digits.csv.gz")


def load(path):
    """Train and test tensors; features standardised with the train rows' statistics."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = [r for r in csv.reader(f) if r]
    x = torch.tensor([[float(v) for v in r[:-1]] for r in rows])
    y = torch.tensor([int(r[-1]) for r in rows])
    test = torch.arange(len(y)) % 5 == 4
    mean, std = x[~test].mean(0), x[~test].std(0).clamp(min=1e-6)
    x = (x - mean) / std
    return TensorDataset(x[~test], y[~test]), TensorDataset(x[test], y[test])


def accuracy(model, data):
    x, y = data.tensors
    with torch.no_grad():
        return (model(x).argmax(1) == y).float().mean().item()


def main():
    p = argparse.ArgumentParser(description="PyTorch DDP on the digits (gloo, CPU)")
    p.add_argument("--data", default=DIGITS, help="CSV: features, then the integer label (.gz read compressed)")
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=32, help="per rank")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--backend", default="gloo", help="torch.distributed backend: gloo, or ccl with Intel's oneCCL bindings")
    a = p.parse_args()

    # Small model, several ranks per core: one thread each unless told otherwise.
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    torch.manual_seed(a.seed)

    if a.backend == "ccl":
        import oneccl_bindings_for_pytorch  # noqa: F401 (registers the "ccl" backend)
    dist.init_process_group(backend=a.backend, init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    print(f"rank={rank} world_size={world} local_rank={local_rank} host={socket.gethostname()} backend={dist.get_backend()} threads={torch.get_num_threads()}", flush=True)

    train, test = load(a.data)
    sampler = DistributedSampler(train, num_replicas=world, rank=rank, shuffle=True, seed=a.seed)
    loader = DataLoader(train, batch_size=a.batch_size, sampler=sampler)
    classes = int(train.tensors[1].max()) + 1
    model = nn.Sequential(nn.Linear(train.tensors[0].shape[1], a.hidden), nn.ReLU(), nn.Linear(a.hidden, classes))
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=0.9, weight_decay=1e-4)

    for epoch in range(a.epochs):
        sampler.set_epoch(epoch)
        ddp.train()
        for x, y in loader:
            opt.zero_grad()
            F.cross_entropy(ddp(x), y).backward()
            opt.step()

    ddp.eval()
    acc = accuracy(model, test)
    if rank == 0:
        print(f"final test_accuracy={acc:.4f} world_size={world}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
