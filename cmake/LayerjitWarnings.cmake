# Compiler flags shared by every layerjit target: warnings, -Werror in CI, sanitizers on request.
add_library(layerjit_flags INTERFACE)
target_compile_options(layerjit_flags INTERFACE -Wall -Wextra -Wpedantic -Wshadow -Wno-missing-field-initializers)
if(LAYERJIT_WERROR)
  target_compile_options(layerjit_flags INTERFACE -Werror)
endif()
if(LAYERJIT_SANITIZE)
  target_compile_options(layerjit_flags INTERFACE -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_link_options(layerjit_flags INTERFACE -fsanitize=address,undefined -fno-sanitize-recover=all)
endif()

# layerjit_library(NAME SOURCES...): a static library with the public include dir and our flags.
function(layerjit_library name)
  add_library(${name} STATIC ${ARGN})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC layerjit_flags fmt::fmt-header-only)
endfunction()
