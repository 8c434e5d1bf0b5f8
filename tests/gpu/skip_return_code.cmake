# Read by ctest after the discovered GPU tests: exit code 77 ("skipped: no CUDA driver") is a skip.
if(DEFINED test_gpu_runtime_TESTS)
  set_tests_properties(${test_gpu_runtime_TESTS} PROPERTIES SKIP_RETURN_CODE 77)
endif()
if(DEFINED test_gpu_membound_TESTS)
  set_tests_properties(${test_gpu_membound_TESTS} PROPERTIES SKIP_RETURN_CODE 77)
endif()
