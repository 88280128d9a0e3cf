# `ctorch memviz` on the snapshots test_alloc_snapshot writes (alloc_snapshot.pickle/.json
# in the tests' working directory), plus malformed inputs; and a headless-browser render
# when chromium is installed (skipped with code 77 otherwise).
set_tests_properties(test_alloc_snapshot PROPERTIES FIXTURES_SETUP alloc_snapshot)
add_test(NAME memviz_page
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/memviz/check.sh $<TARGET_FILE:ctorch_cli>
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
add_test(NAME memviz_screenshot
         COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/memviz/screenshot.sh $<TARGET_FILE:ctorch_cli>
         WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(memviz_page memviz_screenshot PROPERTIES FIXTURES_REQUIRED alloc_snapshot SKIP_RETURN_CODE 77)
