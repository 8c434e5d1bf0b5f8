#!/usr/bin/env python3
"""The Llama-3-8B decoder layer in PyTorch against layerjit, on the same weights and inputs.

For each case, `layerjit run ... --save DIR` generates weights and inputs from a seed, runs and times
layerjit's plans (eager and as one CUDA graph) and saves inputs and outputs as safetensors. This
script then loads the same tensors into PyTorch, runs the same layer there (bf16, a static KV cache
written in place, SDPA with grouped-query heads) in eager mode, with torch.compile and with
torch.compile(mode="reduce-overhead"), checks every output against layerjit's, and times the
PyTorch variants in the same session (CUDA events, warm-up, 5 interleaved rounds of 7 calls, the
median of the round medians: the clock drops under a sustained load, and interleaving shares that
fairly). PyTorch keeps its caches in the [B, H, C, D] layout its attention reads without a copy
(converted once, untimed); layerjit's IR stores [B, C, H, D].

  python3 bench/compare_torch.py --layerjit build/tools/layerjit [--case prefill,decode1,decode32]
                                 [--modes eager,compile,reduce-overhead] [--json FILE]

Exit status: 0 when every output agrees (relative 2^-5 of the largest magnitude, as `layerjit run`
checks bf16 layers), 1 otherwise, 77 when PyTorch with CUDA is not available (nothing compared).
"""
import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("compare_torch: skipped: PyTorch is not installed")
    sys.exit(77)

CASES = {
    "prefill": ("llama3_8b_prefill", "T=4096"),
    "decode1": ("llama3_8b_decode", "B=1,C=4096"),
    "decode32": ("llama3_8b_decode", "B=32,C=4096"),
}
HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN = 4096, 32, 8, 128, 14336
EPS, THETA = 1e-5, 500000.0
TOLERANCE = 2.0 ** -5

_DTYPES = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "I32": torch.int32, "I8": torch.int8}


def read_safetensors(path):
    """Our own reader (8-byte little-endian header length, JSON header, raw little-endian data)."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        begin, end = meta["data_offsets"]
        dtype = _DTYPES[meta["dtype"]]
        if end > begin:
            out[name] = torch.frombuffer(bytearray(data[begin:end]), dtype=dtype).reshape(meta["shape"])
        else:
            out[name] = torch.empty(meta["shape"], dtype=dtype)
    return out


def rms_norm(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + EPS) * w.float()).to(x.dtype)


def rope_table(pos):
    i = torch.arange(HEAD_DIM // 2, device=pos.device, dtype=torch.float32)
    angle = pos.float()[:, None] * torch.pow(THETA, -2.0 * i / HEAD_DIM)[None, :]
    return angle.cos(), angle.sin()


def rope_half(x, cos, sin):
    """Pairs (i, i + D/2) of every head rotated by the token's angle (the IR's style = "half")."""
    half = HEAD_DIM // 2
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1).to(x.dtype)


def mlp(h1, mlp_norm, w_gate_up, w_down):
    hn = rms_norm(h1, mlp_norm)
    gate, up = (hn @ w_gate_up.t()).split([FFN, FFN], dim=1)
    return h1 + (F.silu(gate) * up) @ w_down.t()


def prefill(x, pos, attn_norm, w_qkv, w_o, mlp_norm, w_gate_up, w_down):
    t = x.shape[0]
    q, k, v = (rms_norm(x, attn_norm) @ w_qkv.t()).split([HIDDEN, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM], dim=1)
    cos, sin = rope_table(pos)
    q = rope_half(q.reshape(t, HEADS, HEAD_DIM), cos, sin)
    k = rope_half(k.reshape(t, KV_HEADS, HEAD_DIM), cos, sin)
    v = v.reshape(t, KV_HEADS, HEAD_DIM)
    # [1, H, T, D] with the KV heads repeated for their query heads: SDPA's flash kernel (3-D inputs or
    # enable_gqa sent PyTorch 2.11 to a far slower path here, 16.9 ms for the layer).
    group = HEADS // KV_HEADS
    a = F.scaled_dot_product_attention(q.transpose(0, 1)[None], k.transpose(0, 1).repeat_interleave(group, dim=0)[None],
                                       v.transpose(0, 1).repeat_interleave(group, dim=0)[None], is_causal=True)
    h1 = x + a[0].transpose(0, 1).reshape(t, HIDDEN) @ w_o.t()
    return mlp(h1, mlp_norm, w_gate_up, w_down), k, v


def decode(x, pos, k_cache, v_cache, attn_norm, w_qkv, w_o, mlp_norm, w_gate_up, w_down, masked=True):
    """One token per sequence; k_cache / v_cache are [B, H, C, D], written in place at pos. masked=False
    when every position is the cache's last (all keys valid): SDPA then needs no mask and may take its
    flash kernel."""
    b, c = x.shape[0], k_cache.shape[2]
    q, k, v = (rms_norm(x, attn_norm) @ w_qkv.t()).split([HIDDEN, KV_HEADS * HEAD_DIM, KV_HEADS * HEAD_DIM], dim=1)
    cos, sin = rope_table(pos)
    q = rope_half(q.reshape(b, HEADS, HEAD_DIM), cos, sin)
    k = rope_half(k.reshape(b, KV_HEADS, HEAD_DIM), cos, sin)
    seq, at = torch.arange(b, device=x.device), pos.long()
    k_cache[seq, :, at] = k
    v_cache[seq, :, at] = v.reshape(b, KV_HEADS, HEAD_DIM)
    valid = torch.arange(c, device=x.device)[None, :] <= at[:, None] if masked else None  # keys up to the position
    a = F.scaled_dot_product_attention(q[:, :, None, :], k_cache, v_cache,
                                       attn_mask=valid[:, None, None, :] if masked else None, enable_gqa=True)
    h1 = x + a.reshape(b, HIDDEN) @ w_o.t()
    return mlp(h1, mlp_norm, w_gate_up, w_down), k_cache, v_cache


def time_variants(variants, rounds=5, calls=7, warmup=2):
    """{name: median ms}: each round times every variant (median of `calls`), interleaved."""
    per = {name: [] for name in variants}
    for _ in range(rounds):
        for name, fn in variants.items():
            for _ in range(warmup):
                fn()
            samples = []
            for _ in range(calls):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                samples.append(start.elapsed_time(end))
            per[name].append(statistics.median(samples))
    return {name: statistics.median(v) for name, v in per.items()}


def relative_diff(got, want):
    got, want = got.float(), want.float()
    scale = want.abs().max().item()
    return (got - want).abs().max().item() / (scale if scale > 0 else 1.0)


def run_case(case, args, workdir):
    graph, binds = CASES[case]
    out_dir = os.path.join(workdir, case)
    cmd = [args.layerjit, "run", "--graph", graph, "--bind", binds, "--reference", "never", "--save", out_dir]
    print(f"== {case}: {' '.join(cmd)}", flush=True)
    done = subprocess.run(cmd, capture_output=True, text=True)
    # layerjit's own report of the run: times, and the memory the plans need (issue 8's memory goal).
    keep = ("time per call", "intermediate memory", "peak device memory")
    sys.stdout.write("".join("   " + line + "\n" for line in done.stdout.splitlines() if line.startswith(keep) or "time per call" in line))
    if done.returncode != 0:
        print(done.stdout + done.stderr)
        raise SystemExit(f"compare_torch: layerjit run failed for {case} (exit {done.returncode})")
    with open(os.path.join(out_dir, "layerjit.json")) as f:
        lj = json.load(f)
    inputs = {k: v.cuda() for k, v in read_safetensors(os.path.join(out_dir, "inputs.safetensors")).items()}
    want = read_safetensors(os.path.join(out_dir, "outputs.safetensors"))
    weights = [inputs[n] for n in ("attn_norm", "w_qkv", "w_o", "mlp_norm", "w_gate_up", "w_down")]

    if graph.endswith("prefill"):
        call_args = [inputs["x"], inputs["pos"]] + weights
        layer, names = prefill, ("out", "k", "v")
        to_ir = lambda i, t: t
    else:
        # PyTorch's cache layout [B, H, C, D]: converted once, outside the timed calls.
        k_cache = inputs["k_cache"].transpose(1, 2).contiguous()
        v_cache = inputs["v_cache"].transpose(1, 2).contiguous()
        call_args = [inputs["x"], inputs["pos"], k_cache, v_cache] + weights
        masked = not bool((inputs["pos"] == k_cache.shape[2] - 1).all())
        layer = lambda *a: decode(*a, masked=masked)
        names = ("out", "k_cache_new", "v_cache_new")
        to_ir = lambda i, t: t if i == 0 else t.transpose(1, 2)

    variants = {}
    for mode in args.modes:
        if mode == "eager":
            fn = layer
        elif mode == "compile":
            torch._dynamo.reset()
            fn = torch.compile(layer)
        elif mode == "reduce-overhead":
            torch._dynamo.reset()
            fn = torch.compile(layer, mode="reduce-overhead")
        else:
            raise SystemExit(f"compare_torch: unknown mode '{mode}' (eager, compile, reduce-overhead)")
        with torch.no_grad():
            got = fn(*call_args)  # compiles; its outputs are checked before it is timed
            torch.cuda.synchronize()
            diffs = [relative_diff(to_ir(i, g).cpu(), want[n]) for i, (g, n) in enumerate(zip(got, names))]
        ok = all(d <= TOLERANCE for d in diffs)
        print(f"   torch {mode}: outputs vs layerjit, relative max |diff| "
              + ", ".join(f"%{n} {d:.3g}" for n, d in zip(names, diffs)) + (" ok" if ok else " FAIL"), flush=True)
        if not ok:
            args.failed = True
        variants[mode] = (lambda f: (lambda: f(*call_args)))(fn)
    with torch.no_grad():
        times = time_variants(variants)
    row = {"case": case, "graph": graph, "bindings": binds, "device": lj["device"], "layerjit_ms": lj["ms_per_call"],
           "torch_ms": times}
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layerjit", required=True, help="path to the layerjit binary")
    p.add_argument("--case", default="prefill,decode1,decode32", help="comma-separated: " + ", ".join(CASES))
    p.add_argument("--modes", default="eager,compile,reduce-overhead")
    p.add_argument("--json", help="also write the table as JSON to this file")
    args = p.parse_args()
    args.modes = [m for m in args.modes.split(",") if m]
    args.failed = False
    if not torch.cuda.is_available():
        print("compare_torch: skipped: PyTorch sees no CUDA device")
        return 77
    cases = [c for c in args.case.split(",") if c]
    for c in cases:
        if c not in CASES:
            raise SystemExit(f"compare_torch: unknown case '{c}' ({', '.join(CASES)})")
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="lj-compare-") as workdir:
        for c in cases:
            rows.append(run_case(c, args, workdir))
    print()
    heads = [f"torch {m}" for m in args.modes]
    print("| case | layerjit fused | layerjit CUDA graph | " + " | ".join(heads) + " | best torch / layerjit graph |")
    print("|---" * (4 + len(heads)) + "|")
    for r in rows:
        t = r["torch_ms"]
        lj_graph = r["layerjit_ms"]["fused_cuda_graph"]
        best = min(t.values())
        print(f"| {r['case']} ({r['bindings']}) | {r['layerjit_ms']['fused']:.4f} ms | {lj_graph:.4f} ms | "
              + " | ".join(f"{t[m]:.4f} ms" for m in args.modes) + f" | {best / lj_graph:.2f}x |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    return 1 if args.failed else 0


if __name__ == "__main__":
    sys.exit(main())
