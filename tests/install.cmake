# Install tests: libctorch.so exports only ct_* symbols; an install into a temporary
# prefix works for an out-of-tree program built with find_package(ctorch) and with
# pkg-config. Included by tests/CMakeLists.txt.

add_test(NAME exported_symbols
         COMMAND ${CMAKE_COMMAND} -DLIB=$<TARGET_FILE:ctorch> -P ${PROJECT_SOURCE_DIR}/cmake/check_exports.cmake)
if(CT_HAVE_CUDA)
  # the backend exports its entry point only (Note [Loadable backends] in src/registry.c)
  add_test(NAME exported_symbols_cuda
           COMMAND ${CMAKE_COMMAND} -DLIB=$<TARGET_FILE:ctorch_cuda> -DONLY=ct_cuda_backend_entry
                   -P ${PROJECT_SOURCE_DIR}/cmake/check_exports.cmake)
endif()

# A sanitizer build's libraries need the sanitizer runtime in every consumer: not what
# these tests are about, so that build leaves them out.
if(NOT CT_SANITIZE)
  set(ct_consumer_args -DBUILD_DIR=${PROJECT_BINARY_DIR} -DPREFIX=${CMAKE_CURRENT_BINARY_DIR}/install-prefix
      -DSOURCE_DIR=${CMAKE_CURRENT_SOURCE_DIR}/consumer -DC_COMPILER=${CMAKE_C_COMPILER}
      "-DGENERATOR=${CMAKE_GENERATOR}")
  add_test(NAME install_prefix
           COMMAND ${CMAKE_COMMAND} -DMODE=install ${ct_consumer_args} -P ${CMAKE_CURRENT_SOURCE_DIR}/consumer/run.cmake)
  add_test(NAME consumer_find_package
           COMMAND ${CMAKE_COMMAND} -DMODE=cmake ${ct_consumer_args} -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer-cmake
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/consumer/run.cmake)
  add_test(NAME consumer_pkg_config
           COMMAND ${CMAKE_COMMAND} -DMODE=pkgconfig ${ct_consumer_args} -DWORK_DIR=${CMAKE_CURRENT_BINARY_DIR}/consumer-pc
                   -P ${CMAKE_CURRENT_SOURCE_DIR}/consumer/run.cmake)
  set_tests_properties(install_prefix PROPERTIES FIXTURES_SETUP ctorch_installed)
  set_tests_properties(consumer_find_package consumer_pkg_config PROPERTIES FIXTURES_REQUIRED ctorch_installed)
endif()
