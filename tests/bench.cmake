# fp8moe-bench's own tests (docs/PERFORMANCE.md): the GPU-free core everywhere; the bench itself on a GPU
# (label `gpu`, skipped with 77 without one): a short run that must pass its CPU check, a paired A/B run (B: a second
# context of the same library with FALLBACK "l", so both its capture and its check run), and a run with a planted
# wrong scale that must fail it.
if(TARGET fp8moe_bench_core)
  add_executable(test_bench_units ${PROJECT_SOURCE_DIR}/bench/test_bench_units.c)
  target_compile_options(test_bench_units PRIVATE ${FP8MOE_C_WARNINGS})
  target_link_libraries(test_bench_units PRIVATE fp8moe_bench_core)
  add_test(NAME test_bench_units COMMAND test_bench_units --json ${CMAKE_CURRENT_BINARY_DIR}/bench_sample.json)
  set_tests_properties(test_bench_units PROPERTIES FIXTURES_SETUP bench_sample_json)
  find_package(Python3 COMPONENTS Interpreter)
  if(Python3_Interpreter_FOUND)
    add_test(NAME test_bench_json_schema
             COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/bench/bench_report.py selftest
                     ${CMAKE_CURRENT_BINARY_DIR}/bench_sample.json)
    set_tests_properties(test_bench_json_schema PROPERTIES FIXTURES_REQUIRED bench_sample_json)
  endif()
endif()

if(TARGET fp8moe-bench)
  set(_bench_quick --shape qwen3-30b-a3b --tokens 1,64 --replays 5 --warmup 1 --no-rooflines --check-tokens 8)
  add_test(NAME bench_gpu_smoke COMMAND fp8moe-bench ${_bench_quick} --stages)
  add_test(NAME bench_gpu_ab_smoke COMMAND fp8moe-bench ${_bench_quick} --ab-env l)
  add_test(NAME bench_gpu_planted_wrong_scale
           COMMAND sh -c "out=$(\"$0\" \"$@\"); rc=$?; printf '%s\\n' \"$out\" | grep -E 'CHECK FAILED|skipped|points'; [ $rc -eq 77 ] && exit 77; [ $rc -eq 1 ]"
                   $<TARGET_FILE:fp8moe-bench> ${_bench_quick} --plant-wrong-scale)
  set_tests_properties(bench_gpu_smoke bench_gpu_ab_smoke bench_gpu_planted_wrong_scale PROPERTIES
                       LABELS gpu SKIP_RETURN_CODE 77 TIMEOUT 300
                       ENVIRONMENT "FP8MOE_LIBRARY=$<TARGET_FILE:fp8moe>")
endif()

# tools/route_replay on the CPU backend (no GPU): the bench's routing of two points, counted as the stream GEMMs'
# split rules read it, against the counts the bench's GPU runs reported (kimi-k2 skewed T = 512: 211 pair entries of
# 117 experts; docs/GPU.md "Rounds and bandwidth", "Balanced rounds"), and at deepseek-v3 skewed T = 256 the routed
# rows, the 64-row tiles and the rows computed per routed row by both tile heights (docs/GPU.md "Padding rows").
if(TARGET route_replay)
  add_test(NAME route_replay_counts
           COMMAND sh -c "out=$(\"$0\" --shape kimi-k2,deepseek-v3 --tokens 256,512) || exit 1; \
printf '%s\\n' \"$out\"; printf '%s\\n' \"$out\" | grep -q '^kimi-k2 block skewed 512 117 328 211 ' && \
printf '%s\\n' \"$out\" | grep -q '^deepseek-v3 block skewed 256 96 191 135 1.99 1.41 2048 114 3.562 1.492$'"
           $<TARGET_FILE:route_replay>)
  set_tests_properties(route_replay_counts PROPERTIES TIMEOUT 120
                       ENVIRONMENT "FP8MOE_LIBRARY=$<TARGET_FILE:fp8moe>")
endif()
