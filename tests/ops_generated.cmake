# The committed include/ctorch/ops_generated.h against what tools/gen_ops_header.c
# writes from ops.def now (Note [Generated prototypes]).
add_test(NAME ops_generated_h
         COMMAND ${CMAKE_COMMAND} -DGEN=$<TARGET_FILE:gen_ops_header>
                 -DHEADER=${PROJECT_SOURCE_DIR}/include/ctorch/ops_generated.h
                 -DOUT=${CMAKE_CURRENT_BINARY_DIR}/ops_generated.h -DBUILD_DIR=${PROJECT_BINARY_DIR}
                 -P ${PROJECT_SOURCE_DIR}/cmake/check_generated.cmake)
