# `ctorch inspect` on the golden safetensors file, and on files it must refuse.
add_test(NAME cli_inspect_safetensors
         COMMAND ctorch_cli inspect ${CMAKE_CURRENT_SOURCE_DIR}/data/io/golden_dtypes.safetensors)
set_tests_properties(cli_inspect_safetensors PROPERTIES PASS_REGULAR_EXPRESSION
  "model\\.layer\\.0\\.weight +float32 +\\[3, 2\\] +24\n.*17 tensors, 88 parameters, 296 bytes \\(296 B\\)\nmetadata:\n  format: pt\n  note: golden [^\n]*\"quoted\"\\\\ttab")
add_test(NAME cli_inspect_refuses_non_checkpoint
         COMMAND ctorch_cli inspect ${CMAKE_CURRENT_SOURCE_DIR}/data/io/golden_dtypes.txt)
set_tests_properties(cli_inspect_refuses_non_checkpoint PROPERTIES WILL_FAIL TRUE)
add_test(NAME cli_inspect_missing_file COMMAND ctorch_cli inspect ${CMAKE_CURRENT_SOURCE_DIR}/data/io/missing)
set_tests_properties(cli_inspect_missing_file PROPERTIES WILL_FAIL TRUE)
