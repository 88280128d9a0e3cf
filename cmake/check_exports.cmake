# cmake -DLIB=libctorch.so -P check_exports.cmake: fails when the shared library
# exports a symbol outside the ct_ namespace (internal symbols must stay hidden);
# with -DONLY=name, when it exports any ct_ symbol but that one.
find_program(NM nm REQUIRED)
execute_process(COMMAND ${NM} -D --defined-only "${LIB}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "nm failed on ${LIB}: ${err}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(bad)
set(count 0)
foreach(line ${lines})
  # "<address> <type> <name>[@version]"
  if(line MATCHES "^[0-9a-fA-F]* +[A-Za-z] +([^ @]+)")
    set(sym "${CMAKE_MATCH_1}")
    # AddressSanitizer's one-definition-rule markers name the global they guard.
    string(REGEX REPLACE "^__odr_asan[.]" "" sym "${sym}")
    math(EXPR count "${count} + 1")
    # Linker-defined section markers are not ours to hide.
    if(NOT sym MATCHES "^ct_" AND NOT sym MATCHES "^(_init|_fini|_edata|_end|__bss_start)$")
      list(APPEND bad "${sym}")
    elseif(DEFINED ONLY AND sym MATCHES "^ct_" AND NOT sym STREQUAL "${ONLY}")
      list(APPEND bad "${sym}")
    endif()
  endif()
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "no exported symbols found in ${LIB}")
endif()
if(bad)
  list(JOIN bad "\n  " bad)
  message(FATAL_ERROR "${LIB} exports symbols without the ct_ prefix (mark them static or keep them hidden):\n  ${bad}")
endif()
message(STATUS "${count} exported symbols, all ct_*")
