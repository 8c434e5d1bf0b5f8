# Compiler flags shared by every layerjit target: warnings, -Werror in CI, sanitizers on request.
add_library(layerjit_flags INTERFACE)
target_compile_options(layerjit_flags INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wno-missing-field-initializers)
if(LAYERJIT_WERROR)
  target_compile_options(layerjit_flags INTERFACE -Werror)
endif()
# The sanitizers apply to third-party code we compile too (layerjit_fmt); our warnings do not.
add_library(layerjit_sanitizers INTERFACE)
if(LAYERJIT_SANITIZE)
  target_compile_options(layerjit_sanitizers INTERFACE -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_link_options(layerjit_sanitizers INTERFACE -fsanitize=address,undefined -fno-sanitize-recover=all)
endif()
target_link_libraries(layerjit_flags INTERFACE layerjit_sanitizers)

# fmt's implementation compiled once, every other file sees its declarations: deps/fmt_impl.cpp says why.
add_library(layerjit_fmt STATIC ${PROJECT_SOURCE_DIR}/deps/fmt_impl.cpp)
get_target_property(layerjit_fmt_includes fmt::fmt INTERFACE_INCLUDE_DIRECTORIES)
target_include_directories(layerjit_fmt SYSTEM PUBLIC ${layerjit_fmt_includes})
target_link_libraries(layerjit_fmt PRIVATE layerjit_sanitizers)

# layerjit_library(NAME SOURCES...): a static library with the public include dir and our flags.
function(layerjit_library name)
  add_library(${name} STATIC ${ARGN})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC layerjit_flags layerjit_fmt)
endfunction()
