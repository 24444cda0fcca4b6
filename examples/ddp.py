"""ddp.py - a small DistributedDataParallel training run on CPU, on the `braid` backend.

    torchrun --nproc-per-node 2 examples/ddp.py                  # braid
    torchrun --nproc-per-node 2 examples/ddp.py --backend gloo   # the same run on Gloo

A two-layer MLP learns a fixed random linear map with noise (synthetic data, seeded, so every
backend sees the same batches and the same initial weights). Each rank trains on its own
shard; DDP all-reduces the gradients after every backward (bucketed, through the backend's
allreduce and its Work futures). Rank 0 prints the loss every --log steps and, at the end,
"final loss <value>" - the same value, up to floating-point summation order, on any backend
whose all-reduce is right. Needs braid_torch importable (make torch-backend puts it on
PYTHONPATH through tests/pytorch/env.sh).
"""
import argparse

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP


def batches(rank, world, steps, batch, dim):
    g = torch.Generator().manual_seed(1234)
    w_true = torch.randn(dim, 4, generator=g)
    for step in range(steps):
        gs = torch.Generator().manual_seed(10_000 + step * world + rank)
        x = torch.randn(batch, dim, generator=gs)
        y = x @ w_true + 0.01 * torch.randn(batch, 4, generator=gs)
        yield x, y


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--backend", default="braid")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--dim", type=int, default=32)
    p.add_argument("--log", type=int, default=50)
    a = p.parse_args()
    if a.backend == "braid":
        import braid_torch  # noqa: F401  registers the backend
    dist.init_process_group(a.backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same initial weights everywhere (DDP also broadcasts rank 0's)
    model = DDP(nn.Sequential(nn.Linear(a.dim, 64), nn.Tanh(), nn.Linear(64, 4)))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    loss_fn = nn.MSELoss()
    for step, (x, y) in enumerate(batches(rank, world, a.steps, a.batch, a.dim)):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        # the loss of the whole step (every rank's shard), as rank 0 reports it
        t = loss.detach().clone()
        dist.all_reduce(t)
        if rank == 0 and (step % a.log == 0 or step == a.steps - 1):
            print(f"step {step:4d} loss {t.item() / world:.6f}", flush=True)
    if rank == 0:
        print(f"final loss {t.item() / world:.8f} ({a.backend}, {world} ranks)")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
