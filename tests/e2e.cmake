# Numeric suites: conversions (host units), CPU end-to-end against the float64 reference, regression cases
# and thread determinism. fp8moe_test_ref (ref64 + problem generation + checks) is a library so the GPU
# suites can compare against the same reference: link it with `LIBS ${FP8MOE_TEST_REF_LIBRARY}`.
find_package(Threads REQUIRED)

add_library(fp8moe_test_ref STATIC
  ${CMAKE_CURRENT_LIST_DIR}/ref64.c
  ${CMAKE_CURRENT_LIST_DIR}/problem_gen.c
  ${CMAKE_CURRENT_LIST_DIR}/e2e_check.c)
target_compile_options(fp8moe_test_ref PRIVATE ${FP8MOE_C_WARNINGS})
target_link_libraries(fp8moe_test_ref PUBLIC fp8moe_test_host m)
set(FP8MOE_TEST_REF_LIBRARY fp8moe_test_ref)

# Level 1 host unit: the one test that includes src/ (numeric_internal.h), checked against brute force.
fp8moe_add_test(NAME test_conversions SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_conversions.c
                LIBS fp8moe_test_ref TIMEOUT 60)
target_include_directories(test_conversions PRIVATE ${PROJECT_SOURCE_DIR}/src)

fp8moe_add_test(NAME test_cpu_e2e SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cpu_e2e.c
                LIBS fp8moe_test_ref TIMEOUT 240)
fp8moe_add_test(NAME test_regressions SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_regressions.c
                LIBS fp8moe_test_ref TIMEOUT 120)
fp8moe_add_test(NAME test_threads SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_threads.c
                LIBS fp8moe_test_ref Threads::Threads TIMEOUT 120)

# The shared routing formulation (src/routing_math.h) against float64: exp, sigmoid, softmax sums.
fp8moe_add_test(NAME test_routing_math SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_routing_math.c TIMEOUT 120)
target_include_directories(test_routing_math PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_options(test_routing_math PRIVATE -ffp-contract=off)

# The quantization geometry rows of the contract table (internal; contract.c compiled in).
fp8moe_add_test(NAME test_quant_geometry SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_quant_geometry.c
                ${PROJECT_SOURCE_DIR}/src/contract.c ${PROJECT_SOURCE_DIR}/src/tensor.c TIMEOUT 60)
target_include_directories(test_quant_geometry PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/abi)
