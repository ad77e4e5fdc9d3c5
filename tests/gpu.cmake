# GPU suites (label `gpu`): the CUDA backend against the CPU backend through the public API. Each exits 77
# (reported as skipped) when backend_info says the CUDA backend is unavailable, e.g. on CI without a GPU.
# The test hosts link cudart (they allocate device memory); the library itself never needs it at load.
if(FP8MOE_WITH_CUDA AND TARGET fp8moe_test_ref)
  add_library(fp8moe_test_gpu STATIC ${CMAKE_CURRENT_LIST_DIR}/gpu_util.c)
  target_compile_options(fp8moe_test_gpu PRIVATE ${FP8MOE_C_WARNINGS})
  target_link_libraries(fp8moe_test_gpu PUBLIC fp8moe_test_host CUDA::cudart m)

  fp8moe_add_test(NAME test_gpu_sweep SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gpu_sweep.c
                  LIBS fp8moe_test_ref fp8moe_test_gpu LABELS gpu TIMEOUT 600)
  # The same sweep with the sm90 GEMMs' A/B variants (FP8MOE_CUDA_GEMM_FALLBACK, read at context creation;
  # docs/GPU.md): GEMM2 column-block major with the serial main loop, the early-release main loop, the
  # ungrouped item orders of before (GEMM1 column-block major, GEMM2 tile major), the 2-CTA cluster
  # kernels with TMA multicast, and both GEMMs' groups of before sessions 46–48 and 55 (GEMM2 by GEMM1's rule, plain
  # edges in both: docs/GPU.md "GEMM2's group size", "Expert-aligned groups"), and the pair kernel's claims split by
  # L2 partition ("P", opt-in: docs/GPU.md "L2 partitions"). The quick subset: each variant is a different schedule
  # of the same arithmetic, and the full sweep of the default already costs minutes of device time.
  foreach(_variant qo r u m 04569A P)
    add_test(NAME test_gpu_sweep_sm90_${_variant} COMMAND test_gpu_sweep --quick)
    set_tests_properties(test_gpu_sweep_sm90_${_variant} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS gpu
                         ENVIRONMENT "FP8MOE_LIBRARY=$<TARGET_FILE:fp8moe>;FP8MOE_CUDA_GEMM_FALLBACK=${_variant}")
  endforeach()
  # The decode GEMMs' switches: "k" runs every decode row through the register-path pair (kernels/gemm_decode.cu)
  # and 1–16 rows per expert through mma.sync; "jl" the decode rows through the stream pair (the size rule off:
  # the sweep's experts are below it) and 1–16 rows per expert (the sweep's table rows at T = 37–41 over 16
  # experts) through mma.sync, where the default takes the stream pair; "kD" the register-path pair with GEMM1's
  # dense variant (4 CTAs per SM, balanced rounds) at every decode row, which the default takes only by its rule;
  # "R" the stream GEMMs' stream-K where the default splits in rounds (case (h); docs/GPU.md "Rounds and bandwidth").
  # "W" those rounds whole (the default balances them: one full round on the grid, the rest by stream-K; docs/GPU.md
  # "Balanced rounds"), "V" balanced by the rounds' rule only (not also by entries an expert).
  foreach(_variant k jl kD R W V)
    add_test(NAME test_gpu_sweep_stream_${_variant} COMMAND test_gpu_sweep --quick)
    set_tests_properties(test_gpu_sweep_stream_${_variant} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS gpu
                         ENVIRONMENT "FP8MOE_LIBRARY=$<TARGET_FILE:fp8moe>;FP8MOE_CUDA_GEMM_FALLBACK=${_variant}")
  endforeach()
  # The plan's size rule off ("l", src/cuda/cuda_plan.c k_size_rule): the full sweep with the stream pair at every
  # decode row (the sweep's experts are below the rule, so the default runs the register pair there) and the
  # 128-row GEMM1 at every large-M row (the default takes 64-row items below 256 rows per expert, 128 at H ≥ 7168).
  add_test(NAME test_gpu_sweep_sizes_l COMMAND test_gpu_sweep)
  set_tests_properties(test_gpu_sweep_sizes_l PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS gpu
                       ENVIRONMENT "FP8MOE_LIBRARY=$<TARGET_FILE:fp8moe>;FP8MOE_CUDA_GEMM_FALLBACK=l")
  # And with the routing's and the prologue's slot list's previous instruction sequences (FALLBACK 'w', the A/B
  # switch of the small-T critical-path rework; docs/GPU.md "Routing's critical path").
  add_test(NAME test_gpu_sweep_route_v1 COMMAND test_gpu_sweep --quick)
  set_tests_properties(test_gpu_sweep_route_v1 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS gpu
                       ENVIRONMENT "FP8MOE_LIBRARY=$<TARGET_FILE:fp8moe>;FP8MOE_CUDA_GEMM_FALLBACK=w")
  # The 64-row GEMM1 items (FALLBACK=v switches off the 128-row GEMM1, the default from 256 rows per expert; the
  # items run on the alternating pair kernel, kernels/gemm/gemm1_wgmma128_sm90.cu ALT): every large-M plan row in
  # full (every format, activation, gate/up order, requantization mode, the input-side token weight, experts of
  # one tile and odd tile counts, an expert-parallel shard, several item groups) and a graph capture at large M. The
  # default --large sweep (T = 2400: 600 rows per expert) runs the same rows through the 128-row pairs; H = 256
  # rows (2 stages per item) included.
  add_test(NAME test_gpu_sweep_sm90_v COMMAND test_gpu_sweep --large)
  set_tests_properties(test_gpu_sweep_sm90_v PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS gpu
                       ENVIRONMENT "FP8MOE_LIBRARY=$<TARGET_FILE:fp8moe>;FP8MOE_CUDA_GEMM_FALLBACK=v")
  # The pair items' A by TMA from expert-sorted rows (opt-in "7", docs/GPU.md "Expert-sorted activations": the input
  # quantization writes each token's codes into its slots' rows, in y's bytes): every large-M plan row on the 128-row
  # pairs (--large), and with the size rules off ("7l") the full sweep, where the pairs run from 2 tiles per expert.
  add_test(NAME test_gpu_sweep_sm90_7 COMMAND test_gpu_sweep --large)
  set_tests_properties(test_gpu_sweep_sm90_7 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS gpu
                       ENVIRONMENT "FP8MOE_LIBRARY=$<TARGET_FILE:fp8moe>;FP8MOE_CUDA_GEMM_FALLBACK=7")
  add_test(NAME test_gpu_sweep_sm90_7l COMMAND test_gpu_sweep)
  set_tests_properties(test_gpu_sweep_sm90_7l PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS gpu
                       ENVIRONMENT "FP8MOE_LIBRARY=$<TARGET_FILE:fp8moe>;FP8MOE_CUDA_GEMM_FALLBACK=7l")
  # The 64-row GEMM1 kernel itself (gemm1_wgmma_sm90.cu; "g" takes it instead of the alternating pair kernel, the
  # default for 64-row items since 2026-12-03, docs/GPU.md "Alternating 64-row items"): with "v" every large-M row.
  add_test(NAME test_gpu_sweep_sm90_vg COMMAND test_gpu_sweep --large)
  set_tests_properties(test_gpu_sweep_sm90_vg PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS gpu
                       ENVIRONMENT "FP8MOE_LIBRARY=$<TARGET_FILE:fp8moe>;FP8MOE_CUDA_GEMM_FALLBACK=vg")
  # The pair kernel's static item walk ("y": CTA b takes items b, b + grid, …, where the default claims them in
  # order from a counter in the workspace's scalar words; docs/GPU.md "Claimed items"): the large-M sweep on the
  # 128-row pairs ("y") and on the alternating 64-row items ("vy").
  # And the pair items in 2-CTA clusters with W13 multicast (opt-in "e", docs/GPU.md "2-CTA pair clusters"), with
  # claimed units ("e") and with the static walk ("ey").
  foreach(_variant y vy e ey)
    add_test(NAME test_gpu_sweep_sm90_${_variant} COMMAND test_gpu_sweep --large)
    set_tests_properties(test_gpu_sweep_sm90_${_variant} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS gpu
                         ENVIRONMENT "FP8MOE_LIBRARY=$<TARGET_FILE:fp8moe>;FP8MOE_CUDA_GEMM_FALLBACK=${_variant}")
  endforeach()
  # The 128-row GEMM2 (opt-in "i", kernels/gemm/gemm2_wgmma128_sm90.cu; docs/GPU.md "128-row GEMM2 items"): the
  # same large-M sweep (every format, experts of one tile and odd tile counts, an expert-parallel shard, several
  # item groups, a graph capture) against the CPU backend, with the 128-row GEMM1 (the default there) before it.
  add_test(NAME test_gpu_sweep_sm90_i COMMAND test_gpu_sweep --large)
  set_tests_properties(test_gpu_sweep_sm90_i PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS gpu
                       ENVIRONMENT "FP8MOE_LIBRARY=$<TARGET_FILE:fp8moe>;FP8MOE_CUDA_GEMM_FALLBACK=i")
  # CPU and CUDA routing weights bit for bit, >= 10^5 logit rows per method (src/routing_math.h).
  if(TARGET fp8moe_test_baseline)
    fp8moe_add_test(NAME test_gpu_routing_bits SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gpu_routing_bits.c
                    LIBS fp8moe_test_baseline fp8moe_test_gpu LABELS gpu TIMEOUT 600)
    # The same with the routing's previous instruction sequence (FALLBACK 'w', the A/B switch; docs/GPU.md
    # "Routing's critical path"): both sequences must give the CPU's bits.
    add_test(NAME test_gpu_routing_bits_v1 COMMAND test_gpu_routing_bits)
    set_tests_properties(test_gpu_routing_bits_v1 PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS gpu
                         ENVIRONMENT "FP8MOE_LIBRARY=$<TARGET_FILE:fp8moe>;FP8MOE_CUDA_GEMM_FALLBACK=w")
    # And without DeepSeek-V3's filtered selection (FALLBACK 'f'; kernels/routing_filter.h): every token on the exact
    # selection of the current sequence, which the default runs only for the tokens the filter declines.
    add_test(NAME test_gpu_routing_bits_f COMMAND test_gpu_routing_bits 40000)
    set_tests_properties(test_gpu_routing_bits_f PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS gpu
                         ENVIRONMENT "FP8MOE_LIBRARY=$<TARGET_FILE:fp8moe>;FP8MOE_CUDA_GEMM_FALLBACK=f")
  endif()
  # The fused small-T prologue against the separate launches (workspace slices located by cuda_layout.c).
  fp8moe_add_test(NAME test_gpu_prologue SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gpu_prologue.c
                  ${PROJECT_SOURCE_DIR}/src/cuda/cuda_layout.c ${PROJECT_SOURCE_DIR}/src/cuda/cuda_plan.c
                  ${PROJECT_SOURCE_DIR}/src/contract.c ${PROJECT_SOURCE_DIR}/src/tensor.c
                  LIBS fp8moe_test_ref fp8moe_test_gpu LABELS gpu TIMEOUT 600)
  target_include_directories(test_gpu_prologue PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/src/cuda
                             ${PROJECT_SOURCE_DIR}/kernels ${CUDAToolkit_INCLUDE_DIRS})
  if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/test_gpu_models.c)
    fp8moe_add_test(NAME test_gpu_models SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gpu_models.c
                    LIBS fp8moe_test_gpu Threads::Threads LABELS gpu TIMEOUT 600)
  endif()
endif()

# The kernel plan of the CUDA backend as data: a host unit (cuda_plan.c compiled in, no CUDA library, no GPU).
if(FP8MOE_WITH_CUDA)
  fp8moe_add_test(NAME test_cuda_plan SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_cuda_plan.c
                  ${PROJECT_SOURCE_DIR}/src/cuda/cuda_plan.c ${PROJECT_SOURCE_DIR}/src/cuda/cuda_layout.c
                  ${PROJECT_SOURCE_DIR}/src/contract.c
                  ${PROJECT_SOURCE_DIR}/src/tensor.c TIMEOUT 60)
  target_include_directories(test_cuda_plan PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/src/cuda
                             ${PROJECT_SOURCE_DIR}/kernels ${CUDAToolkit_INCLUDE_DIRS})
  # The stream GEMMs' unit-aligned CTA count (kernels/gemm/stream_split.h) on the host.
  fp8moe_add_test(NAME test_stream_split SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_stream_split.c TIMEOUT 60)
  target_include_directories(test_stream_split PRIVATE ${PROJECT_SOURCE_DIR}/kernels)
  # The requantization's division through the scale's reciprocal (kernels/scale_div.h): the same e4m3 codes as x / s.
  fp8moe_add_test(NAME test_scale_div SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_scale_div.c TIMEOUT 60)
  target_include_directories(test_scale_div PRIVATE ${PROJECT_SOURCE_DIR}/kernels ${PROJECT_SOURCE_DIR}/src
                             ${PROJECT_SOURCE_DIR}/abi)
  target_link_libraries(test_scale_div PRIVATE m)
  # The filtered selection of DeepSeek-V3 routing (kernels/routing_filter.h): its decisions on keys off by up to the
  # assumed bound select what the exact keys select.
  fp8moe_add_test(NAME test_routing_filter SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_routing_filter.c TIMEOUT 120)
  target_include_directories(test_routing_filter PRIVATE ${PROJECT_SOURCE_DIR}/kernels ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(test_routing_filter PRIVATE -ffp-contract=off)
  target_link_libraries(test_routing_filter PRIVATE m)
  # Device code compiled for the host and run on an emulated warp (tests/routing_emu; C++ for the kernel headers): the
  # routing kernel's own code (kernels/routing_token.cuh) against the CPU backend bit for bit, and the permutation's
  # per-warp passes (kernels/permute_segment.cuh) and the prologue's slot list (kernels/slot_list.cuh, on an emulated
  # block) against a CPU stable counting sort, and the stream GEMMs' count of experts (kernels/gemm/stream_experts.cuh,
  # on an emulated block) against a plain count. Their logic in every build.
  enable_language(CXX)
  # the headers' #pragma unroll is for nvcc; GCC cannot see that route_token reads the bias only where it loaded it
  set(_fp8moe_emu_options -Wall -Wextra -Werror -Wno-unknown-pragmas -Wno-maybe-uninitialized -ffp-contract=off)
  foreach(_emu routing permute slot_list stream_experts)
    add_executable(test_${_emu}_emu ${CMAKE_CURRENT_LIST_DIR}/test_${_emu}_emu.cpp
                   ${CMAKE_CURRENT_LIST_DIR}/routing_emu/warp_emu.cpp)
    target_include_directories(test_${_emu}_emu PRIVATE ${CMAKE_CURRENT_LIST_DIR}/routing_emu
                               ${PROJECT_SOURCE_DIR}/kernels ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/abi
                               ${CUDAToolkit_INCLUDE_DIRS})
    set_target_properties(test_${_emu}_emu PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON CXX_EXTENSIONS OFF)
    target_compile_options(test_${_emu}_emu PRIVATE ${_fp8moe_emu_options})
    add_test(NAME test_${_emu}_emu COMMAND test_${_emu}_emu)
    set_tests_properties(test_${_emu}_emu PROPERTIES TIMEOUT 300)
  endforeach()
  target_link_libraries(test_permute_emu PRIVATE fp8moe_test_host)
  target_link_libraries(test_routing_emu PRIVATE fp8moe_test_baseline m) # the CPU backend through the API
  add_dependencies(test_routing_emu fp8moe)
  set_tests_properties(test_routing_emu PROPERTIES ENVIRONMENT "FP8MOE_LIBRARY=$<TARGET_FILE:fp8moe>")
endif()

# Both permutation paths against a CPU stable counting sort, bit for bit (kernel-level: links the kernel
# archive and the static CUDA runtime it was built with, and the kernel plan for run's chunk sizes).
if(FP8MOE_WITH_CUDA AND TARGET fp8moe_kernels)
  fp8moe_add_test(NAME test_gpu_permute SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_gpu_permute.c
                  ${PROJECT_SOURCE_DIR}/src/cuda/cuda_plan.c ${PROJECT_SOURCE_DIR}/src/contract.c
                  ${PROJECT_SOURCE_DIR}/src/tensor.c
                  LIBS fp8moe_kernels CUDA::cudart_static LABELS gpu TIMEOUT 300)
  target_include_directories(test_gpu_permute PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/src/cuda
                             ${PROJECT_SOURCE_DIR}/kernels ${CUDAToolkit_INCLUDE_DIRS})
endif()
