"""layerjit: a JIT kernel compiler for transformer layers on NVIDIA GPUs.

Graphs come from text IR (`parse`, `load`) or the built-in Llama-3-8B layer (`llama3_8b`). Without a
GPU you can plan them (`Graph.plan`) and compile them for any target (`compile`: CUDA C++, PTX and
cubins). On a GPU, `Executable` runs a graph on tensors you own (torch, CuPy, JAX: anything with
`__dlpack__` or `__cuda_array_interface__`), without copies, on your stream or your framework's
current one. `layerjit.torch.compile_layer` makes a graph a PyTorch custom op.

Errors: `UserError` when the input is at fault (its message reads "file:line:col: error: ..." with
the line and a caret where there is a location; `.file`, `.line`, `.col` carry it), `DeviceError`
when the machine is (no driver, out of memory, a kernel that did not compile). Both derive from
`layerjit.Error`.
"""

from __future__ import annotations

import os as _os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Union

from . import _layerjit

__version__: str = _layerjit.__version__

Graph = _layerjit.Graph
Device = _layerjit.Device
CapturedRun = _layerjit.CapturedRun
cuda_available = _layerjit.cuda_available


class Error(Exception):
    """Anything layerjit refuses or fails at."""


class UserError(Error, ValueError):
    """The input is at fault: a malformed graph, a tensor of the wrong shape or place."""

    def __init__(self, message: str, file: str = "", line: int = 0, col: int = 0):
        super().__init__(message)
        self.file, self.line, self.col = file, line, col

    @property
    def location(self) -> str:
        """'file:line:col', or '' where the error has no place in a text file."""
        return f"{self.file}:{self.line}:{self.col}" if self.line > 0 else ""


class DeviceError(Error, RuntimeError):
    """The machine failed: no CUDA driver, no device, out of memory, a compile failure."""


_layerjit._set_error_classes(UserError, DeviceError)


class Module:
    """The graphs of one text IR file (or the built-in layer), by name and in order."""

    def __init__(self, graphs: List[Graph]):
        self.graphs = list(graphs)

    def __getitem__(self, key: Union[int, str]) -> Graph:
        if isinstance(key, int):
            return self.graphs[key]
        for g in self.graphs:
            if g.name == key:
                return g
        raise KeyError(f"no graph @{key} (the module has: {', '.join('@' + g.name for g in self.graphs)})")

    def __iter__(self):
        return iter(self.graphs)

    def __len__(self) -> int:
        return len(self.graphs)

    def __repr__(self) -> str:
        return f"<layerjit.Module: {', '.join('@' + g.name for g in self.graphs)}>"


def parse(text: str, filename: str = "<input>") -> Module:
    """Parses text IR (docs/ir.md). A malformed file raises UserError with its location."""
    return Module(_layerjit._parse(text, filename))


def load(path: Union[str, "_os.PathLike[str]"]) -> Module:
    """Reads and parses a .lj file."""
    path = _os.fspath(path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise UserError(f"cannot read {path}: {e.strerror}", path) from None
    return parse(text, path)


def llama3_8b(small: bool = False) -> Module:
    """The built-in Llama-3-8B decoder layer: @llama3_8b_prefill (T tokens of one sequence) and
    @llama3_8b_decode (one token for each of B sequences over a KV cache of capacity C). small=True:
    hidden 64, 4 query / 2 KV heads of 16, FFN 160 (for checks against a CPU reference)."""
    return Module([_layerjit._llama("prefill", small), _layerjit._llama("decode", small)])


def _graphs(g: Union[Graph, Module]) -> List[Graph]:
    if isinstance(g, Module):
        return g.graphs
    if isinstance(g, Graph):
        return [g]
    raise TypeError(f"expected a layerjit.Graph or Module, got {type(g).__name__}")


def _bind(bind: Optional[Mapping[str, int]]) -> Optional[Dict[str, int]]:
    return None if bind is None else {str(k): int(v) for k, v in bind.items()}


class Plan:
    """A graph's fusion groups (each one kernel): `groups` is a list of dicts with id, kind, nodes,
    inputs, outputs, reasons, prepare, flops and bytes (0 where a symbol they need is unbound);
    str() is what `layerjit plan` prints."""

    def __init__(self, d: Dict[str, Any]):
        self.graph: str = d["graph"]
        self.groups: List[Dict[str, Any]] = d["groups"]
        self.notes: List[str] = d["notes"]
        self.report: str = d["report"]

    def __str__(self) -> str:
        return self.report

    def __repr__(self) -> str:
        return f"<layerjit.Plan @{self.graph}: {len(self.groups)} groups>"


def plan(graph: Graph, bind: Optional[Mapping[str, int]] = None, fuse: bool = True) -> Plan:
    """The fusion plan of `graph` at the symbol values `bind` (which pick GEMV or GEMM, and count bytes)."""
    return Plan(_layerjit._plan(graph, _bind(bind), fuse))


Graph.plan = lambda self, bind=None, fuse=True: plan(self, bind, fuse)  # type: ignore[attr-defined]
Graph.__repr__ = lambda self: f"<layerjit.Graph @{self.name}>"  # type: ignore[assignment]
Graph.__str__ = lambda self: self.text  # type: ignore[assignment]


class Kernel:
    """One compiled kernel: group, name, config, config_source, source (CUDA C++), ptx, cubin
    (bytes), cache_hit."""

    def __init__(self, d: Dict[str, Any]):
        self.__dict__.update(d)

    def __repr__(self) -> str:
        cfg = f" [{self.config}]" if self.config else ""
        return f"<layerjit.Kernel {self.name}{cfg}: {len(self.cubin)} bytes of cubin{' (cached)' if self.cache_hit else ''}>"


class Compiled:
    """The kernels of one or more graphs compiled for one target."""

    def __init__(self, arch: str, kernels: List[Kernel], seconds: float, cache_hits: int):
        self.arch, self.kernels, self.seconds, self.cache_hits = arch, kernels, seconds, cache_hits

    def __iter__(self):
        return iter(self.kernels)

    def __len__(self) -> int:
        return len(self.kernels)

    def __repr__(self) -> str:
        return (f"<layerjit.Compiled for {self.arch}: {len(self.kernels)} kernels, "
                f"{self.cache_hits} from the cache, {self.seconds:.2f} s>")


def compile(graph: Union[Graph, Module], arch: str = "sm_90a", bind: Optional[Mapping[str, int]] = None,
            fuse: bool = True, ptx: bool = True, cache: bool = True) -> Compiled:
    """Compiles every kernel of `graph` (every graph of a Module) for `arch`, no GPU needed; through
    the kernel cache (LAYERJIT_CACHE_DIR) unless cache=False."""
    kernels: List[Kernel] = []
    seconds, hits, target = 0.0, 0, arch
    for g in _graphs(graph):
        d = _layerjit._compile(g, arch, _bind(bind), fuse, ptx, cache)
        kernels += [Kernel(k) for k in d["kernels"]]
        seconds += d["seconds"]
        hits += d["cache_hits"]
        target = d["arch"]
    return Compiled(target, kernels, seconds, hits)


def sizes_of(graph: Graph, tensors: Mapping[str, Any]) -> Dict[str, int]:
    """The symbol values the tensors' shapes give (checking names, dtypes, ranks and constant
    dimensions against the graph), as Executable.run does first. Tensors must be on a CUDA device."""
    return _layerjit._sizes_of(graph, dict(tensors))


def _stream_handle(stream: Any, tensors: Iterable[Any]) -> int:
    """A raw cudaStream_t: the given one (an int, a torch/CuPy stream), else torch's current stream
    when a tensor is torch's, else the legacy default stream (0)."""
    if stream is None:
        for t in tensors:
            if type(t).__module__.startswith("torch"):
                import torch  # only when the caller already uses it

                return int(torch.cuda.current_stream(t.device).cuda_stream)
        return 0
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    raise TypeError(f"stream: expected an int handle or a stream with .cuda_stream or .ptr, got {type(stream).__name__}")


def _empty_like_framework(template: Any, dtype: str, shape: List[int]) -> Any:
    if type(template).__module__.startswith("torch"):
        import torch

        dt = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "i8": torch.int8, "i32": torch.int32}
        return torch.empty(shape, dtype=dt[dtype], device=template.device)
    if type(template).__module__.startswith("cupy"):
        import cupy

        dt = {"f32": "float32", "f16": "float16", "i8": "int8", "i32": "int32"}
        if dtype in dt:
            return cupy.empty(shape, dtype=dt[dtype])
    raise UserError(f"cannot allocate a {dtype} output for {type(template).__name__} tensors: pass it in outputs=")


class Executable:
    """A graph planned, compiled (cached) and loaded on a device, run on tensors you own.

    run(inputs, outputs=None, stream=None): `inputs` maps each graph input's name (weights included,
    unless bound by load_weights or bind) to a tensor; symbol values come from their shapes. Outputs
    you pass are written in place; the others are allocated like the inputs (torch, CuPy) and
    returned, all in a dict by name. Inputs the graph updates in place (KV caches) are written where
    they are. The run goes on `stream`, else the framework's current stream: no copy, no sync.
    """

    def __init__(self, graph: Graph, device: Union[int, Device] = 0, hint: Optional[Mapping[str, int]] = None,
                 fuse: bool = True, tuned: bool = True, bundle: Optional[str] = None):
        self.device = device if isinstance(device, Device) else Device(device)
        self._exe = _layerjit._Executable(self.device, graph, _bind(hint), fuse, tuned, bundle or "")
        self.graph = graph
        self._keep: Dict[str, Any] = {}  # every tensor bound (bind, run): alive while its address is
        # Outputs that are an input's memory (a KV cache updated in place) are not returned separately.
        self._aliases = {o["name"] for o in graph.outputs if _layerjit._aliased_input(graph, o["name"])}

    @property
    def kernels(self) -> List[Dict[str, Any]]:
        return self._exe.kernels

    @property
    def launches_per_run(self) -> int:
        return self._exe.launches_per_run

    @property
    def written_inputs(self) -> List[str]:
        return self._exe.written_inputs

    def bind(self, name: str, tensor: Any) -> None:
        """Binds an input (a weight) once for every later run; the tensor is kept alive."""
        self._exe.bind(name, tensor)
        self._keep[name] = tensor

    def load_weights(self, path: str) -> List[str]:
        """Uploads every param from a safetensors file; returns the file's tensors the graph does not use."""
        return self._exe.load_weights(_os.fspath(path))

    def run(self, inputs: Mapping[str, Any], outputs: Optional[Mapping[str, Any]] = None, stream: Any = None) -> Dict[str, Any]:
        inputs = dict(inputs)
        outs = dict(outputs or {})
        handle = _stream_handle(stream, inputs.values())
        sizes = _layerjit._sizes_of(self.graph, {**inputs, **outs}) if inputs else {}
        template = next(iter(inputs.values()), None)
        for o in self.graph.outputs:
            name = o["name"]
            if name in outs or name in self._aliases or any(i["name"] == name for i in self.graph.inputs):
                continue
            shape = [sizes[d] if isinstance(d, str) else d for d in o["shape"]]
            outs[name] = _empty_like_framework(template, o["dtype"], shape)
        self._exe.run({**inputs, **outs}, handle)
        # The executable keeps these addresses bound (a capture replays them): keep the tensors too.
        self._keep.update(inputs)
        self._keep.update(outs)
        return outs

    def capture(self, bind: Mapping[str, int], stream: Any = None) -> CapturedRun:
        """One run at symbol values `bind` over the bound tensors, recorded as a CUDA graph."""
        return self._exe.capture(_bind(bind), _stream_handle(stream, self._keep.values()))

    def download(self, name: str, bind: Mapping[str, int], stream: Any = None):
        """An output's (or input's) values after a run, as a float64 numpy array; synchronizes."""
        return self._exe.download(name, _bind(bind), _stream_handle(stream, self._keep.values()))

    def __repr__(self) -> str:
        return f"<layerjit.Executable @{self.graph.name}: {self.launches_per_run} kernels on {self.device!r}>"


class Generation:
    """What generate() returned: `tokens` (the new token ids), `logits` (with keep_logits, a float64
    numpy array [new_tokens, vocab], row 0 after the prompt; else None) and `step_ms` (wall time of
    each step: [0] the prefill, then one per decode step)."""

    def __init__(self, d: Dict[str, Any]):
        self.tokens: List[int] = d["tokens"]
        self.logits = d["logits"]
        self.step_ms: List[float] = d["step_ms"]

    def __repr__(self) -> str:
        return f"<layerjit.Generation {len(self.tokens)} tokens: {self.tokens}>"


class Model:
    """A Hugging Face model directory (config.json, model.safetensors or shards with
    model.safetensors.index.json) for LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM or
    Qwen3ForCausalLM; docs/models.md lists the config fields honoured and refused (a refused one is a
    UserError naming it). Token ids in, token ids out: the tokenizer is yours.

    `info` is what the config made of it (a dict: architecture, layers, hidden, heads, kv_heads,
    head_dim, vocab, ...); `graphs` its embedding, prefill, decode and head graphs, to plan or compile
    like any graph. generate_cpu runs the CPU reference (small models, no GPU); runner(device) puts
    it on a GPU.
    """

    def __init__(self, path: Union[str, "_os.PathLike[str]"]):
        self._model = _layerjit._Model(_os.fspath(path))
        self.info: Dict[str, Any] = self._model.info
        self.graphs = Module(self._model.graphs())

    def unused_tensors(self) -> List[str]:
        return self._model.unused_tensors()

    def generate_cpu(self, prompt: Iterable[int], new_tokens: int = 8, keep_logits: bool = False,
                     tensor_parallel: int = 1) -> Generation:
        """Greedy generation through the CPU reference; tensor_parallel > 1 runs every layer sharded
        over that many ranks (the all-reduces on the host), as a tensor-parallel runner computes it."""
        return Generation(self._model.generate_cpu([int(t) for t in prompt], int(new_tokens), keep_logits, int(tensor_parallel)))

    def runner(self, device: Union[int, Device] = 0, capacity: int = 0, cuda_graphs: bool = True, fuse: bool = True,
               tuned: bool = True, tensor_parallel: int = 1) -> "ModelRunner":
        return ModelRunner(self, device, capacity, cuda_graphs, fuse, tuned, tensor_parallel)

    def __repr__(self) -> str:
        i = self.info
        return f"<layerjit.Model {i['name']}: {i['architecture']}, {i['layers']} layers, hidden {i['hidden']}, vocab {i['vocab']}>"


class ModelRunner:
    """A Model on a device: kernels compiled (cached), weights uploaded, KV caches of `capacity`
    positions per layer (0: max_position_embeddings, at most 4096). Each decode step after the first
    is a CUDA-graph replay unless cuda_graphs=False. tensor_parallel=N shards every layer over the
    device and the N - 1 after it, NCCL between them (docs/tp.md)."""

    def __init__(self, model: Model, device: Union[int, Device] = 0, capacity: int = 0, cuda_graphs: bool = True,
                 fuse: bool = True, tuned: bool = True, tensor_parallel: int = 1):
        self.model = model
        self.device = device if isinstance(device, Device) else Device(device)
        self._runner = _layerjit._ModelRunner(self.device, model._model, int(capacity), cuda_graphs, fuse, tuned,
                                              int(tensor_parallel))

    @property
    def capacity(self) -> int:
        return self._runner.capacity

    @property
    def launches_per_decode_step(self) -> int:
        return self._runner.launches_per_decode_step

    @property
    def compile_seconds(self) -> float:
        return self._runner.compile_seconds

    def generate(self, prompt: Iterable[int], new_tokens: int = 8, keep_logits: bool = False) -> Generation:
        """Prefill of the prompt, then new_tokens - 1 decode steps, greedy (the same checks as generate_cpu)."""
        return Generation(self._runner.generate([int(t) for t in prompt], int(new_tokens), keep_logits))

    def __repr__(self) -> str:
        return f"<layerjit.ModelRunner {self.model.info['name']} on {self.device!r}: capacity {self.capacity}>"


__all__ = [
    "__version__", "Error", "UserError", "DeviceError", "Graph", "Module", "Plan", "Kernel", "Compiled", "Device",
    "Executable", "CapturedRun", "Model", "ModelRunner", "Generation", "parse", "load", "llama3_8b", "plan", "compile",
    "sizes_of", "cuda_available",
]
