# The docs the code cites: every `docs/<NAME>.md "Title"` in a source comment names a section that exists
# (tests/check_doc_citations.py; no build, no GPU).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME doc_citations COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_doc_citations.py
                                      ${PROJECT_SOURCE_DIR})
  set_tests_properties(doc_citations PROPERTIES LABELS docs TIMEOUT 60)
endif()
# The device-side analysis tools (tools/sass_waits.py, tools/ncu_source_stalls.py) on fixtures: no GPU, no CUDA tools.
if(Python3_Interpreter_FOUND)
  add_test(NAME check_tools COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/check_tools.py)
  set_tests_properties(check_tools PROPERTIES LABELS docs TIMEOUT 60)
endif()
