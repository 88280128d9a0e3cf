# The fast lane's hand list of ops with arguments (ct_ew_has_args) against the case
# labels of the functions that handle those arguments (tests/check_ew_args.sh).
add_test(NAME check_ew_args COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/check_ew_args.sh
                                    ${PROJECT_SOURCE_DIR}/src/meta/ew_args.c)
