"""The Python module without a GPU: parse, plan, compile, inspect, errors, tensor checks.

Run by ctest (tests/python/CMakeLists.txt) as `python3 -m unittest` with PYTHONPATH at the build's
python/ folder; the kernel cache is a fresh folder of its own.
"""

import ctypes
import os
import subprocess
import tempfile
import unittest

import layerjit

_cache = tempfile.TemporaryDirectory(prefix="layerjit-pytest-")


def setUpModule():
    os.environ["LAYERJIT_CACHE_DIR"] = _cache.name


def tearDownModule():
    _cache.cleanup()


MLP = """graph @mlp(%x: bf16[T, 64], %w_gate_up: param bf16[320, 64], %w_down: param bf16[64, 160])
    -> bf16[T, 64] {
  %gu = matmul(%x, %w_gate_up)
  %gate, %up = split(%gu) {axis = 1, sizes = [160, 160]}
  %g = silu(%gate)
  %act = mul(%g, %up)
  %y = matmul(%act, %w_down)
  return %y
}
"""


class FakeCuda:
    """An array on a CUDA device as CuPy describes one (__cuda_array_interface__, version 3): the
    pointer is never dereferenced by the checks under test."""

    def __init__(self, shape, typestr="<f2", ptr=0x7F0000000000, strides=None, readonly=False):
        self.__cuda_array_interface__ = {"shape": tuple(shape), "typestr": typestr, "data": (ptr, readonly),
                                         "strides": strides, "version": 3}


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

_DL_CODES = {"bf16": (4, 16), "f16": (2, 16), "f32": (2, 32), "i32": (0, 32), "i8": (0, 8), "u8": (1, 8)}


class FakeDlpack:
    """A tensor on CUDA device 0 as DLPack describes one (a real 'dltensor' capsule over a fake
    pointer, which the checks under test never dereference)."""

    def __init__(self, shape, dtype="bf16", ptr=0x7F0000000000, strides=None, offset=0, device_type=2):
        code, bits = _DL_CODES[dtype]
        self._shape = (ctypes.c_int64 * len(shape))(*shape)
        self._strides = (ctypes.c_int64 * len(shape))(*strides) if strides else None
        self._m = _DLManagedTensor(_DLTensor(ptr, device_type, 0, len(shape), code, bits, 1, self._shape,
                                             self._strides, offset), None, None)
        self.device_type = device_type
        self.streams = []

    def __dlpack_device__(self):
        return (self.device_type, 0)

    def __dlpack__(self, stream=None):
        self.streams.append(stream)
        return _PyCapsule_New(ctypes.addressof(self._m), b"dltensor", None)


class FakeDlpackCpu:
    def __dlpack_device__(self):
        return (1, 0)

    def __dlpack__(self, stream=None):
        raise AssertionError("a host tensor must be refused before its capsule is asked for")


class TestGraphs(unittest.TestCase):
    def test_version_is_the_projects(self):
        self.assertEqual(layerjit.__version__, os.environ.get("LAYERJIT_EXPECT_VERSION", layerjit.__version__))
        self.assertRegex(layerjit.__version__, r"^\d+\.\d+\.\d+$")

    def test_parse_gives_graphs_with_inputs_outputs_symbols(self):
        m = layerjit.parse(MLP, "mlp.lj")
        self.assertEqual(len(m), 1)
        g = m["mlp"]
        self.assertEqual([i["name"] for i in g.inputs], ["x", "w_gate_up", "w_down"])
        self.assertEqual(g.inputs[0]["shape"], ["T", 64])
        self.assertEqual(g.inputs[1]["param"], True)
        self.assertEqual(g.outputs[0]["dtype"], "bf16")
        self.assertEqual(g.symbols, ["T"])
        self.assertEqual(g.param_bytes(), (320 * 64 + 64 * 160) * 2)
        # The printed text parses back to the same text.
        self.assertEqual(layerjit.parse(g.text)[0].text, g.text)
        with self.assertRaises(KeyError):
            m["nope"]

    def test_parse_error_carries_location_line_and_caret(self):
        bad = MLP.replace("silu(%gate)", "silu(%gaet)")
        with self.assertRaises(layerjit.UserError) as cm:
            layerjit.parse(bad, "bad.lj")
        e = cm.exception
        self.assertEqual((e.file, e.line), ("bad.lj", 5))
        self.assertGreater(e.col, 0)
        self.assertEqual(e.location, f"bad.lj:5:{e.col}")
        text = str(e)
        self.assertTrue(text.startswith(f"bad.lj:5:{e.col}: error: "), text)
        self.assertIn("%gaet", text)
        self.assertIn("  %g = silu(%gaet)\n", text)
        self.assertIn("^", text.splitlines()[-1])
        self.assertIsInstance(e, layerjit.Error)
        self.assertIsInstance(e, ValueError)

    def test_load_reads_files_and_names_a_missing_one(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "mlp.lj")
            with open(path, "w") as f:
                f.write(MLP)
            self.assertEqual(layerjit.load(path)[0].name, "mlp")
            with self.assertRaises(layerjit.UserError) as cm:
                layerjit.load(os.path.join(d, "missing.lj"))
            self.assertIn("missing.lj", str(cm.exception))

    def test_builtin_layer(self):
        m = layerjit.llama3_8b()
        self.assertEqual([g.name for g in m], ["llama3_8b_prefill", "llama3_8b_decode"])
        self.assertEqual(m["llama3_8b_decode"].symbols, ["B", "C"])
        self.assertEqual(m[0].param_bytes(), 436207616 + 8192 * 2)  # 8B layer: 218 M bf16 weights + 2 norms
        small = layerjit.llama3_8b(small=True)
        self.assertEqual(small[1].inputs[0]["shape"], ["B", 64])


class TestPlan(unittest.TestCase):
    def test_fused_plan_against_unfused(self):
        g = layerjit.llama3_8b()["llama3_8b_prefill"]
        fused = g.plan(bind={"T": 128})
        unfused = layerjit.plan(g, bind={"T": 128}, fuse=False)
        self.assertLess(len(fused.groups), len(unfused.groups))
        kinds = {grp["kind"] for grp in fused.groups}
        self.assertTrue({"matmul", "attention"} <= kinds, kinds)
        run_groups = [grp for grp in fused.groups if not grp["prepare"]]
        self.assertTrue(all(grp["bytes"] > 0 for grp in run_groups))
        self.assertTrue(all(grp["nodes"] and grp["outputs"] for grp in run_groups))
        matmul = next(grp for grp in fused.groups if grp["kind"] == "matmul")
        self.assertGreater(matmul["flops"], 2 * 128 * 4096 * 1024)
        # Per run (the prepared weights are made once): the fused plan moves fewer bytes.
        self.assertLess(sum(grp["bytes"] for grp in run_groups), sum(grp["bytes"] for grp in unfused.groups))
        self.assertIn("group", str(fused))
        self.assertTrue(fused.notes)  # the norm folding is noted

    def test_unbound_sizes_count_nothing(self):
        p = layerjit.parse(MLP)[0].plan()
        self.assertTrue(all(grp["bytes"] == 0 for grp in p.groups))


class TestCompile(unittest.TestCase):
    def test_compile_gives_source_ptx_cubin_then_cache_hits(self):
        g = layerjit.parse(MLP, "mlp.lj")[0]
        first = layerjit.compile(g, arch="sm_80", bind={"T": 7}, cache=True)
        self.assertEqual(first.arch, "sm_80")
        self.assertGreaterEqual(len(first), 2)
        for k in first:
            self.assertIn(k.name, k.source)
            self.assertIn(f".entry {k.name}", k.ptx)
            self.assertEqual(k.cubin[:4], b"\x7fELF")
        again = layerjit.compile(g, arch="sm_80", bind={"T": 7})
        self.assertEqual(again.cache_hits, len(again))
        self.assertEqual([k.source for k in again], [k.source for k in first])
        self.assertEqual([k.cubin for k in again], [k.cubin for k in first])

    def test_compile_for_hopper_uses_wgmma(self):
        g = layerjit.parse(MLP)[0]
        c = layerjit.compile(g, arch="sm_90a", bind={"T": 4096}, cache=False)
        self.assertEqual(c.cache_hits, 0)
        self.assertTrue(any("wgmma" in k.ptx for k in c), [k.config for k in c])
        self.assertTrue(all(k.config_source for k in c if k.config))

    def test_bad_arch_is_a_user_error(self):
        with self.assertRaises(layerjit.UserError) as cm:
            layerjit.compile(layerjit.parse(MLP)[0], arch="sm_7")
        self.assertIn("sm_7", str(cm.exception))

    def test_compile_takes_graphs_only(self):
        with self.assertRaises(TypeError):
            layerjit.compile("graph @f")


class TestTensors(unittest.TestCase):
    def setUp(self):
        self.decode = layerjit.llama3_8b(small=True)["llama_small_decode"]

    def args(self, b=3, c=40):
        # bf16 has no __cuda_array_interface__ typestr: bf16 tensors come through DLPack (torch, JAX).
        return {"x": FakeDlpack((b, 64)), "pos": FakeCuda((b,), "<i4"), "k_cache": FakeDlpack((b, c, 2, 16)),
                "v_cache": FakeDlpack((b, c, 2, 16))}

    def test_sizes_from_shapes(self):
        self.assertEqual(layerjit.sizes_of(self.decode, self.args(3, 40)), {"B": 3, "C": 40})

    def test_disagreeing_symbol(self):
        a = self.args()
        a["pos"] = FakeCuda((4,), "<i4")
        with self.assertRaisesRegex(layerjit.UserError, r"'pos'.*B=4.*B=3"):
            layerjit.sizes_of(self.decode, a)

    def test_wrong_constant_dimension_dtype_rank_name(self):
        for name, t, pattern in [("x", FakeDlpack((3, 65)), r"dimension 1 is 65"),
                                 ("x", FakeCuda((3, 64), "<f4"), r"dtype f32"),
                                 ("x", FakeDlpack((3, 64), "f16"), r"dtype f16"),
                                 ("x", FakeDlpack((3, 64, 1)), r"3 dimensions"),
                                 ("x", FakeDlpack((3, 64), "u8"), r"DLPack dtype \(code 1, 8 bits"),
                                 ("pos", FakeCuda((3,), "<u4"), r"typestr '<u4'"),
                                 ("y", FakeDlpack((3, 64)), r"no input or output named 'y'")]:
            a = self.args()
            a[name] = t
            with self.subTest(name=name, pattern=pattern), self.assertRaisesRegex(layerjit.UserError, pattern):
                layerjit.sizes_of(self.decode, a)

    def test_missing_symbol_names_the_inputs_that_give_it(self):
        with self.assertRaisesRegex(layerjit.UserError, r"symbol C .*%k_cache"):
            layerjit.sizes_of(self.decode, {"x": FakeDlpack((3, 64)), "pos": FakeCuda((3,), "<i4")})

    def test_host_memory_is_refused(self):
        with self.assertRaisesRegex(layerjit.UserError, r"'x' is in host \(CPU\) memory"):
            layerjit.sizes_of(self.decode, {**self.args(), "x": FakeDlpackCpu()})
        try:
            import numpy
        except ImportError:
            self.skipTest("numpy is not installed")
        with self.assertRaisesRegex(layerjit.UserError, r"'x' is in host \(CPU\) memory"):
            layerjit.sizes_of(self.decode, {**self.args(), "x": numpy.zeros((3, 64), dtype=numpy.float16)})

    def test_not_a_tensor_non_contiguous_read_only(self):
        for t, pattern in [([1, 2], r"neither __dlpack__ nor __cuda_array_interface__"),
                           (FakeDlpack((3, 64), strides=(1, 3)), r"not contiguous"),
                           (FakeDlpack((3, 64), device_type=13), r"CUDA managed memory"),
                           (FakeCuda((3, 64), "<f2", strides=(2, 6)), r"not contiguous"),
                           (FakeCuda((3, 64), "<f2", readonly=True), r"read-only")]:
            with self.subTest(pattern=pattern), self.assertRaisesRegex(layerjit.UserError, pattern):
                layerjit.sizes_of(self.decode, {**self.args(), "x": t})

    def test_tensor_pointer_is_the_arrays(self):
        ptr, dtype, shape = layerjit._layerjit._tensor_ref("x", FakeCuda((3, 64), ptr=0x7F0012345600))
        self.assertEqual((ptr, dtype, shape), (0x7F0012345600, "f16", [3, 64]))
        t = FakeDlpack((3, 64), ptr=0x7F0012345600, offset=256, strides=(64, 1))
        self.assertEqual(layerjit._layerjit._tensor_ref("x", t), (0x7F0012345700, "bf16", [3, 64]))
        self.assertEqual(t.streams, [1])  # DLPack's legacy default stream, not 0

    def test_outputs_that_are_an_inputs_memory(self):
        self.assertEqual(layerjit._layerjit._aliased_input(self.decode, "k_cache_new"), "k_cache")
        self.assertEqual(layerjit._layerjit._aliased_input(self.decode, "out"), "")


class TestDevice(unittest.TestCase):
    def test_no_driver_is_a_device_error(self):
        if layerjit.cuda_available():
            d = layerjit.Device(0)
            self.assertGreater(d.sm_count, 0)
            self.assertGreaterEqual(d.compute_capability, 70)
            return
        with self.assertRaisesRegex(layerjit.DeviceError, "no CUDA driver"):
            layerjit.Device(0)
        with self.assertRaisesRegex(layerjit.DeviceError, "no CUDA driver"):
            layerjit.Executable(layerjit.parse(MLP)[0])


class TestModels(unittest.TestCase):
    """Hugging Face model directories: the tiny models the C++ tests write (make_hf_model, named by
    LAYERJIT_MAKE_HF_MODEL), on the CPU reference and, where there is a device, on the GPU."""

    @classmethod
    def setUpClass(cls):
        tool = os.environ.get("LAYERJIT_MAKE_HF_MODEL")
        if not tool:
            raise unittest.SkipTest("LAYERJIT_MAKE_HF_MODEL is not set (ctest and gpu-check.sh set it)")
        cls.dir = tempfile.TemporaryDirectory(prefix="layerjit-models-")
        cls.paths = {}
        for family in ("llama", "qwen3"):
            path = os.path.join(cls.dir.name, family)
            subprocess.run([tool, path, family], check=True, stdout=subprocess.DEVNULL)
            cls.paths[family] = path

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def test_info_and_graphs(self):
        m = layerjit.Model(self.paths["qwen3"])
        self.assertEqual(m.info["architecture"], "Qwen3ForCausalLM")
        self.assertEqual((m.info["layers"], m.info["hidden"], m.info["heads"], m.info["kv_heads"]), (3, 72, 6, 2))
        self.assertEqual((m.info["head_dim"], m.info["vocab"], m.info["dtype"]), (16, 301, "bf16"))
        self.assertTrue(m.info["qk_norm"] and m.info["tied_embeddings"])
        self.assertEqual([g.name for g in m.graphs], ["qwen3_embed", "qwen3_prefill", "qwen3_decode", "qwen3_head"])
        p = m.graphs["qwen3_decode"].plan({"B": 1, "C": 64})
        self.assertNotIn("row_reduce", [g["kind"] for g in p.groups])  # q/k norms inside the RoPE kernel

    def test_generate_cpu_is_greedy_over_its_logits(self):
        m = layerjit.Model(self.paths["llama"])
        out = m.generate_cpu([5, 17, 250, 3], new_tokens=4, keep_logits=True)
        self.assertEqual(len(out.tokens), 4)
        self.assertEqual(len(out.step_ms), 4)
        if out.logits is None or isinstance(out.logits, list):
            self.skipTest("numpy is not installed")
        self.assertEqual(out.logits.shape, (4, 301))
        self.assertEqual([int(r.argmax()) for r in out.logits], out.tokens)
        self.assertIsNone(m.generate_cpu([1, 2], new_tokens=2).logits)

    def test_generate_cpu_sharded_over_two_ranks(self):
        m = layerjit.Model(self.paths["llama"])
        one = m.generate_cpu([5, 17, 250, 3], new_tokens=4, keep_logits=True)
        two = m.generate_cpu([5, 17, 250, 3], new_tokens=4, keep_logits=True, tensor_parallel=2)
        self.assertEqual(len(two.tokens), 4)
        if one.logits is None or isinstance(one.logits, list):
            self.skipTest("numpy is not installed")
        scale = float(abs(one.logits).max())
        self.assertLessEqual(float(abs(two.logits[0] - one.logits[0]).max()), scale / 32)  # the same prompt: bf16 rounding apart
        with self.assertRaisesRegex(layerjit.UserError, "not divisible by 4 ranks"):
            m.generate_cpu([1, 2], tensor_parallel=4)

    def test_bad_requests_and_directories(self):
        m = layerjit.Model(self.paths["llama"])
        with self.assertRaisesRegex(layerjit.UserError, r"outside the vocabulary \[0, 301\)"):
            m.generate_cpu([301])
        with self.assertRaisesRegex(layerjit.UserError, "no config.json"):
            layerjit.Model(self.dir.name)

    def test_on_the_gpu_the_cpu_tokens(self):
        if not layerjit.cuda_available():
            self.skipTest("no CUDA driver")
        m = layerjit.Model(self.paths["llama"])
        r = m.runner(capacity=64)
        prompt = [5, 17, 250, 3, 99, 42, 7]
        self.assertEqual(r.generate(prompt, new_tokens=6).tokens, m.generate_cpu(prompt, new_tokens=6).tokens)
        self.assertEqual(r.capacity, 64)
        self.assertGreater(r.launches_per_decode_step, 3)


if __name__ == "__main__":
    unittest.main()
