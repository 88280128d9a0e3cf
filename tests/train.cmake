# ctorch train end to end (tests/train/check.sh); not under the sanitizers (too slow).
if(NOT CT_SANITIZE)
  add_test(NAME train_cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train/check.sh $<TARGET_FILE:ctorch_cli>
                                  ${CMAKE_CURRENT_BINARY_DIR}/train_cli)
  set_tests_properties(train_cli PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()
