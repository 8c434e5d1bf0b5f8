# Read by ctest after the discovered GPU tests: exit code 77 ("skipped: no CUDA driver") is a skip,
# for every test_gpu_* binary's discovered list (test_gpu_<name>_TESTS).
get_cmake_property(lj_vars VARIABLES)
foreach(lj_var IN LISTS lj_vars)
  if(lj_var MATCHES "^test_gpu_.*_TESTS$" AND ${lj_var})
    set_tests_properties(${${lj_var}} PROPERTIES SKIP_RETURN_CODE 77)
  endif()
endforeach()
