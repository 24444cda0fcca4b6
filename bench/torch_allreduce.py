"""torch_allreduce.py - dist.all_reduce on CPU tensors, braid backend vs Gloo, in the same run.

    torchrun --nproc-per-node 2 bench/torch_allreduce.py [--min 8] [--max 256M] [--time 0.5]

Every rank joins a braid process group and a Gloo group. For each size (float32 elements,
8 B to 256 MiB by factors of 2 by default) both backends run the same all-reduce, alternating
in rounds so that a disturbance of the machine hits both: per round a warm-up, then as many
iterations as fit in --time seconds (at least 3). The median time per call over the rounds is
reported (rank 0; every call ends with the ranks in step, as the timing loop is synchronous),
with the ratio Gloo / braid. Not a test: it prints measurements.
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

import braid_torch  # noqa: F401


def size_arg(s):
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * mult[s[-1].upper()] if s[-1].upper() in mult else int(s)


def time_calls(x, group, budget):
    dist.all_reduce(x, group=group)  # warm-up
    dist.barrier(group=group)
    t0 = time.perf_counter()
    dist.all_reduce(x, group=group)
    one = max(time.perf_counter() - t0, 1e-7)
    iters = torch.tensor([max(3, int(budget / one))])
    dist.all_reduce(iters, op=dist.ReduceOp.MIN, group=group)  # every rank runs as many
    n = int(iters.item())
    dist.barrier(group=group)
    t0 = time.perf_counter()
    for _ in range(n):
        dist.all_reduce(x, group=group)
    return (time.perf_counter() - t0) / n


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--min", type=size_arg, default=8)
    p.add_argument("--max", type=size_arg, default=256 << 20)
    p.add_argument("--time", type=float, default=0.5, help="seconds per size, backend and round")
    p.add_argument("--rounds", type=int, default=3)
    a = p.parse_args()
    dist.init_process_group("braid")
    rank, world = dist.get_rank(), dist.get_world_size()
    groups = {"braid": dist.group.WORLD, "gloo": dist.new_group(backend="gloo")}
    if rank == 0:
        print(f"# dist.all_reduce, float32 sum, {world} ranks, CPU tensors; median of {a.rounds} rounds")
        print(f"# {'bytes':>10}  {'braid us':>10}  {'gloo us':>10}  {'gloo/braid':>10}")
    size = a.min
    while size <= a.max:
        x = torch.ones(max(1, size // 4), dtype=torch.float32)
        times = {k: [] for k in groups}
        for _ in range(a.rounds):
            for name, g in groups.items():
                x.fill_(1.0)
                times[name].append(time_calls(x, g, a.time))
        med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
        if rank == 0:
            print(f"  {size:>10}  {med['braid']:>10.2f}  {med['gloo']:>10.2f}  {med['gloo'] / med['braid']:>10.2f}",
                  flush=True)
        size *= 2
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
