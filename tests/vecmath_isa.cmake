# Test programs run again with the vector ISA capped (CT_CPU_ISA, read by
# src/cpu/vecmath.c and the pooling kernels in src/cpu/conv.c), so the AVX2, SSE2 and
# scalar paths are checked on machines that would pick AVX-512.
function(ct_add_isa_test prog isa)
  add_test(NAME ${prog}_${isa} COMMAND ${prog})
  set(env "CMOCKA_MESSAGE_OUTPUT=stdout" "CT_CPU_ISA=${isa}")
  if(CT_SANITIZE)
    list(APPEND env "ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1:abort_on_error=1"
                    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1")
  endif()
  set_tests_properties(${prog}_${isa} PROPERTIES ENVIRONMENT "${env}")
endfunction()

foreach(isa avx2 scalar)
  ct_add_isa_test(test_ops_variants ${isa}) # the vector math
  ct_add_isa_test(test_reduce_f32 ${isa})   # the float32 softmax and sum kernels
endforeach()
ct_add_isa_test(test_conv avx2)             # the SSE2 pooling path
