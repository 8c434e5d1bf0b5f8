# Third-party dependencies. Every one comes from a Debian package that scripts/setup.sh installs;
# a missing one stops configuration with the package to install.

find_package(fmt CONFIG QUIET)
if(NOT fmt_FOUND)
  message(FATAL_ERROR "fmt not found: install it with `apt-get install libfmt-dev` (or run scripts/setup.sh)")
endif()

find_path(XXHASH_INCLUDE_DIR xxhash.h)
if(NOT XXHASH_INCLUDE_DIR)
  message(FATAL_ERROR "xxHash not found: install it with `apt-get install libxxhash-dev` (or run scripts/setup.sh)")
endif()
# XXH_INLINE_ALL: the hash is compiled into our code, so no libxxhash.so is needed at run time.
add_library(layerjit_xxhash INTERFACE)
target_include_directories(layerjit_xxhash SYSTEM INTERFACE ${XXHASH_INCLUDE_DIR})
target_compile_definitions(layerjit_xxhash INTERFACE XXH_INLINE_ALL)

find_package(CLI11 CONFIG QUIET)
if(NOT CLI11_FOUND)
  message(FATAL_ERROR "CLI11 not found: install it with `apt-get install libcli11-dev` (or run scripts/setup.sh)")
endif()

find_package(CUDAToolkit QUIET)
if(NOT CUDAToolkit_FOUND)
  message(FATAL_ERROR
    "CUDA toolkit not found: layerjit needs NVRTC and the CUDA headers (not a GPU, not the driver). "
    "Install the CUDA toolkit (e.g. NVIDIA's cuda-toolkit package) or point CUDAToolkit_ROOT at it, "
    "e.g. -DCUDAToolkit_ROOT=/usr/local/cuda")
endif()
if(NOT TARGET CUDA::nvrtc)
  message(FATAL_ERROR "CUDA toolkit at ${CUDAToolkit_LIBRARY_DIR} has no NVRTC library (libnvrtc.so)")
endif()

if(LAYERJIT_BUILD_TESTS)
  find_package(Catch2 QUIET)
  if(NOT Catch2_FOUND)
    message(FATAL_ERROR "Catch2 not found: install it with `apt-get install catch2` (or run scripts/setup.sh)")
  endif()
  find_program(LAYERJIT_FILECHECK NAMES FileCheck FileCheck-14 PATHS /usr/lib/llvm-14/bin /usr/lib/llvm-15/bin)
  if(NOT LAYERJIT_FILECHECK)
    message(FATAL_ERROR "LLVM FileCheck not found: install it with `apt-get install llvm-14-tools` (or run scripts/setup.sh)")
  endif()
endif()
