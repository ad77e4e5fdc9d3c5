# abi.cmake — ABI conformance (TESTING level 2) and contract tests: negotiation against fake plugins, the
# export set, the public header as C99/C11/C++, the capability table sweep, refusals of bad inputs, the
# struct_size rules; plus CTests for tools/fp8moe-info and examples/deepseek_host.

if(NOT TARGET fp8moe_negotiate)
  message(FATAL_ERROR "tests/abi.cmake: the fake plugins link the real negotiation, target fp8moe_negotiate "
                      "(src/CMakeLists.txt), which does not exist")
endif()
find_package(Python3 COMPONENTS Interpreter)

# ---- fake plugins: one source, one .so per negotiation branch ----
function(fp8moe_fake_plugin name)
  add_library(${name} MODULE ${CMAKE_CURRENT_SOURCE_DIR}/fake_plugin.c)
  set_target_properties(${name} PROPERTIES C_VISIBILITY_PRESET hidden)
  target_compile_definitions(${name} PRIVATE ${ARGN})
  target_compile_options(${name} PRIVATE ${FP8MOE_C_WARNINGS})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/abi ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PRIVATE fp8moe_negotiate)
  # fp8moe_negotiate is a static archive: keep its symbols out of the fake's export set.
  target_link_options(${name} PRIVATE "LINKER:--exclude-libs,ALL" "LINKER:--no-undefined")
endfunction()

fp8moe_fake_plugin(fp8moe_fake_minor0 FAKE_ABI_MINOR=0)
fp8moe_fake_plugin(fp8moe_fake_minor1 FAKE_ABI_MINOR=1)
fp8moe_fake_plugin(fp8moe_fake_minor3 FAKE_ABI_MINOR=3)
fp8moe_fake_plugin(fp8moe_fake_major2 FAKE_ABI_MAJOR=2 FAKE_ABI_MINOR=0)
fp8moe_fake_plugin(fp8moe_fake_wrong_symbol FAKE_ENTRY_NAME=fp8moe_get_api_v2)
fp8moe_fake_plugin(fp8moe_fake_extra_export FAKE_EXTRA_EXPORT)
fp8moe_fake_plugin(fp8moe_fake_null_table FAKE_NULL_TABLE)
# claims 1.1 but its table stops at the 1.0 entries (one entry short)
fp8moe_fake_plugin(fp8moe_fake_short_table FAKE_ABI_MINOR=1 "FAKE_TABLE_SHORTFALL=sizeof(void*)")

set(_fp8moe_fakes minor0 minor1 minor3 major2 wrong_symbol extra_export null_table short_table)

fp8moe_add_test(NAME test_negotiation SOURCES test_negotiation.c LABELS abi ARGS $<TARGET_FILE:fp8moe> TIMEOUT 60)
foreach(_fake IN LISTS _fp8moe_fakes)
  string(TOUPPER "${_fake}" _upper)
  target_compile_definitions(test_negotiation PRIVATE "FAKE_${_upper}_PATH=\"$<TARGET_FILE:fp8moe_fake_${_fake}>\"")
  add_dependencies(test_negotiation fp8moe_fake_${_fake})
endforeach()

# ---- export set, SONAME and NEEDED ----
set(_fp8moe_check_exports ${CMAKE_COMMAND} -E env NM=${CMAKE_NM} READELF=${CMAKE_READELF}
    sh ${CMAKE_CURRENT_SOURCE_DIR}/check_exports.sh)
add_test(NAME abi_exports COMMAND ${_fp8moe_check_exports} $<TARGET_FILE:fp8moe> ${PROJECT_SOURCE_DIR}/plugin.def
         libfp8moe.so.${FP8MOE_SOVERSION})
# The checker itself must be able to fail: a clean fake passes, the extra/misnamed exports are caught.
add_test(NAME abi_exports_fake_clean
         COMMAND ${_fp8moe_check_exports} $<TARGET_FILE:fp8moe_fake_minor0> ${PROJECT_SOURCE_DIR}/plugin.def)
add_test(NAME abi_exports_detects_extra
         COMMAND ${_fp8moe_check_exports} $<TARGET_FILE:fp8moe_fake_extra_export> ${PROJECT_SOURCE_DIR}/plugin.def)
set_tests_properties(abi_exports_detects_extra PROPERTIES
                     PASS_REGULAR_EXPRESSION "extra export: fp8moe_fake_extra_export\n.*1 failed")
add_test(NAME abi_exports_detects_missing
         COMMAND ${_fp8moe_check_exports} $<TARGET_FILE:fp8moe_fake_wrong_symbol> ${PROJECT_SOURCE_DIR}/plugin.def)
set_tests_properties(abi_exports_detects_missing PROPERTIES
                     PASS_REGULAR_EXPRESSION "extra export: fp8moe_get_api_v2\nmissing export: fp8moe_get_api\n")
set_tests_properties(abi_exports abi_exports_fake_clean abi_exports_detects_extra abi_exports_detects_missing
                     PROPERTIES LABELS abi TIMEOUT 60)

# ---- the public header: C99 and C11 with -pedantic, and C++ when a compiler is there ----
# Each is one compiler run, reported in the suite's "N passed, M failed" form.
set(_fp8moe_one_check "name=$0; if \"$@\"; then echo \"$name: 1 passed, 0 failed\"; \
else echo \"$name: 0 passed, 1 failed\"; exit 1; fi")
set(_fp8moe_header_flags -Wall -Wextra -pedantic -Werror -Wshadow -Wundef -I${PROJECT_SOURCE_DIR}/abi)
foreach(_std c99 c11)
  add_test(NAME abi_header_${_std}
           COMMAND bash -c "${_fp8moe_one_check}" abi_header_${_std}
                   ${CMAKE_C_COMPILER} -std=${_std} ${_fp8moe_header_flags} -Wstrict-prototypes
                   -Wmissing-prototypes -c ${CMAKE_CURRENT_SOURCE_DIR}/test_header_c99.c
                   -o ${CMAKE_CURRENT_BINARY_DIR}/test_header_${_std}.o)
  set_tests_properties(abi_header_${_std} PROPERTIES LABELS abi TIMEOUT 60)
endforeach()
find_program(FP8MOE_CXX_FOR_HEADER_TEST NAMES c++ g++ clang++)
if(FP8MOE_CXX_FOR_HEADER_TEST)
  add_test(NAME abi_header_cxx
           COMMAND bash -c "${_fp8moe_one_check}" abi_header_cxx
                   ${FP8MOE_CXX_FOR_HEADER_TEST} -x c++ -std=c++11 ${_fp8moe_header_flags}
                   -c ${CMAKE_CURRENT_SOURCE_DIR}/test_header_c99.c -o ${CMAKE_CURRENT_BINARY_DIR}/test_header_cxx.o)
  set_tests_properties(abi_header_cxx PROPERTIES LABELS abi TIMEOUT 60)
endif()
# The same source as a C99 program: the pinned values, checked at run time as well.
fp8moe_add_test(NAME test_header_c99 SOURCES test_header_c99.c LABELS abi TIMEOUT 60)
set_target_properties(test_header_c99 PROPERTIES C_STANDARD 99 C_EXTENSIONS OFF)
target_compile_options(test_header_c99 PRIVATE -pedantic)

# ---- contract and validation through the public API ----
# The valid problem these tests break one field at a time, and the CPU context and buffers they run on.
add_library(fp8moe_test_baseline STATIC baseline_problem.c)
target_compile_options(fp8moe_test_baseline PRIVATE ${FP8MOE_C_WARNINGS})
target_link_libraries(fp8moe_test_baseline PUBLIC fp8moe_test_host)
fp8moe_add_test(NAME test_contract_sweep SOURCES test_contract_sweep.c LIBS fp8moe_test_baseline LABELS abi
                TIMEOUT 300)
fp8moe_add_test(NAME test_bad_inputs SOURCES test_bad_inputs.c LIBS fp8moe_test_baseline LABELS abi TIMEOUT 300)
fp8moe_add_test(NAME test_struct_size SOURCES test_struct_size.c LIBS fp8moe_test_baseline LABELS abi TIMEOUT 300)

# ---- fp8moe-info: text, JSON (validated by python3 -m json.tool), default loading, a bad path ----
if(TARGET fp8moe-info)
  # $0 tool, $1 library, $2 test name; then patterns the output must contain
  set(_fp8moe_grep_checks "tool=$0; lib=$1; name=$2; shift 2; out=$(\"$tool\" \${lib:+--library \"$lib\"}); rc=$?; \
printf '%s\\n' \"$out\"; p=0; f=0; if [ $rc -eq 0 ]; then p=$((p+1)); else f=$((f+1)); echo \"exit status $rc\"; fi; \
for pat in \"$@\"; do if grep -q -- \"$pat\" <<<\"$out\"; then p=$((p+1)); else f=$((f+1)); \
echo \"missing: $pat\"; fi; done; echo \"$name: $p passed, $f failed\"; [ $f -eq 0 ]")
  add_test(NAME fp8moe_info_text
           COMMAND bash -c "${_fp8moe_grep_checks}" $<TARGET_FILE:fp8moe-info> $<TARGET_FILE:fp8moe>
                   fp8moe_info_text "DEEPSEEK_V3 (id 2):" "FP8_BLOCK128 (id 1):" "agreed_minor: 0" "max_top_k:"
                   "dtypes: float32, bfloat16, float16" "cuda:" "cpu:")
  # no --library: the SONAME if installed, else the build tree's copy
  add_test(NAME fp8moe_info_default
           COMMAND bash -c "${_fp8moe_grep_checks}" $<TARGET_FILE:fp8moe-info> "" fp8moe_info_default
                   "found_by: " "version: ${PROJECT_VERSION}")
  add_test(NAME fp8moe_info_bad_library
           COMMAND bash -c "out=$(\"$0\" --library /nonexistent/libfp8moe.so.1 2>&1); rc=$?; printf '%s\\n' \"$out\"; \
if [ $rc -eq 1 ] && grep -q 'cannot load' <<<\"$out\"; then echo 'fp8moe_info_bad_library: 1 passed, 0 failed'; \
else echo 'fp8moe_info_bad_library: 0 passed, 1 failed'; exit 1; fi" $<TARGET_FILE:fp8moe-info>)
  set_tests_properties(fp8moe_info_text fp8moe_info_default fp8moe_info_bad_library PROPERTIES LABELS abi TIMEOUT 60)
  if(Python3_Interpreter_FOUND)
    set(_fp8moe_info_json ${CMAKE_CURRENT_BINARY_DIR}/fp8moe_info.json)
    set(_fp8moe_info_py "import json,sys\n\
d = json.load(open(sys.argv[1]))\n\
caps = d['capabilities']\n\
checks = [\n\
  [r['name'] for r in caps['routing_methods']].count('DEEPSEEK_V3') == 1,\n\
  [r['name'] for r in caps['quant_formats']].count('FP8_BLOCK128') == 1,\n\
  len(caps['arguments']) >= 16 and all(len(a['dtypes']) > 0 for a in caps['arguments']),\n\
  caps['limits']['max_top_k'] > 0,\n\
  any(b['name'] == 'cpu' and b['available'] for b in d['backends']),\n\
  d['abi']['major'] == 1 and isinstance(d['library']['path'], str),\n\
]\n\
failed = checks.count(False)\n\
print('fp8moe_info_json: %d passed, %d failed' % (len(checks) - failed, failed))\n\
sys.exit(1 if failed else 0)\n")
    add_test(NAME fp8moe_info_json
             COMMAND bash -c "\"$0\" --json --library \"$1\" > \"$2\" && \"$3\" -m json.tool \"$2\" > /dev/null \
&& \"$3\" -c \"$4\" \"$2\""
                     $<TARGET_FILE:fp8moe-info> $<TARGET_FILE:fp8moe> ${_fp8moe_info_json} ${Python3_EXECUTABLE}
                     "${_fp8moe_info_py}")
    set_tests_properties(fp8moe_info_json PROPERTIES LABELS abi TIMEOUT 60)
  endif()
endif()

# ---- the example host ----
if(TARGET fp8moe_example_deepseek)
  add_test(NAME example_deepseek COMMAND fp8moe_example_deepseek $<TARGET_FILE:fp8moe>)
  add_test(NAME example_deepseek_auto COMMAND fp8moe_example_deepseek --backend auto $<TARGET_FILE:fp8moe>)
  set_tests_properties(example_deepseek example_deepseek_auto PROPERTIES LABELS abi TIMEOUT 300)
endif()
# Every struct_size from 0 to sizeof + 64 for every struct of the ABI (issue 11: partial fields).
fp8moe_add_test(NAME test_struct_size_bytes SOURCES test_struct_size_bytes.c LIBS fp8moe_test_baseline LABELS abi
                TIMEOUT 300)
# Address overflow, overlapping and aliasing outputs, empty tensors with any strides (issue 11).
fp8moe_add_test(NAME test_hostile_tensors SOURCES test_hostile_tensors.c LIBS fp8moe_test_baseline LABELS abi
                TIMEOUT 120)
# 1,000 dlopen/dlclose cycles: no growth of RSS, threads or fds; live contexts shut down at unload (issue 11).
fp8moe_add_test(NAME test_unload SOURCES test_unload.c LABELS abi ARGS 1000 TIMEOUT 300)
