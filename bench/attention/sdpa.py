"""PyTorch scaled_dot_product_attention on the shapes of bench_attention (the anchor for its ratios).

Prefill: B=1, 32 query / 8 KV heads (enable_gqa), head_dim 128, causal, S in {2048, 8192}.
Decode: one query token per sequence over a 4096-token cache, B in {1, 32}.
Timed with CUDA events: 5 warm-up calls, median of 30; decode caches rotated past L2 like bench_attention.
Usage: python3 bench/attention/sdpa.py
"""
import statistics

import torch
import torch.nn.functional as F


def median_ms(fn, sets):
    for i in range(5):
        fn(*sets[i % len(sets)])
    torch.cuda.synchronize()
    times = []
    for i in range(30):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(*sets[i % len(sets)])
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def main():
    dev = torch.device("cuda")
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    print("| case | kernel | time (ms) | TFLOP/s | GB/s |\n|------|--------|-----------|---------|------|")
    for s in (2048, 8192):
        q = torch.randn(1, 32, s, 128, device=dev, dtype=torch.bfloat16)
        k = torch.randn(1, 8, s, 128, device=dev, dtype=torch.bfloat16)
        v = torch.randn(1, 8, s, 128, device=dev, dtype=torch.bfloat16)
        ms = median_ms(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True), [(q, k, v)])
        flops = 4.0 * s * s * 128 * 32 / 2
        print(f"| prefill B=1 S={s} causal | torch SDPA | {ms:.4f} | {flops / (ms * 1e-3) / 1e12:.1f} | |")
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    for batch in (1, 32):
        c = 4096
        kv_bytes = 2.0 * batch * c * 8 * 128 * 2
        rotations = max(1, min(64, int((2 * l2 + kv_bytes - 1) // kv_bytes)))
        sets = []
        for _ in range(rotations):
            sets.append((torch.randn(batch, 32, 1, 128, device=dev, dtype=torch.bfloat16),
                         torch.randn(batch, 8, c, 128, device=dev, dtype=torch.bfloat16),
                         torch.randn(batch, 8, c, 128, device=dev, dtype=torch.bfloat16)))
        ms = median_ms(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), sets)
        print(f"| decode B={batch} ctx={c} | torch SDPA | {ms:.4f} | | {kv_bytes / (ms * 1e-3) / 1e9:.0f} |")


if __name__ == "__main__":
    main()
