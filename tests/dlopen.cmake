# dlopen_check loads the shared library at run time (not linked against it): the
# library must load that way despite its initial-exec thread-locals.
add_executable(dlopen_check ${CMAKE_CURRENT_SOURCE_DIR}/dlopen_check.c)
target_include_directories(dlopen_check PRIVATE ${CT_CMOCKA_INCLUDE} ${PROJECT_SOURCE_DIR}/include)
target_compile_options(dlopen_check PRIVATE ${CT_WARNINGS} -Wno-missing-prototypes)
target_link_libraries(dlopen_check PRIVATE ${CT_CMOCKA_LIB} ${CMAKE_DL_LIBS} Threads::Threads)
add_dependencies(dlopen_check ctorch)
add_test(NAME dlopen_check COMMAND dlopen_check $<TARGET_FILE:ctorch>)
set_tests_properties(dlopen_check PROPERTIES ENVIRONMENT "CMOCKA_MESSAGE_OUTPUT=stdout")
