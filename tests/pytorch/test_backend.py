"""test_backend.py - torch's collectives through the `braid` backend, against Gloo's results.

Run under torchrun (tests/pytorch/backend.sh does): every rank joins a braid process group
(the default one) and a Gloo group, runs each collective on both with the same inputs, and
compares. Where Gloo has no such type or op (fp8, uint32/64, AVG, PREMUL_SUM), the reference
is computed locally from the ranks' inputs, which every rank can generate. Integer results
must be equal; floating-point ones within the type's tolerance (the reduction order differs).
Rank 0 prints one line per case and "N passed, N failed, N skipped" summed over the ranks.
"""
import os
import sys
import traceback

import torch
import torch.distributed as dist

import braid_torch  # noqa: F401  registers "braid"

DTYPES = [torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.float32, torch.float64,
          torch.bfloat16, torch.uint32, torch.uint64, torch.float8_e4m3fn, torch.float8_e5m2, torch.bool]
GLOO_DTYPES = {torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.float32, torch.float64,
               torch.bfloat16, torch.bool}
OPS = {"sum": dist.ReduceOp.SUM, "product": dist.ReduceOp.PRODUCT, "min": dist.ReduceOp.MIN,
       "max": dist.ReduceOp.MAX, "avg": dist.ReduceOp.AVG}

rank = world = 0
gloo = None
results = {"passed": 0, "failed": 0, "skipped": 0}


def data(dtype, r, n, salt=0):
    """Rank r's input: small values, so sums and products stay exact in every type."""
    g = torch.Generator().manual_seed(1000 * r + salt)
    if dtype == torch.bool:
        return torch.randint(0, 2, (n,), generator=g).bool()
    v = torch.randint(1, 4, (n,), generator=g)
    return v.to(torch.float32).to(dtype) if dtype.is_floating_point else v.to(dtype)


def reference(dtype, op, n, salt=0):
    xs = [data(dtype, r, n, salt).to(torch.float64) for r in range(world)]
    st = torch.stack(xs)
    if op == "sum":
        out = st.sum(0)
    elif op == "product":
        out = st.prod(0)
    elif op == "min":
        out = st.min(0).values
    elif op == "max":
        out = st.max(0).values
    elif op == "avg":
        out = st.mean(0) if dtype.is_floating_point else torch.div(st.sum(0), world, rounding_mode="trunc")
    if dtype == torch.bool:
        out = out != 0
    return out.to(dtype)


# Relative rounding error of one operation in each narrow type (half an ulp).
UNIT = {torch.float8_e4m3fn: 2.0 ** -4, torch.float8_e5m2: 2.0 ** -3, torch.float16: 2.0 ** -11,
        torch.bfloat16: 2.0 ** -8}


def close(a, b):
    if a.dtype in UNIT:
        # a ring of `world` ranks rounds after each of its world - 1 hops, the reference once
        tol = 1.05 * world * UNIT[a.dtype]
        return torch.allclose(a.float(), b.float(), rtol=tol, atol=tol)
    if a.dtype.is_floating_point:
        return torch.allclose(a, b, rtol=1e-6, atol=1e-6)
    return torch.equal(a.to(torch.int64) if a.dtype in (torch.uint32, torch.uint64) else a,
                       b.to(torch.int64) if b.dtype in (torch.uint32, torch.uint64) else b)


def case(name, fn):
    """Run fn() -> True/False/None (None: skipped) and count it."""
    try:
        ok = fn()
    except Exception:  # noqa: BLE001  a failure of the case, with its traceback
        traceback.print_exc()
        ok = False
    key = "skipped" if ok is None else ("passed" if ok else "failed")
    results[key] += 1
    if key == "failed":
        print(f"rank {rank}: {key.upper()}: {name}", flush=True)


def on_gloo(dtype, op=None):
    return dtype in GLOO_DTYPES and op not in ("avg",) and not (dtype == torch.bool and op == "product")


# ---- the cases -------------------------------------------------------------------------------

def all_reduce(dtype, op, n):
    if dtype == torch.bool and op == "avg":
        return None
    x = data(dtype, rank, n)
    dist.all_reduce(x, op=OPS[op])
    if on_gloo(dtype, op):
        y = data(dtype, rank, n)
        dist.all_reduce(y, op=OPS[op], group=gloo)
        return close(x, y) and close(x, reference(dtype, op, n))
    return close(x, reference(dtype, op, n))


def premul_sum(dtype):
    x = data(dtype, rank, 33)
    dist.all_reduce(x, op=dist._make_nccl_premul_sum(2.0))
    return close(x, (reference(torch.float64, "sum", 33) * 2).to(dtype) if dtype.is_floating_point else x)


def broadcast(dtype, root):
    x = data(dtype, rank, 17, salt=3)
    dist.broadcast(x, root)
    return close(x, data(dtype, root, 17, salt=3))


def reduce(dtype, root):
    x = data(dtype, rank, 19)
    dist.reduce(x, root, op=dist.ReduceOp.SUM)
    return rank != root or close(x, reference(dtype, "sum", 19))


def all_gather(dtype, n):
    x = data(dtype, rank, n)
    outs = [torch.empty(n, dtype=dtype) for _ in range(world)]
    dist.all_gather(outs, x)
    flat = torch.empty(n * world, dtype=dtype)
    dist.all_gather_into_tensor(flat, x)
    want = [data(dtype, r, n) for r in range(world)]
    ok = all(close(o, w) for o, w in zip(outs, want)) and close(flat, torch.cat(want))
    if dtype in GLOO_DTYPES:
        g = [torch.empty(n, dtype=dtype) for _ in range(world)]
        dist.all_gather(g, x, group=gloo)
        ok = ok and all(close(o, w) for o, w in zip(outs, g))
    return ok


def reduce_scatter(dtype, n):
    full = reference(dtype, "sum", n * world)
    ins = list(data(dtype, rank, n * world).chunk(world))
    out = torch.empty(n, dtype=dtype)
    dist.reduce_scatter(out, ins)
    out2 = torch.empty(n, dtype=dtype)
    dist.reduce_scatter_tensor(out2, data(dtype, rank, n * world))
    want = full[rank * n:(rank + 1) * n]
    return close(out, want) and close(out2, want)


def all_to_all(dtype, uneven):
    if uneven:
        # rank r sends (r + p + 1) rows of 3 to rank p
        send_splits = [rank + p + 1 for p in range(world)]
        recv_splits = [p + rank + 1 for p in range(world)]
        x = torch.cat([torch.full((s, 3), 10 * rank + p, dtype=torch.int64) for p, s in enumerate(send_splits)])
        x = x.to(dtype)
        out = torch.empty((sum(recv_splits), 3), dtype=dtype)
        dist.all_to_all_single(out, x, recv_splits, send_splits)
        want = torch.cat([torch.full((s, 3), 10 * p + rank, dtype=torch.int64) for p, s in enumerate(recv_splits)])
        return close(out, want.to(dtype))
    x = torch.arange(world * 4, dtype=torch.int64).add(100 * rank).to(dtype)
    out = torch.empty_like(x)
    dist.all_to_all_single(out, x)
    want = torch.cat([torch.arange(rank * 4, rank * 4 + 4).add(100 * p) for p in range(world)]).to(dtype)
    ins = list(x.chunk(world))
    outs = [torch.empty(4, dtype=dtype) for _ in range(world)]
    dist.all_to_all(outs, ins)
    return close(out, want) and close(torch.cat(outs), want)


def send_recv(dtype):
    nxt, prv = (rank + 1) % world, (rank - 1) % world
    x = data(dtype, rank, 29, salt=7)
    y = torch.empty(29, dtype=dtype)
    if rank % 2 == 0:
        dist.send(x, nxt)
        dist.recv(y, prv)
    else:
        dist.recv(y, prv)
        dist.send(x, nxt)
    return close(y, data(dtype, prv, 29, salt=7))


def gather_scatter(dtype):
    x = data(dtype, rank, 7)
    outs = [torch.empty(7, dtype=dtype) for _ in range(world)] if rank == 0 else None
    dist.gather(x, outs, dst=0)
    ok = rank != 0 or all(close(o, data(dtype, r, 7)) for r, o in enumerate(outs))
    y = torch.empty(7, dtype=dtype)
    dist.scatter(y, [data(dtype, r, 7, salt=9) for r in range(world)] if rank == 0 else None, src=0)
    return ok and close(y, data(dtype, rank, 7, salt=9))


def misc():
    # non-contiguous output, async work objects with futures, a barrier, coalesced all-reduce
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4).add(rank).t()
    dist.all_reduce(x)
    want = (torch.arange(12, dtype=torch.float32).reshape(3, 4) * world + sum(range(world))).t()
    w = dist.all_reduce(y := torch.ones(5), async_op=True)
    w.wait()
    fut = w.get_future().wait()
    dist.barrier()
    ts = [torch.ones(3), torch.full((2,), 2.0)]
    dist.all_reduce_coalesced(ts)
    return (torch.equal(x, want) and torch.equal(y, torch.full((5,), float(world)))
            and torch.equal(fut[0], y) and torch.equal(ts[1], torch.full((2,), 2.0 * world)))


def main():
    global rank, world, gloo
    dist.init_process_group("braid")
    rank, world = dist.get_rank(), dist.get_world_size()
    gloo = dist.new_group(backend="gloo")
    for dtype in DTYPES:
        for op in OPS:
            for n in (1, 1000, 65537):
                case(f"all_reduce {dtype} {op} {n}", lambda: all_reduce(dtype, op, n))
        case(f"broadcast {dtype}", lambda: all(broadcast(dtype, r) for r in range(world)))
        case(f"reduce {dtype}", lambda: all(reduce(dtype, r) for r in range(world)))
        for n in (1, 4099):
            case(f"all_gather {dtype} {n}", lambda: all_gather(dtype, n))
            case(f"reduce_scatter {dtype} {n}", lambda: reduce_scatter(dtype, n))
        case(f"all_to_all {dtype} even", lambda: all_to_all(dtype, False))
        case(f"all_to_all {dtype} uneven", lambda: all_to_all(dtype, True))
        case(f"send/recv {dtype}", lambda: send_recv(dtype))
        case(f"gather/scatter {dtype}", lambda: gather_scatter(dtype))
    for dtype in (torch.float32, torch.float64, torch.bfloat16):
        case(f"premul_sum {dtype}", lambda: premul_sum(dtype))
    case("non-contiguous, async, futures, barrier, coalesced", misc)
    counts = torch.tensor([results["passed"], results["failed"], results["skipped"]])
    dist.all_reduce(counts, group=gloo)
    if rank == 0:
        print(f"backend suite on {world} ranks: {counts[0]} passed, {counts[1]} failed, {counts[2]} skipped")
        print(f"{counts[0]} passed, {counts[1]} failed")
    dist.destroy_process_group()
    sys.exit(1 if counts[1] else 0)


if __name__ == "__main__":
    os.environ.setdefault("TORCH_DISTRIBUTED_DEBUG", "OFF")
    main()
