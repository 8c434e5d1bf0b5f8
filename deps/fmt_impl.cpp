// fmt's out-of-line implementation, compiled once for the whole project.
//
// Debian's libfmt-dev ships fmt as a shared library and as headers. We link neither way the package
// suggests: libfmt.so would be one more run-time dependency for binaries that are carried to GPU
// machines, and FMT_HEADER_ONLY recompiles format-inl.h in every translation unit (about 4 s each at
// -O2, a third of a typical file's compile time and minutes of CI). Instead every file sees fmt's
// declarations only, and this file supplies the definitions: format-inl.h defines the non-template
// functions (FMT_FUNC is empty without FMT_HEADER_ONLY), and the templates that format.h declares
// `extern` or leaves undefined are instantiated here for the character types we use.
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {

template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;

template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API void buffer<char>::append(const char*, const char*);
template FMT_API void vformat_to(buffer<char>&, string_view, basic_format_args<buffer_context<char>>,
                                 locale_ref);

}  // namespace detail
FMT_END_NAMESPACE
