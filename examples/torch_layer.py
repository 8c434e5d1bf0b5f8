#!/usr/bin/env python3
"""The built-in Llama decoder layer run from PyTorch tensors, checked against the same layer in PyTorch.

    PYTHONPATH=build/python python3 examples/torch_layer.py [--small] [--batch B] [--ctx C] [--time]

One decode step (B sequences, one token each, over a KV cache of capacity C) through layerjit, four
ways, each checked against the PyTorch layer below on the same random tensors:
  1. `layerjit.Executable.run` on torch tensors and torch's current stream: the pointers layerjit
     binds are the tensors' own (no copy), the KV caches are written in place;
  2. the layer as a `torch.library.custom_op` (`layerjit.torch.compile_layer`), called eagerly;
  3. that op inside a `torch.compile`d function;
  4. that op captured in a CUDA graph by PyTorch (`torch.cuda.graph`) and replayed.
With --time: the time per call of the custom op replayed in PyTorch's CUDA graph and called eagerly,
against layerjit's own CUDA graph of the same executable in the same process (the anchor).
Exit 0 when every output agrees, 1 when one does not, 77 (skipped) without PyTorch or a GPU.
"""

import argparse
import statistics
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch_layer: skipped: PyTorch is not installed")
    sys.exit(77)
if not torch.cuda.is_available():
    print("torch_layer: skipped: no CUDA driver")
    sys.exit(77)

import layerjit
import layerjit.torch

TOLERANCE = 2.0 ** -5  # relative to the largest |value|, as bench/compare_torch.py


class Config:
    def __init__(self, small):
        if small:
            self.hidden, self.heads, self.kv_heads, self.head_dim, self.ffn = 64, 4, 2, 16, 160
        else:
            self.hidden, self.heads, self.kv_heads, self.head_dim, self.ffn = 4096, 32, 8, 128, 14336
        self.eps, self.theta = 1e-5, 500000.0


def rms_norm(c, x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + c.eps) * w.float()).to(x.dtype)


def rope_half(c, x, pos):
    """Pairs (i, i + D/2) of every head rotated by the token's angle (the IR's style = "half")."""
    half = c.head_dim // 2
    i = torch.arange(half, device=x.device, dtype=torch.float32)
    angle = pos.float()[:, None] * torch.pow(c.theta, -2.0 * i / c.head_dim)[None, :]
    cos, sin = angle.cos()[:, None, :], angle.sin()[:, None, :]
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1).to(x.dtype)


def decode_layer(c, x, pos, k_cache, v_cache, attn_norm, w_qkv, w_o, mlp_norm, w_gate_up, w_down):
    """The layer in PyTorch, in layerjit's cache layout [B, C, KV heads, D], caches written in place."""
    b, cap = x.shape[0], k_cache.shape[1]
    hd, kvd = c.heads * c.head_dim, c.kv_heads * c.head_dim
    q, k, v = (rms_norm(c, x, attn_norm) @ w_qkv.t()).split([hd, kvd, kvd], dim=1)
    q = rope_half(c, q.reshape(b, c.heads, c.head_dim), pos)
    k = rope_half(c, k.reshape(b, c.kv_heads, c.head_dim), pos)
    seq, at = torch.arange(b, device=x.device), pos.long()
    k_cache[seq, at] = k
    v_cache[seq, at] = v.reshape(b, c.kv_heads, c.head_dim)
    valid = torch.arange(cap, device=x.device)[None, :] <= at[:, None]
    a = F.scaled_dot_product_attention(q[:, :, None, :], k_cache.transpose(1, 2), v_cache.transpose(1, 2),
                                       attn_mask=valid[:, None, None, :], enable_gqa=True)
    h1 = x + a.reshape(b, hd) @ w_o.t()
    gate, up = (rms_norm(c, h1, mlp_norm) @ w_gate_up.t()).split([c.ffn, c.ffn], dim=1)
    return h1 + (F.silu(gate) * up) @ w_down.t()


def random_inputs(c, graph, b, cap, seed):
    """Every input of the decode graph on the GPU: weights ~ U(-1/sqrt(K), 1/sqrt(K)), norms in
    [0.5, 1.5), x and the old cache entries in [-1, 1), positions anywhere in the cache."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    out = {}
    for info in graph.inputs:
        name = info["name"]
        shape = [{"B": b, "C": cap}.get(d, d) for d in info["shape"]]
        if name == "pos":
            out[name] = torch.randint(0, cap, (b,), generator=g, device="cuda", dtype=torch.int32)
            continue
        t = torch.rand(shape, generator=g, device="cuda", dtype=torch.float32)
        if info["param"] and len(shape) == 2:
            bound = shape[1] ** -0.5
            t = (t * 2 - 1) * bound
        elif info["param"]:
            t = t + 0.5
        else:
            t = t * 2 - 1
        out[name] = t.to(torch.bfloat16)
    return out


def relative_diff(got, want):
    got, want = got.float(), want.float()
    scale = want.abs().max().item()
    return (got - want).abs().max().item() / (scale if scale > 0 else 1.0)


def check(label, got, want):
    diffs = {n: relative_diff(got[n], want[n]) for n in want}
    ok = all(d <= TOLERANCE for d in diffs.values())
    print(f"  {label}: " + ", ".join(f"%{n} {d:.3g}" for n, d in diffs.items()) + (" ok" if ok else " FAIL"), flush=True)
    return ok


def median_ms(fn, rounds=5, calls=20, warmup=3):
    per = []
    for _ in range(rounds):
        for _ in range(warmup):
            fn()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            fn()
        end.record()
        end.synchronize()
        per.append(start.elapsed_time(end) / calls)
    return statistics.median(per)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help="the small layer (hidden 64) instead of Llama-3-8B's")
    ap.add_argument("--batch", type=int, default=None, help="sequences (default 3 small, 1 otherwise)")
    ap.add_argument("--ctx", type=int, default=None, help="KV cache capacity (default 37 small, 4096 otherwise)")
    ap.add_argument("--time", action="store_true", help="time the op in a CUDA graph and eagerly against layerjit's own graph")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    c = Config(args.small)
    b = args.batch or (3 if args.small else 1)
    cap = args.ctx or (37 if args.small else 4096)
    graph = layerjit.llama3_8b(small=args.small)[1]
    names = [i["name"] for i in graph.inputs]
    print(f"torch_layer: @{graph.name} B={b} C={cap} on {torch.cuda.get_device_name()}, torch {torch.__version__}, "
          f"layerjit {layerjit.__version__}", flush=True)

    base = random_inputs(c, graph, b, cap, args.seed)
    fresh = lambda: {n: t.clone() for n, t in base.items()}  # the caches are written: each way starts from base
    want_in = fresh()
    with torch.no_grad():
        want = {"out": decode_layer(c, *[want_in[n] for n in names])}
    want.update(k_cache=want_in["k_cache"], v_cache=want_in["v_cache"])
    torch.cuda.synchronize()
    ok = True

    # 1. Executable.run on torch tensors and the current stream.
    exe = layerjit.Executable(graph, hint={"B": b, "C": cap})
    inp = fresh()
    for n, t in inp.items():
        ptr = layerjit._layerjit._tensor_ref(n, t)[0]
        if ptr != t.data_ptr():
            print(f"  FAIL: layerjit binds %{n} at {ptr:#x}, the tensor is at {t.data_ptr():#x}")
            ok = False
    k_ptr = inp["k_cache"].data_ptr()
    outs = exe.run(inp)
    torch.cuda.synchronize()
    if inp["k_cache"].data_ptr() != k_ptr:
        print("  FAIL: the KV cache moved")
        ok = False
    ok &= check(f"Executable.run ({exe.launches_per_run} kernels, no copies)",
                {"out": outs["out"], "k_cache": inp["k_cache"], "v_cache": inp["v_cache"]}, want)

    # 2. The custom op, eagerly.
    layer = layerjit.torch.compile_layer(graph, hint={"B": b, "C": cap}, name=f"{graph.name}_B{b}_C{cap}")
    inp = fresh()
    got = layer(*[inp[n] for n in names])
    torch.cuda.synchronize()
    ok &= check(f"custom op {layer.op._qualname if hasattr(layer.op, '_qualname') else ''}".rstrip(),
                {"out": got, "k_cache": inp["k_cache"], "v_cache": inp["v_cache"]}, want)

    # 3. Inside torch.compile.
    torch._dynamo.reset()
    compiled = torch.compile(lambda *a: layer(*a) * 1.0)
    inp = fresh()
    got = compiled(*[inp[n] for n in names])
    torch.cuda.synchronize()
    ok &= check("inside torch.compile", {"out": got, "k_cache": inp["k_cache"], "v_cache": inp["v_cache"]}, want)

    # 4. Captured by PyTorch in a CUDA graph (after one run outside it at these sizes).
    inp = fresh()
    args_list = [inp[n] for n in names]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        layer(*args_list)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    for n in ("k_cache", "v_cache"):
        inp[n].copy_(base[n])
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        graph_out = layer(*args_list)
    g.replay()
    torch.cuda.synchronize()
    ok &= check("in a PyTorch CUDA graph", {"out": graph_out, "k_cache": inp["k_cache"], "v_cache": inp["v_cache"]}, want)

    if args.time:
        # layerjit's own CUDA graph of the executable of step 1 (the anchor), over its bound tensors.
        exe_in = fresh()
        exe.run(exe_in)
        stream = torch.cuda.current_stream()
        own = exe.capture({"B": b, "C": cap}, stream=stream)
        t_own = median_ms(lambda: own.replay(stream.cuda_stream))
        t_graph = median_ms(g.replay)
        t_eager = median_ms(lambda: layer(*args_list))
        print(f"  time per call: layerjit's own CUDA graph {t_own:.4f} ms ({own.launches} kernels); the custom op in "
              f"PyTorch's CUDA graph {t_graph:.4f} ms ({t_graph / t_own:.3f}x); called eagerly from Python {t_eager:.4f} ms "
              f"({t_eager / t_own:.3f}x)", flush=True)
    print("torch_layer: " + ("ok" if ok else "FAILED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
