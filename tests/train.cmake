# ctorch train end to end (tests/train/check.sh); not under the sanitizers (too slow).
if(NOT CT_SANITIZE)
  add_test(NAME train_cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train/check.sh $<TARGET_FILE:ctorch_cli>
                                  ${CMAKE_CURRENT_BINARY_DIR}/train_cli)
  set_tests_properties(train_cli PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()

# Flat allocator peak and RSS over 1000 steps of both CPU jobs, and no ownership
# mistake under CT_DEBUG=refs (tests/train/check_memory.sh); random data, so it always runs.
if(NOT CT_SANITIZE)
  add_test(NAME train_memory COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train/check_memory.sh
                                    $<TARGET_FILE:ctorch_cli> ${CMAKE_CURRENT_BINARY_DIR}/train_memory ${PROJECT_SOURCE_DIR})
  set_tests_properties(train_memory PROPERTIES TIMEOUT 300)
endif()
