// layerjit._layerjit: the Python binding of the public API (layerjit/layerjit.h). Tensors come in
// through DLPack (`__dlpack__`, torch and JAX) or `__cuda_array_interface__` (CuPy, Numba) and are
// borrowed, never copied: the run reads and writes the caller's memory on the caller's stream. The
// pure-Python layer in python/layerjit/ (Executable.run's outputs, PyTorch's custom op) builds on it.
#include <cstdint>
#include <optional>
#include <tuple>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "layerjit/layerjit.h"
#include "layerjit/model.h"

namespace py = pybind11;

namespace {

// The DLPack structures (dlpack.h, ABI-stable since 0.1): only what a borrowing consumer reads.
struct DLDevice {
  int32_t device_type;  // kDLCPU 1, kDLCUDA 2, kDLCUDAHost 3, kDLCUDAManaged 13
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null: compact row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
constexpr int32_t kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLCUDAManaged = 13;

std::string device_type_name(int32_t t) {
  switch (t) {
    case kDLCPU: return "host (CPU) memory";
    case kDLCUDAHost: return "pinned host memory";
    case kDLCUDAManaged: return "CUDA managed memory";
    default: return "device type " + std::to_string(t);
  }
}

lj::DType dlpack_dtype(const std::string& name, DLDataType t) {
  if (t.lanes == 1) {
    if (t.code == 2 && t.bits == 32) return lj::DType::F32;
    if (t.code == 2 && t.bits == 16) return lj::DType::F16;
    if (t.code == 4 && t.bits == 16) return lj::DType::BF16;
    if (t.code == 0 && t.bits == 8) return lj::DType::I8;
    if (t.code == 0 && t.bits == 32) return lj::DType::I32;
  }
  throw lj::UserError("tensor '" + name + "': DLPack dtype (code " + std::to_string(t.code) + ", " + std::to_string(t.bits) +
                      " bits, " + std::to_string(t.lanes) + " lanes) is not one layerjit takes through DLPack (f32, f16, bf16, i8, i32; "
                      "pass fp8 data as an i8 view with the graph declaring i8, or through __cuda_array_interface__)");
}

lj::DType typestr_dtype(const std::string& name, const std::string& s) {
  // '<f4': byte order, kind, size. '|' is "not applicable" (one byte).
  if (s.size() >= 3) {
    const std::string k = s.substr(1);
    if (k == "f4") return lj::DType::F32;
    if (k == "f2") return lj::DType::F16;
    if (k == "i1") return lj::DType::I8;
    if (k == "i4") return lj::DType::I32;
  }
  throw lj::UserError("tensor '" + name + "': __cuda_array_interface__ typestr '" + s + "' is not one layerjit takes (<f4, <f2, |i1, <i4)");
}

void check_dense(const std::string& name, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides, int64_t elem) {
  // strides in elements; a dimension of size 1 may have any stride.
  int64_t expect = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expect)
      throw lj::UserError("tensor '" + name + "' is not contiguous (dimension " + std::to_string(i) + " has stride " +
                          std::to_string(strides[i] * elem) + " bytes where a row-major tensor has " + std::to_string(expect * elem) +
                          "): call .contiguous() first");
    expect *= shape[i];
  }
}

// What a run needs of one tensor: checked to be dense and in CUDA device memory. `stream` is the
// stream the run goes on, handed to __dlpack__ so the producer orders its pending work before it.
lj::TensorRef tensor_ref(const std::string& name, const py::handle& obj, std::uintptr_t stream) {
  lj::TensorRef t;
  t.name = name;
  if (py::hasattr(obj, "__dlpack_device__") && py::hasattr(obj, "__dlpack__")) {
    auto dev = obj.attr("__dlpack_device__")().cast<std::pair<int32_t, int32_t>>();
    if (dev.first != kDLCUDA)
      throw lj::UserError("tensor '" + name + "' is in " + device_type_name(dev.first) + ": layerjit runs on CUDA device memory (move it with .cuda())");
    // DLPack's stream numbers: 1 is the legacy default stream (0 is reserved).
    py::object capsule = obj.attr("__dlpack__")(py::arg("stream") = stream == 0 ? 1 : static_cast<long long>(stream));
    auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"));
    if (m == nullptr) {
      PyErr_Clear();
      throw lj::UserError("tensor '" + name + "': __dlpack__ did not return a 'dltensor' capsule");
    }
    const DLTensor& d = m->dl_tensor;
    t.dtype = dlpack_dtype(name, d.dtype);
    t.shape.assign(d.shape, d.shape + d.ndim);
    if (d.strides) check_dense(name, t.shape, std::vector<int64_t>(d.strides, d.strides + d.ndim), lj::dtype_bytes(t.dtype));
    t.data = reinterpret_cast<std::uintptr_t>(d.data) + d.byte_offset;
    // The capsule is not consumed: its destructor releases the producer's view, while `obj` (which
    // the caller keeps) owns the memory.
    return t;
  }
  if (py::hasattr(obj, "__cuda_array_interface__")) {
    py::dict cai = obj.attr("__cuda_array_interface__");
    t.dtype = typestr_dtype(name, cai["typestr"].cast<std::string>());
    for (py::handle d : cai["shape"].cast<py::tuple>()) t.shape.push_back(d.cast<int64_t>());
    if (cai.contains("strides") && !cai["strides"].is_none()) {
      std::vector<int64_t> strides;
      const int64_t elem = lj::dtype_bytes(t.dtype);
      for (py::handle s : cai["strides"].cast<py::tuple>()) strides.push_back(s.cast<int64_t>() / elem);
      check_dense(name, t.shape, strides, elem);
    }
    auto data = cai["data"].cast<py::tuple>();
    t.data = data[0].cast<std::uintptr_t>();
    if (data[1].cast<bool>()) throw lj::UserError("tensor '" + name + "' is read-only (__cuda_array_interface__ data[1])");
    return t;
  }
  throw lj::UserError("tensor '" + name + "' (" + std::string(py::str(py::type::of(obj))) +
                      ") has neither __dlpack__ nor __cuda_array_interface__: pass a torch, CuPy or JAX array on a CUDA device");
}

std::vector<lj::TensorRef> tensor_refs(const py::dict& tensors, std::uintptr_t stream) {
  std::vector<lj::TensorRef> out;
  for (auto [k, v] : tensors) out.push_back(tensor_ref(k.cast<std::string>(), v, stream));
  return out;
}

lj::Bindings bindings(const py::object& d) {
  lj::Bindings b;
  if (d.is_none()) return b;
  for (auto [k, v] : d.cast<py::dict>()) b.set(k.cast<std::string>(), v.cast<int64_t>());
  return b;
}

py::dict bindings_dict(const lj::Bindings& b) {
  py::dict d;
  for (const auto& [k, v] : b.values) d[py::str(k)] = v;
  return d;
}

py::dict value_info(const lj::Graph& g, lj::ValueId v) {
  const lj::ValueInfo& info = g.value(v);
  py::list shape;
  for (const lj::Dim& d : info.type.shape) {
    if (d.is_symbol()) shape.append(d.symbol());
    else shape.append(d.value());
  }
  py::dict out;
  out["name"] = info.name;
  out["dtype"] = std::string(lj::dtype_name(info.type.dtype));
  out["shape"] = shape;
  out["param"] = info.is_param;
  return out;
}

py::list values_info(const lj::Graph& g, const std::vector<lj::ValueId>& vs) {
  py::list out;
  for (lj::ValueId v : vs) out.append(value_info(g, v));
  return out;
}

py::object host_tensor(const lj::HostTensor& t) {
  // A numpy float64 array when numpy is there (the values are exact in it), else nested lists.
  try {
    py::module_ np = py::module_::import("numpy");
    return np.attr("array")(t.data, py::arg("dtype") = "float64").attr("reshape")(t.shape);
  } catch (const py::error_already_set&) {
    return py::cast(t.data);
  }
}

}  // namespace

PYBIND11_MODULE(_layerjit, m) {
  m.doc() = "layerjit's C++ API (layerjit/layerjit.h); use the `layerjit` package";
  m.attr("__version__") = std::string(lj::version());

  // Exceptions: raised as the package's own classes (layerjit.UserError, .DeviceError), which it
  // hands over at import; until then (or without the package) as these.
  static py::exception<lj::UserError> user_error(m, "_UserError");
  static py::exception<lj::RuntimeError> runtime_error(m, "_RuntimeError");
  static py::object user_cls, device_cls;
  m.def("_set_error_classes", [](py::object u, py::object d) {
    user_cls = std::move(u);
    device_cls = std::move(d);
  });
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const lj::UserError& e) {
      py::object cls = user_cls ? user_cls : py::object(user_error);
      py::object err = cls(e.formatted(), e.loc().file, e.loc().line, e.loc().col);
      PyErr_SetObject(cls.ptr(), err.ptr());
    } catch (const lj::RuntimeError& e) {
      py::object cls = device_cls ? device_cls : py::object(runtime_error);
      PyErr_SetObject(cls.ptr(), cls(e.what()).ptr());
    }
  });

  py::class_<lj::Graph, std::shared_ptr<lj::Graph>>(m, "Graph")
      .def_property_readonly("name", &lj::Graph::name)
      .def_property_readonly("inputs", [](const lj::Graph& g) { return values_info(g, g.inputs()); })
      .def_property_readonly("outputs", [](const lj::Graph& g) { return values_info(g, g.outputs()); })
      .def_property_readonly("symbols", &lj::Graph::symbols)
      .def_property_readonly("text", [](const lj::Graph& g) { return lj::print_graph(g); })
      .def("param_bytes", [](const lj::Graph& g, const py::object& b) { return g.param_bytes(bindings(b)); }, py::arg("bind") = py::none());

  m.def("_parse", [](const std::string& text, const std::string& filename) {
    std::vector<std::shared_ptr<lj::Graph>> out;
    try {
      for (lj::Graph& g : lj::parse_module(text, filename).graphs) out.push_back(std::make_shared<lj::Graph>(std::move(g)));
    } catch (const lj::UserError& e) {
      // The source line and a caret under the column after the message, as the CLI prints them.
      const std::string diag = lj::format_diagnostic(e, text);
      const size_t eol = diag.find('\n');
      throw lj::UserError(std::string(e.what()) + (eol == std::string::npos ? "" : diag.substr(eol)), e.loc());
    }
    return out;
  });
  m.def("_llama", [](const std::string& which, bool small) {
    const lj::LlamaConfig c = small ? lj::LlamaConfig::small() : lj::LlamaConfig::llama3_8b();
    return std::make_shared<lj::Graph>(which == "prefill" ? lj::llama_prefill(c) : lj::llama_decode(c));
  });

  m.def("_plan", [](const lj::Graph& g, const py::object& bind, bool fuse) {
    const lj::PlanInfo p = lj::plan(g, {bindings(bind), fuse});
    py::list groups;
    for (const lj::PlannedGroup& grp : p.groups) {
      py::dict d;
      d["id"] = grp.id;
      d["kind"] = grp.kind;
      d["nodes"] = grp.nodes;
      d["inputs"] = grp.inputs;
      d["outputs"] = grp.outputs;
      d["reasons"] = grp.reasons;
      d["prepare"] = grp.prepare;
      d["flops"] = grp.flops;
      d["bytes"] = grp.bytes;
      groups.append(d);
    }
    py::dict out;
    out["graph"] = p.graph;
    out["groups"] = groups;
    out["notes"] = p.notes;
    out["report"] = p.report;
    return out;
  });

  m.def("_compile", [](const lj::Graph& g, const std::string& arch, const py::object& bind, bool fuse, bool ptx, bool cache) {
    lj::CompileSettings s;
    s.arch = arch;
    s.sizes = bindings(bind);
    s.fuse = fuse;
    s.want_ptx = ptx;
    s.use_cache = cache;
    lj::CompiledKernels c;
    {
      py::gil_scoped_release release;  // NVRTC takes seconds cold
      c = lj::compile(g, s);
    }
    py::list kernels;
    for (const lj::KernelInfo& k : c.kernels) {
      py::dict d;
      d["group"] = k.group;
      d["name"] = k.name;
      d["config"] = k.config;
      d["config_source"] = k.config_source;
      d["source"] = k.source;
      d["ptx"] = k.ptx;
      d["cubin"] = py::bytes(reinterpret_cast<const char*>(k.cubin.data()), k.cubin.size());
      d["cache_hit"] = k.cache_hit;
      kernels.append(d);
    }
    py::dict out;
    out["arch"] = c.arch;
    out["kernels"] = kernels;
    out["seconds"] = c.seconds;
    out["cache_hits"] = c.cache_hits;
    return out;
  });

  m.def("_aliased_input", &lj::aliased_input);
  m.def("_sizes_of", [](const lj::Graph& g, const py::dict& tensors) { return bindings_dict(lj::sizes_of(g, tensor_refs(tensors, 0))); });
  m.def("_tensor_ref", [](const std::string& name, const py::handle& obj) {
    const lj::TensorRef t = tensor_ref(name, obj, 0);
    return py::make_tuple(t.data, std::string(lj::dtype_name(t.dtype)), t.shape);
  });

  m.def("cuda_available", &lj::Device::available, "Whether a CUDA driver and a device are there");

  py::class_<lj::Device>(m, "Device")
      .def(py::init(&lj::Device::open), py::arg("ordinal") = 0)
      .def_property_readonly("ordinal", &lj::Device::ordinal)
      .def_property_readonly("name", &lj::Device::name)
      .def_property_readonly("compute_capability", &lj::Device::compute_capability)
      .def_property_readonly("sm_count", &lj::Device::sm_count)
      .def("synchronize", &lj::Device::synchronize)
      .def("__repr__", [](const lj::Device& d) { return "<layerjit.Device " + std::to_string(d.ordinal()) + ": " + d.name() + ">"; });

  py::class_<lj::CapturedRun>(m, "CapturedRun")
      .def("replay", [](const lj::CapturedRun& r, std::uintptr_t stream) { r.replay(reinterpret_cast<lj::StreamHandle>(stream)); },
           py::arg("stream") = 0)
      .def_property_readonly("launches", &lj::CapturedRun::launches);

  py::class_<lj::Executable>(m, "_Executable")
      .def(py::init([](const lj::Device& d, const lj::Graph& g, const py::object& hint, bool fuse, bool tuned, const std::string& bundle) {
             lj::ExecutableSettings s;
             s.hint = bindings(hint);
             s.fuse = fuse;
             s.use_tuned = tuned;
             s.bundle = bundle;
             py::gil_scoped_release release;
             return lj::Executable::build(d, g, s);
           }),
           py::arg("device"), py::arg("graph"), py::arg("hint"), py::arg("fuse"), py::arg("tuned"), py::arg("bundle"))
      .def_property_readonly("graph", [](const lj::Executable& e) { return std::make_shared<lj::Graph>(e.graph()); })
      .def_property_readonly("launches_per_run", &lj::Executable::launches_per_run)
      .def_property_readonly("written_inputs", &lj::Executable::written_inputs)
      .def_property_readonly("kernels", [](const lj::Executable& e) {
        py::list out;
        for (const lj::KernelInfo& k : e.kernels()) {
          py::dict d;
          d["group"] = k.group;
          d["name"] = k.name;
          d["config"] = k.config;
          d["config_source"] = k.config_source;
          d["source"] = k.source;
          d["cache_hit"] = k.cache_hit;
          out.append(d);
        }
        return out;
      })
      .def("bind", [](lj::Executable& e, const std::string& name, const py::handle& t) { e.bind(name, tensor_ref(name, t, 0).data); })
      .def("load_weights", &lj::Executable::load_weights)
      .def("run", [](lj::Executable& e, const py::dict& tensors, std::uintptr_t stream) {
        std::vector<lj::TensorRef> refs = tensor_refs(tensors, stream);
        lj::Bindings b;
        {
          py::gil_scoped_release release;
          b = e.run(refs, reinterpret_cast<lj::StreamHandle>(stream));
        }
        return bindings_dict(b);
      })
      // The torch op's path: tensors already described by (name, data_ptr, dtype name, shape), so no
      // DLPack capsule per tensor per call (10 of them cost more than a decode step).
      .def("run_raw", [](lj::Executable& e, const std::vector<std::tuple<std::string, std::uintptr_t, std::string, std::vector<int64_t>>>& ts,
                         std::uintptr_t stream) {
        std::vector<lj::TensorRef> refs;
        refs.reserve(ts.size());
        for (const auto& [name, ptr, dtype, shape] : ts) {
          std::optional<lj::DType> dt = lj::parse_dtype(dtype);
          if (!dt) throw lj::UserError("tensor '" + name + "': unknown dtype '" + dtype + "'");
          refs.push_back({name, ptr, *dt, shape});
        }
        py::gil_scoped_release release;
        e.run(refs, reinterpret_cast<lj::StreamHandle>(stream));
      })
      .def("run_bound", [](lj::Executable& e, const py::object& sizes, std::uintptr_t stream) {
        e.run(bindings(sizes), reinterpret_cast<lj::StreamHandle>(stream));
      })
      .def("capture", [](lj::Executable& e, const py::object& sizes, std::uintptr_t stream) {
        return e.capture(bindings(sizes), reinterpret_cast<lj::StreamHandle>(stream));
      })
      .def("download", [](const lj::Executable& e, const std::string& name, const py::object& sizes, std::uintptr_t stream) {
        return host_tensor(e.download(name, bindings(sizes), reinterpret_cast<lj::StreamHandle>(stream)));
      });

  // Hugging Face models (layerjit/model.h); python/layerjit/__init__.py wraps them as Model.
  auto info_dict = [](const lj::ModelInfo& i) {
    py::dict d;
    d["name"] = i.name, d["architecture"] = i.architecture, d["layers"] = i.layers, d["hidden"] = i.hidden;
    d["heads"] = i.heads, d["kv_heads"] = i.kv_heads, d["head_dim"] = i.head_dim, d["intermediate"] = i.intermediate;
    d["vocab"] = i.vocab, d["max_positions"] = i.max_positions, d["sliding_window"] = i.sliding_window;
    d["tied_embeddings"] = i.tied_embeddings, d["qkv_bias"] = i.qkv_bias, d["qk_norm"] = i.qk_norm;
    d["dtype"] = std::string(lj::dtype_name(i.dtype)), d["weight_bytes"] = i.weight_bytes;
    return d;
  };
  auto generation = [](const lj::Generation& g, bool logits) {
    py::dict d;
    d["tokens"] = g.tokens;
    d["step_ms"] = g.step_ms;
    d["logits"] = logits ? host_tensor(g.logits) : py::none();
    return d;
  };
  py::class_<lj::Model>(m, "_Model")
      .def(py::init(&lj::Model::open))
      .def_property_readonly("info", [info_dict](const lj::Model& mo) { return info_dict(mo.info()); })
      .def("graphs", [](const lj::Model& mo) {
        std::vector<std::shared_ptr<lj::Graph>> out;
        for (lj::Graph& g : mo.graphs()) out.push_back(std::make_shared<lj::Graph>(std::move(g)));
        return out;
      })
      .def("unused_tensors", &lj::Model::unused_tensors)
      .def("generate_cpu", [generation](const lj::Model& mo, const std::vector<int32_t>& prompt, int64_t n, bool logits, int tp) {
        lj::Generation g;
        {
          py::gil_scoped_release released;
          g = mo.generate_cpu(prompt, {n, logits}, tp);
        }
        return generation(g, logits);
      });
  py::class_<lj::ModelRunner>(m, "_ModelRunner")
      .def(py::init([](const lj::Device& d, const lj::Model& mo, int64_t capacity, bool graphs, bool fuse, bool tuned, int tp) {
             return lj::ModelRunner::open(d, mo, {capacity, graphs, fuse, tuned, tp});
           }),
           py::keep_alive<1, 3>())  // the model outlives its runner
      .def("generate", [generation](lj::ModelRunner& r, const std::vector<int32_t>& prompt, int64_t n, bool logits) {
        lj::Generation g;
        {
          py::gil_scoped_release released;
          g = r.generate(prompt, {n, logits});
        }
        return generation(g, logits);
      })
      .def_property_readonly("capacity", &lj::ModelRunner::capacity)
      .def_property_readonly("launches_per_decode_step", &lj::ModelRunner::launches_per_decode_step)
      .def_property_readonly("compile_seconds", &lj::ModelRunner::compile_seconds);
}
