#!/usr/bin/env python3
"""Triton's tensor-core GEMM restricted to mma.sync on Hopper: an outside anchor for layerjit's sm_80
path (issue 6 asks that path for 0.60x cuBLAS at M = 4096).

Triton lowers tl.dot to wgmma on sm_90; with DISABLE_MMA_V3=1 (read by Triton's matmul lowering) it
uses the Ampere mma.sync form instead. The script checks the generated PTX for that (mma.sync present,
wgmma absent) rather than trusting the variable, tries a list of tile configs per shape, checks each
result against torch.mm, and times the best against torch.mm (cuBLAS) in the same process.

  python3 bench/gemm/triton_mma_sync.py [--m 4096] [--json OUT.json]

Timing: CUDA events around each launch, 10 warm-up launches, median of 50. y = x @ w^T with x [M, K]
and w [N, K], bf16 in, fp32 accumulation, bf16 out: the layout of layerjit's matmul groups.
"""
import argparse
import json
import os
import statistics

os.environ.setdefault("DISABLE_MMA_V3", "1")  # before triton compiles anything

import sys  # noqa: E402

import torch  # noqa: E402

try:
    import triton  # noqa: E402
    import triton.language as tl  # noqa: E402
except ImportError as e:  # PyTorch without Triton: no anchor to take, said plainly
    print(f"skipped: Triton not importable ({e})")
    sys.exit(0)

SHAPES = [("qkv", 6144, 4096), ("o", 4096, 4096), ("gate_up", 28672, 4096), ("down", 4096, 14336)]
# (BM, BN, BK, stages, warps): the usual Ampere-class GEMM tiles.
CONFIGS = [
    (128, 256, 64, 3, 8), (256, 128, 64, 3, 8), (128, 256, 32, 4, 8), (256, 128, 32, 4, 8),
    (128, 128, 64, 4, 4), (128, 128, 32, 4, 4), (128, 128, 64, 3, 8), (128, 128, 32, 5, 8),
    (64, 256, 32, 4, 4), (128, 64, 64, 4, 4),
]
GROUP_M = 8


@triton.jit
def matmul_xwt(x_ptr, w_ptr, y_ptr, M, N, K,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GM: tl.constexpr):
    # Grouped raster: GM tile rows share each run of W tiles, as layerjit's kernel does.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BM)
    tiles_n = tl.cdiv(N, BN)
    per_group = GM * tiles_n
    first_m = (pid // per_group) * GM
    rows = tl.minimum(tiles_m - first_m, GM)
    tm = first_m + (pid % per_group) % rows
    tn = (pid % per_group) // rows
    offs_m = tm * BM + tl.arange(0, BM)
    offs_n = tn * BN + tl.arange(0, BN)
    offs_k = tl.arange(0, BK)
    xs = x_ptr + offs_m[:, None] * K + offs_k[None, :]
    ws = w_ptr + offs_n[None, :] * K + offs_k[:, None]  # a [BK, BN] view of w's rows
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        k_left = K - k * BK
        a = tl.load(xs, mask=(offs_m[:, None] < M) & (offs_k[None, :] < k_left), other=0.0)
        b = tl.load(ws, mask=(offs_n[None, :] < N) & (offs_k[:, None] < k_left), other=0.0)
        acc = tl.dot(a, b, acc)
        xs += BK
        ws += BK
    ys = y_ptr + offs_m[:, None] * N + offs_n[None, :]
    tl.store(ys, acc.to(tl.bfloat16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


def median_ms(fn, warmup=10, reps=50):
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--m", type=int, default=4096)
    ap.add_argument("--json", help="also write the rows here")
    args = ap.parse_args()
    torch.manual_seed(0)
    dev = torch.cuda.get_device_name()
    print(f"# Triton {triton.__version__}, torch {torch.__version__}, {dev}, DISABLE_MMA_V3="
          f"{os.environ.get('DISABLE_MMA_V3')}, M = {args.m}")
    rows = []
    print("| GEMM | M | best Triton config (BM BN BK stages warps) | ms | TFLOP/s | torch.mm ms | TFLOP/s | Triton / cuBLAS |")
    print("|---|---|---|---|---|---|---|---|")
    for name, n, k in SHAPES:
        m = args.m
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16) / k ** 0.5
        ref = torch.mm(x, w.t())
        flops = 2.0 * m * n * k
        best = None
        for bm, bn, bk, stages, warps in CONFIGS:
            y = torch.full((m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
            grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)

            def launch():
                return matmul_xwt[grid](x, w, y, m, n, k, BM=bm, BN=bn, BK=bk, GM=GROUP_M,
                                        num_stages=stages, num_warps=warps)
            try:
                kernel = launch()
                torch.cuda.synchronize()
            except Exception as e:  # a config that does not fit (shared memory, registers)
                print(f"#   {name} {bm}x{bn}x{bk} s{stages} w{warps}: {type(e).__name__}")
                continue
            ptx = kernel.asm["ptx"]
            n_sync, n_wgmma = ptx.count("mma.sync"), ptx.count("wgmma.mma_async")
            if n_sync == 0 or n_wgmma != 0:
                raise SystemExit(f"{name} {bm}x{bn}x{bk}: PTX has {n_sync} mma.sync and {n_wgmma} wgmma; "
                                 "this Triton ignores DISABLE_MMA_V3, the anchor would not be mma.sync")
            err = ((y.float() - ref.float()).abs().max() / ref.float().abs().max()).item()
            if not err < 2e-2:
                raise SystemExit(f"{name} {bm}x{bn}x{bk}: relative error {err} against torch.mm")
            ms = median_ms(launch)
            print(f"#   {name} {bm}x{bn}x{bk} s{stages} w{warps}: {ms:.4f} ms, {flops / ms / 1e9:.1f} TFLOP/s, "
                  f"mma.sync in PTX {n_sync}, regs {kernel.n_regs}, spills {kernel.n_spills}")
            if best is None or ms < best[0]:
                best = (ms, f"{bm} {bn} {bk} {stages} {warps}")
        cublas = median_ms(lambda: torch.mm(x, w.t()))
        row = dict(gemm=name, m=m, n=n, k=k, config=best[1], ms=best[0], tflops=flops / best[0] / 1e9,
                   cublas_ms=cublas, cublas_tflops=flops / cublas / 1e9, ratio=cublas / best[0])
        rows.append(row)
        print(f"| {name} | {m} | {row['config']} | {row['ms']:.4f} | {row['tflops']:.1f} | {cublas:.4f} | "
              f"{row['cublas_tflops']:.1f} | {row['ratio']:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(device=dev, triton=triton.__version__, torch=torch.__version__, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
