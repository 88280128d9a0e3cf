# The float32 reduction tests again with the ISA capped (src/cpu/vecmath.c reads
# CT_CPU_ISA), so the AVX2 kernels and the scalar fallbacks run on machines that would
# pick AVX-512.
foreach(isa avx2 scalar)
  add_test(NAME test_reduce_f32_${isa} COMMAND test_reduce_f32)
  set(env "CMOCKA_MESSAGE_OUTPUT=stdout" "CT_CPU_ISA=${isa}")
  if(CT_SANITIZE)
    list(APPEND env "ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:abort_on_error=1"
                    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
  endif()
  set_tests_properties(test_reduce_f32_${isa} PROPERTIES ENVIRONMENT "${env}")
endforeach()
