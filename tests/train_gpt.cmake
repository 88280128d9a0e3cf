# ctorch train char-gpt: the model's parameters against PyTorch's (tests/train/
# char_gpt_model.c, built with the CLI's src/cli/gpt.c), and the command end to end
# (tests/train/check_gpt.sh): argument and input errors, a short run whose loss drops,
# a checkpoint and a sample of the requested length drawn from the text's characters.
add_executable(test_char_gpt_model ${CMAKE_CURRENT_SOURCE_DIR}/train/char_gpt_model.c
                                   ${PROJECT_SOURCE_DIR}/src/cli/gpt.c)
target_include_directories(test_char_gpt_model PRIVATE ${CT_CMOCKA_INCLUDE} ${PROJECT_SOURCE_DIR}/src
                                                       ${PROJECT_SOURCE_DIR}/src/core ${CMAKE_CURRENT_SOURCE_DIR})
target_compile_options(test_char_gpt_model PRIVATE ${CT_WARNINGS} -Wno-missing-prototypes)
target_link_libraries(test_char_gpt_model PRIVATE ct_testkit ctorch ${CT_CMOCKA_LIB})
if(CT_M_LIB)
  target_link_libraries(test_char_gpt_model PRIVATE ${CT_M_LIB})
endif()
add_test(NAME test_char_gpt_model COMMAND test_char_gpt_model)
set_tests_properties(test_char_gpt_model PROPERTIES ENVIRONMENT "CMOCKA_MESSAGE_OUTPUT=stdout")

add_test(NAME train_char_gpt_cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train/check_gpt.sh
                                         $<TARGET_FILE:ctorch_cli> ${CMAKE_CURRENT_BINARY_DIR}/train_char_gpt_cli)
set_tests_properties(train_char_gpt_cli PROPERTIES TIMEOUT 120)

# ctorch train gpt2 end to end (tests/train/check_gpt2.sh): errors, a byte-level run whose
# loss drops, llm.c token and tokenizer files, --resume.
add_test(NAME train_gpt2_cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/train/check_gpt2.sh
                                     $<TARGET_FILE:ctorch_cli> ${CMAKE_CURRENT_BINARY_DIR}/train_gpt2_cli)
set_tests_properties(train_gpt2_cli PROPERTIES TIMEOUT 300)
