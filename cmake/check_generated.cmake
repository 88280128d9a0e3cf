# cmake -DGEN=gen_ops_header -DHEADER=committed.h -DOUT=fresh.h -DBUILD_DIR=build
#       -P check_generated.cmake
# Runs the generator into OUT and fails, with the differences and the command that
# brings HEADER up to date, when HEADER is not what the generator writes.
execute_process(COMMAND ${GEN} ${OUT} RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${GEN} failed (${rc}): ${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E compare_files ${HEADER} ${OUT} RESULT_VARIABLE same)
if(NOT same EQUAL 0)
  find_program(DIFF diff)
  if(DIFF)
    execute_process(COMMAND ${DIFF} -u ${HEADER} ${OUT} OUTPUT_VARIABLE d)
    message("${d}")
  endif()
  message(FATAL_ERROR "${HEADER} is out of date with ops.def (the differences are above). Regenerate it with\n"
                      "  cmake --build ${BUILD_DIR} --target ops_generated_h\n"
                      "(or ${GEN} ${HEADER}) and commit the result.")
endif()
message(STATUS "${HEADER} matches its generator")
