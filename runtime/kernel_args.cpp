#include "runtime/kernel_args.h"

#include <fmt/format.h>

#include "runtime/tensor_map.h"

namespace lj::rt {

Result<KernelArgs> pack_kernel_args(const Context& ctx, const KernelAbi& k, const Bindings& b, const ArgSources& src) {
  KernelArgs args;
  for (const KernelParam& p : k.params) {
    switch (p.kind) {
      case KernelParam::Kind::Symbol: {
        const std::optional<int64_t> v = b.get(p.symbol);
        if (!v) return Error{fmt::format("{}: parameter {} needs a value for symbol {}", k.name, p.name, p.symbol)};
        args.add(static_cast<long long>(*v));
        break;
      }
      case KernelParam::Kind::Scratch: {
        LJ_RT_ASSIGN(CUdeviceptr ptr, src.scratch(static_cast<size_t>(scratch_bytes(k, b))));
        args.add(ptr);
        break;
      }
      case KernelParam::Kind::Buffer: {
        LJ_RT_ASSIGN(CUdeviceptr ptr, src.buffer(p.buffer));
        args.add(ptr);
        break;
      }
      case KernelParam::Kind::TensorMap: {
        LJ_RT_ASSIGN(CUdeviceptr base, src.buffer(p.buffer));
        const TensorMapSpec& t = p.tmap;
        int64_t rows = t.rows.constant;
        for (const std::string& s : t.rows.symbols) {
          const std::optional<int64_t> v = b.get(s);
          if (!v) return Error{fmt::format("{}: tensor map {} needs a value for symbol {}", k.name, p.name, s)};
          rows *= *v;
        }
        const auto eb = static_cast<uint64_t>(dtype_bytes(p.dtype));
        auto map = encode_tensor_map_2d(ctx, base + static_cast<uint64_t>(t.offset) * eb, p.dtype, static_cast<uint64_t>(rows),
                                        static_cast<uint64_t>(t.cols), static_cast<uint64_t>(t.row_stride) * eb,
                                        static_cast<uint32_t>(t.box_rows), static_cast<uint32_t>(t.box_cols), t.swizzle_bytes);
        if (!map.ok()) return Error{fmt::format("{}: parameter {}: {}", k.name, p.name, map.error().message)};
        args.add(*map);
        break;
      }
    }
  }
  return args;
}

}  // namespace lj::rt
