# Driver for the install tests (cmake -P). Variables:
#   MODE       install | cmake | pkgconfig
#   BUILD_DIR  the ctorch build tree;  PREFIX  the temporary install prefix
#   SOURCE_DIR this folder;  WORK_DIR  scratch space;  C_COMPILER, GENERATOR
cmake_minimum_required(VERSION 3.21)

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    list(JOIN ARGN " " cmd)
    message(FATAL_ERROR "failed (${rc}): ${cmd}\n${out}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

if(MODE STREQUAL "install")
  file(REMOVE_RECURSE "${PREFIX}")
  run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${PREFIX}")
  foreach(f include/ctorch.h include/ctorch/core.h bin/ctorch)
    if(NOT EXISTS "${PREFIX}/${f}")
      message(FATAL_ERROR "not installed: ${f}")
    endif()
  endforeach()
  # The installed tool runs against the installed libctorch.so, found through its
  # RUNPATH ($ORIGIN/../lib), with nothing in the environment pointing there.
  set(ENV{LD_LIBRARY_PATH} "")
  run("${PREFIX}/bin/ctorch" info)
  if(NOT run_output MATCHES "devices:")
    message(FATAL_ERROR "bin/ctorch info printed:\n${run_output}")
  endif()
  find_program(READELF readelf)
  if(READELF)
    run(${READELF} -d "${PREFIX}/bin/ctorch")
    if(NOT run_output MATCHES "NEEDED[^\n]*libctorch\\.so")
      message(FATAL_ERROR "bin/ctorch does not link libctorch.so:\n${run_output}")
    endif()
  endif()
  message(STATUS "installed into ${PREFIX}")

elseif(MODE STREQUAL "cmake")
  file(REMOVE_RECURSE "${WORK_DIR}")
  run(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${WORK_DIR}" -G "${GENERATOR}" -DCMAKE_BUILD_TYPE=Release
      "-DCMAKE_C_COMPILER=${C_COMPILER}" "-DCMAKE_PREFIX_PATH=${PREFIX}")
  run(${CMAKE_COMMAND} --build "${WORK_DIR}")
  foreach(exe consumer_shared consumer_static consumer_static_whole)
    if(EXISTS "${WORK_DIR}/${exe}")
      run("${WORK_DIR}/${exe}")
      message(STATUS "${exe}: ${run_output}")
    endif()
  endforeach()

elseif(MODE STREQUAL "pkgconfig")
  find_program(PKG_CONFIG pkg-config REQUIRED)
  file(REMOVE_RECURSE "${WORK_DIR}")
  file(MAKE_DIRECTORY "${WORK_DIR}")
  # PKG_CONFIG_LIBDIR, not _PATH: only the temporary prefix may answer.
  set(ENV{PKG_CONFIG_PATH} "${PREFIX}/lib/pkgconfig")
  set(ENV{PKG_CONFIG_LIBDIR} "${PREFIX}/lib/pkgconfig")
  run(${PKG_CONFIG} --cflags --libs ctorch)
  separate_arguments(shared_flags UNIX_COMMAND "${run_output}")
  run(${PKG_CONFIG} --static --libs ctorch)
  # Force the archive (the linker would otherwise pick libctorch.so), all of it, so
  # that Libs.private must cover every object's dependencies.
  string(REPLACE "-lctorch" "-Wl,--whole-archive -l:libctorch.a -Wl,--no-whole-archive" static_libs "${run_output}")
  separate_arguments(static_flags UNIX_COMMAND "${static_libs}")
  run(${PKG_CONFIG} --cflags ctorch)
  separate_arguments(cflags UNIX_COMMAND "${run_output}")

  run(${C_COMPILER} -std=c11 -o "${WORK_DIR}/consumer_shared" "${SOURCE_DIR}/main.c" ${shared_flags})
  run(${C_COMPILER} -std=c11 -o "${WORK_DIR}/consumer_static" "${SOURCE_DIR}/main.c" ${cflags} ${static_flags})
  # the prefix first; the caller's path still finds dependencies installed elsewhere
  set(ENV{LD_LIBRARY_PATH} "${PREFIX}/lib:$ENV{LD_LIBRARY_PATH}")
  foreach(exe consumer_shared consumer_static)
    run("${WORK_DIR}/${exe}")
    message(STATUS "${exe}: ${run_output}")
  endforeach()

else()
  message(FATAL_ERROR "run.cmake: unknown MODE '${MODE}'")
endif()
