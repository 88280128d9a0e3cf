# CT_PROFILE and CT_TRACE on a child run of test_profiler, then the trace through
# scripts/check_trace.py (when Python is there; skipped with code 77 otherwise) and
# the logs through `ctorch trace-report --strict`.
find_program(CT_PYTHON3 NAMES python3)
add_test(NAME profiler_env_outputs
         COMMAND sh -c "rm -rf prof_env && mkdir -p prof_env/logs && \
CT_PROFILE=prof_env/trace.json CT_TRACE=prof_env/logs \"$1\" --child && \
\"$2\" trace-report prof_env/logs -o prof_env/report --strict && \
test -f prof_env/report/index.html && test -f prof_env/report/raw.jsonl && \
if [ -n \"$3\" ]; then \"$3\" \"$4\" prof_env/trace.json --expect-span mm --expect-span add; else exit 77; fi"
                 sh $<TARGET_FILE:test_profiler> $<TARGET_FILE:ctorch_cli> "${CT_PYTHON3}"
                 ${PROJECT_SOURCE_DIR}/scripts/check_trace.py
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(profiler_env_outputs PROPERTIES SKIP_RETURN_CODE 77)
