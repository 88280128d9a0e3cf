# The vector-math tests again with the ISA capped (src/cpu/vecmath.c reads CT_CPU_ISA),
# so the AVX2 and scalar loops are checked on machines that would pick AVX-512.
foreach(isa avx2 scalar)
  add_test(NAME test_ops_variants_${isa} COMMAND test_ops_variants)
  set(env "CMOCKA_MESSAGE_OUTPUT=stdout" "CT_CPU_ISA=${isa}")
  if(CT_SANITIZE)
    list(APPEND env "ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:abort_on_error=1"
                    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
  endif()
  set_tests_properties(test_ops_variants_${isa} PROPERTIES ENVIRONMENT "${env}")
endforeach()

# The convolution and pooling tests once more with the SSE2 pooling path.
add_test(NAME test_conv_avx2 COMMAND test_conv)
set(env "CMOCKA_MESSAGE_OUTPUT=stdout" "CT_CPU_ISA=avx2")
if(CT_SANITIZE)
  list(APPEND env "ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:abort_on_error=1"
                  "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
endif()
set_tests_properties(test_conv_avx2 PROPERTIES ENVIRONMENT "${env}")
