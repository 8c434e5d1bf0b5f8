"""PyTorch integration: a layerjit graph as a `torch.library.custom_op`.

    op = layerjit.torch.compile_layer(layerjit.llama3_8b()["llama3_8b_decode"], hint={"B": 1, "C": 4096})
    out = op(x, pos, k_cache, v_cache, attn_norm, w_qkv, ...)   # the graph's inputs, in order

The op takes the graph's inputs in order (weights included) and returns its outputs that have memory
of their own (a tensor, or a tuple of them); the inputs the graph writes in place (KV caches) are
declared mutated in the schema and updated where they are. It runs on the current CUDA stream with
no copy, composes with `torch.compile` (a fake implementation gives the output shapes from the
inputs' symbols) and can be captured in a CUDA graph once it has run outside one at the same sizes
(the first run lays out layerjit's intermediate memory).
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional

import torch

import layerjit

_DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i8": torch.int8, "i32": torch.int32,
           "f8e4m3": torch.float8_e4m3fn, "f8e5m2": torch.float8_e5m2}
_NAMES = {v: k for k, v in _DTYPES.items()}


def _describe(name: str, t: torch.Tensor):
    """(name, address, dtype, shape) of a dense CUDA tensor, checked as the DLPack path checks."""
    if t.device.type != "cuda":
        raise layerjit.UserError(f"tensor '{name}' is on {t.device}: layerjit runs on CUDA device memory (move it with .cuda())")
    if not t.is_contiguous():
        raise layerjit.UserError(f"tensor '{name}' is not contiguous: call .contiguous() first")
    if t.dtype not in _NAMES:
        raise layerjit.UserError(f"tensor '{name}': dtype {t.dtype} is not one layerjit takes")
    return (name, t.data_ptr(), _NAMES[t.dtype], list(t.shape))


class CompiledLayer:
    """The callable compile_layer returns: `op` is the registered operator, `executable` the layerjit
    Executable it runs, `returns` the names of the outputs it returns."""

    def __init__(self, op: Any, executable: layerjit.Executable, inputs: List[str], returns: List[str]):
        self.op, self.executable, self.inputs, self.returns = op, executable, inputs, returns

    def __call__(self, *args: torch.Tensor):
        return self.op(*args)

    def __repr__(self) -> str:
        return f"<layerjit.torch.CompiledLayer {self.op} ({', '.join(self.inputs)}) -> ({', '.join(self.returns)})>"


def _identifier(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def compile_layer(graph: layerjit.Graph, hint: Optional[Mapping[str, int]] = None, device: Optional[int] = None,
                  name: Optional[str] = None, fuse: bool = True, tuned: bool = True,
                  bundle: Optional[str] = None) -> CompiledLayer:
    """Builds `graph` on a CUDA device (default: torch's current one) and registers it as the custom
    op `layerjit::<name>` (default: the graph's name). `hint` is the sizes the kernels are chosen for."""
    if device is None:
        device = torch.cuda.current_device()
    exe = layerjit.Executable(graph, device=device, hint=hint, fuse=fuse, tuned=tuned, bundle=bundle)
    inputs = [i["name"] for i in graph.inputs]
    written = set(exe.written_inputs)
    own_outputs = [o for o in graph.outputs if not layerjit._layerjit._aliased_input(graph, o["name"]) and o["name"] not in inputs]
    returns = [o["name"] for o in own_outputs]
    if not returns:
        raise layerjit.UserError(f"@{graph.name} returns no tensor of its own: a custom op must return one")

    args = ", ".join(f"Tensor{'(a' + str(k) + '!)' if n in written else ''} {_identifier(n)}" for k, n in enumerate(inputs))
    rets = "Tensor" if len(returns) == 1 else "(" + ", ".join("Tensor" for _ in returns) + ")"
    schema = f"({args}) -> {rets}"
    opname = f"layerjit::{_identifier(name or graph.name)}"

    def sizes(tensors) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for info, t in zip(graph.inputs, tensors):
            for d, n in zip(info["shape"], t.shape):
                if isinstance(d, str) and d not in out:
                    out[d] = n
        return out

    def shape_of(o: Dict[str, Any], s: Dict[str, Any]) -> List[Any]:
        return [s[d] if isinstance(d, str) else d for d in o["shape"]]

    def impl(*tensors: torch.Tensor):
        outs = {o["name"]: torch.empty(shape_of(o, sizes(tensors)), dtype=_DTYPES[o["dtype"]], device=tensors[0].device)
                for o in own_outputs}
        described = [_describe(n, t) for n, t in zip(inputs, tensors)] + [_describe(n, t) for n, t in outs.items()]
        exe._exe.run_raw(described, torch.cuda.current_stream(tensors[0].device).cuda_stream)
        result = tuple(outs[n] for n in returns)
        return result[0] if len(result) == 1 else result

    def fake(*tensors: torch.Tensor):
        s = sizes(tensors)
        result = tuple(tensors[0].new_empty(shape_of(o, s), dtype=_DTYPES[o["dtype"]]) for o in own_outputs)
        return result[0] if len(result) == 1 else result

    mutated = tuple(_identifier(n) for n in inputs if n in written)  # what the schema's (a!) say, as torch checks
    op = torch.library.custom_op(opname, impl, mutates_args=mutated, device_types="cuda", schema=schema)
    op.register_fake(fake)
    return CompiledLayer(op, exe, inputs, returns)
