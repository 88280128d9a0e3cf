# The CUDA backend as a plug-in: libctorch.so needs no CUDA library, and a CPU program
# linked against it runs where the CUDA libraries cannot be loaded (tests/cuda_plugin.sh;
# skipped in a build without the backend).
add_executable(cpu_only ${CMAKE_CURRENT_SOURCE_DIR}/cpu_only.c)
target_compile_options(cpu_only PRIVATE ${CT_WARNINGS})
target_link_libraries(cpu_only PRIVATE ctorch)
add_test(NAME cuda_plugin COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cuda_plugin.sh $<TARGET_FILE_DIR:ctorch>
                                       $<TARGET_FILE:cpu_only>)
set_tests_properties(cuda_plugin PROPERTIES SKIP_RETURN_CODE 77)

# The layering rules (docs/design.md, "Layers"): greps and a cycle-free folder graph
# from the includes and the built objects' symbols.
add_test(NAME layering COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/check_layering.sh ${PROJECT_SOURCE_DIR}
                                    ${PROJECT_BINARY_DIR})

# The other side, on a GPU machine: a program linked against libctorch.so alone loads
# the backend and trains a step on the GPU (skipped without a usable device).
add_executable(cuda_shared ${CMAKE_CURRENT_SOURCE_DIR}/cuda_shared.c)
target_compile_options(cuda_shared PRIVATE ${CT_WARNINGS})
target_link_libraries(cuda_shared PRIVATE ctorch)
add_test(NAME cuda_shared COMMAND cuda_shared)
set_tests_properties(cuda_shared PROPERTIES SKIP_RETURN_CODE 77)
