# The installable package: liblayerjit.so (every layer's objects in one shared library, exporting
# lj:: only), the public headers, the CLI and its compile worker, a CMake package config with a
# version file (find_package(layerjit 0.2 CONFIG) -> layerjit::layerjit) and a pkg-config file.
# Consumers get include/ and the library, nothing of the build's private flags: the static layers
# carry -W... and XXH_INLINE_ALL as their own compile options, which a shared library's interface
# does not pass on.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(layerjit_layers layerjit_ops layerjit_compiler layerjit_codegen layerjit_runtime layerjit_cache layerjit_jit
    layerjit_exec layerjit_llama layerjit_models layerjit_api layerjit_fmt)
set(layerjit_objects "")
foreach(layer IN LISTS layerjit_layers)
  list(APPEND layerjit_objects $<TARGET_OBJECTS:${layer}>)
endforeach()

add_library(layerjit_shared SHARED ${layerjit_objects})
add_library(layerjit::layerjit ALIAS layerjit_shared)
set_target_properties(layerjit_shared PROPERTIES
  OUTPUT_NAME layerjit
  EXPORT_NAME layerjit
  VERSION ${PROJECT_VERSION}
  # 0.x: a minor version may break the ABI, so the soname carries it (liblayerjit.so.0.2).
  SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR}
  LIBRARY_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/lib)
target_include_directories(layerjit_shared INTERFACE
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include> $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(layerjit_shared INTERFACE cxx_std_20)
# NVRTC, dl and threads are the library's own needs (DT_NEEDED, found through its RUNPATH); libcuda
# is dlopened. A consumer links only layerjit.
target_link_libraries(layerjit_shared PRIVATE $<TARGET_LINKER_FILE:CUDA::nvrtc> ${CMAKE_DL_LIBS} Threads::Threads)
set(layerjit_exports ${PROJECT_SOURCE_DIR}/api/exports.map)
target_link_options(layerjit_shared PRIVATE "LINKER:--version-script=${layerjit_exports}" "LINKER:--no-undefined")
set_property(TARGET layerjit_shared APPEND PROPERTY LINK_DEPENDS ${layerjit_exports})
foreach(layer IN LISTS layerjit_layers)
  add_dependencies(layerjit_shared ${layer})
endforeach()

# pip install (scikit-build-core) installs the Python package only: python/CMakeLists.txt.
if(SKBUILD)
  return()
endif()
install(TARGETS layerjit_shared EXPORT layerjitTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS layerjit layerjit-compile-worker RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# The public headers; check.h is layerjit's own (LJ_CHECK needs fmt) and stays out.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/layerjit DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" PATTERN "*.def" PATTERN "check.h" EXCLUDE)
install(EXPORT layerjitTargets NAMESPACE layerjit:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/layerjit)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/layerjitConfig.cmake.in
  ${PROJECT_BINARY_DIR}/layerjitConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/layerjit)
# 0.x: 0.2.1 satisfies find_package(layerjit 0.2), 0.3 does not.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/layerjitConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/layerjitConfig.cmake ${PROJECT_BINARY_DIR}/layerjitConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/layerjit)
file(RELATIVE_PATH LAYERJIT_PC_INCLUDEDIR /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p/${CMAKE_INSTALL_INCLUDEDIR})
configure_file(${PROJECT_SOURCE_DIR}/cmake/layerjit.pc.in ${PROJECT_BINARY_DIR}/layerjit.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/layerjit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
