"""torch_sgd_steps.py: PyTorch's own training steps for TestMatchesPyTorchSGD.

Reads a JSON job on stdin (written by the test): the layer sizes, SGD's
hyperparameters, the initial parameters in batchkit's layout (each layer's
weights out x in row-major, then its biases) and, for every step, every
rank's batch (rows of features, labels). Runs the steps as PyTorch DDP
would on that many ranks: each rank's mean cross-entropy loss over its own
batch and its gradient, the gradients summed in rank order and divided by
the number of ranks (DDP's allreduce), then one torch.optim.SGD step
(dampening 0, not Nesterov). Writes
JSON on stdout: the loss of each step (mean over all ranks' samples) and
the final parameters in the same layout.
"""
import json
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

# The model as make bench-train's PyTorch reference builds it.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "reference"))
from torch_train import mlp  # noqa: E402


def linears(model):
    return [m for m in model if isinstance(m, nn.Linear)]


def load(model, flat):
    flat = torch.tensor(flat, dtype=torch.float32)
    off = 0
    with torch.no_grad():
        for lin in linears(model):
            for p in (lin.weight, lin.bias):
                n = p.numel()
                p.copy_(flat[off:off + n].view_as(p))
                off += n
    if off != len(flat):
        sys.exit("torch_sgd_steps: %d parameters given, the model has %d" % (len(flat), off))


def flatten(model):
    return [v for lin in linears(model) for p in (lin.weight, lin.bias) for v in p.detach().reshape(-1).tolist()]


def main():
    job = json.load(sys.stdin)
    torch.set_num_threads(1)
    model = mlp(job["sizes"])
    load(model, job["params"])
    opt = torch.optim.SGD(model.parameters(), lr=job["lr"], momentum=job["momentum"],
                          weight_decay=job["weight_decay"])
    params = list(model.parameters())
    losses = []
    for ranks in job["steps"]:
        grads, loss_sum, count = None, 0.0, 0
        for batch in ranks:
            x = torch.tensor(batch["x"], dtype=torch.float32)
            y = torch.tensor(batch["y"], dtype=torch.int64)
            model.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            g = [p.grad.clone() for p in params]
            grads = g if grads is None else [a + b for a, b in zip(grads, g)]
            loss_sum += loss.item() * len(y)
            count += len(y)
        for p, g in zip(params, grads):
            p.grad = g / len(ranks)
        opt.step()
        losses.append(loss_sum / count)
    json.dump({"losses": losses, "params": flatten(model)}, sys.stdout)


if __name__ == "__main__":
    main()
