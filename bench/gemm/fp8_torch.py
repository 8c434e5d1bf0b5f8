#!/usr/bin/env python3
"""torch._scaled_mm (fp8 e4m3 x e4m3 -> bf16, per-tensor scales) at the shapes of bench_fp8, timed
the way layerjit's benchmarks time (CUDA events, warm-up, median of 30, operands rotated so that no
repeat finds them in L2). Run beside bench_fp8 on the same GPU: its figures are the anchor the issue
names; bench_fp8's cuBLASLt columns are the library under it. Each call is timed alone between two
events, so a call's host work (PyTorch's dispatch, cuBLASLt's algorithm query) counts where it
leaves the GPU idle; the CUDA-graph column replays captured calls, which removes it.

usage: fp8_torch.py [--json FILE]
"""
import argparse
import json
import statistics

import torch

CASES = [("cube", 8192, 8192, 8192), ("qkv", 4096, 6144, 4096), ("o", 4096, 4096, 4096),
         ("gate_up", 4096, 28672, 4096), ("down", 4096, 4096, 14336), ("qkv", 128, 6144, 4096),
         ("o", 128, 4096, 4096), ("gate_up", 128, 28672, 4096), ("down", 128, 4096, 14336)]


def median_ms(fn, rotations, warmup=5, repeats=30):
    for i in range(warmup):
        fn(i % rotations)
    times = []
    for i in range(repeats):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(i % rotations)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    args = ap.parse_args()
    l2 = 50 << 20
    rows = []
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    print("| GEMM | M | _scaled_mm ms | TFLOP/s | fast-accum ms | TFLOP/s | CUDA graph ms | TFLOP/s |")
    print("|---|---|---|---|---|---|---|---|")
    for name, m, n, k in CASES:
        bytes_ = m * k + n * k + 2 * m * n
        rot = max(1, min(16, -(-3 * l2 // bytes_)))
        xs = [(torch.rand(m, k, device="cuda") * 2 - 1).to(torch.float8_e4m3fn) for _ in range(rot)]
        # _scaled_mm wants the second operand column-major: w^T of a row-major [n, k] is just that.
        ws = [(torch.rand(n, k, device="cuda") * 2 - 1).to(torch.float8_e4m3fn) for _ in range(rot)]
        one = torch.ones((), device="cuda")
        flops = 2 * m * n * k
        res = {}
        for fast in (False, True):
            ms = median_ms(lambda i: torch._scaled_mm(xs[i], ws[i].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16,
                                                      use_fast_accum=fast), rot)
            res[fast] = ms
        graphs = []
        for i in range(rot):
            torch.cuda.synchronize()
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                torch._scaled_mm(xs[i], ws[i].t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            graphs.append(g)
        gms = median_ms(lambda i: graphs[i].replay(), rot)
        print(f"| {name} {n}x{k} | {m} | {res[False]:.4f} | {flops / res[False] / 1e9:.1f} | {res[True]:.4f} | "
              f"{flops / res[True] / 1e9:.1f} | {gms:.4f} | {flops / gms / 1e9:.1f} |", flush=True)
        rows.append({"gemm": name, "m": m, "n": n, "k": k, "scaled_mm_ms": res[False], "fast_accum_ms": res[True],
                     "graph_ms": gms})
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
