# The ownership debug mode (docs/debugging.md): the sites in its messages name the
# test's own functions, so the program exports them.
set_target_properties(test_debug_refs PROPERTIES ENABLE_EXPORTS ON)
# At exit, CT_DEBUG=refs lists the tensors still alive with the op that made each.
add_test(NAME debug_refs_exit_listing COMMAND test_debug_refs leak)
set_tests_properties(debug_refs_exit_listing PROPERTIES ENVIRONMENT "CT_DEBUG=refs"
  PASS_REGULAR_EXPRESSION "CT_DEBUG=refs: 1 tensor still alive:\n  \\[2\\] float32 tensor made by mul at ")
# A representative part of the suite again with the mode on (the whole suite passes
# with CT_DEBUG=refs too, at about 2.5 times its time): each test must make no
# ownership mistake, and a use of a dead tensor fails the test through its error.
foreach(name test_core test_autograd test_autograd_mlp test_views test_nn_module test_nn_functional test_optim
             test_data)
  add_test(NAME ${name}_debug_refs COMMAND ${name})
  set_tests_properties(${name}_debug_refs PROPERTIES ENVIRONMENT "CMOCKA_MESSAGE_OUTPUT=stdout;CT_DEBUG=refs"
                       SKIP_RETURN_CODE 77 FAIL_REGULAR_EXPRESSION "double release|use after")
endforeach()
