# The first run (scripts/setup-and-run.sh): fp8moe-info --summary and the example host as a new user meets them.
# Label `abi` (they run everything through the public ABI, on the CPU without a GPU).
if(TARGET fp8moe-info AND TARGET fp8moe_example_deepseek)
  # expect_run NAME WANT_EXIT PATTERN... -- COMMAND...: the exit status and every pattern (grep -E) must match.
  set(_fp8moe_expect_run [=[
name=$0 want=$1; shift; patterns=(); while [ "$1" != "--" ]; do patterns+=("$1"); shift; done; shift
out=$("$@" 2>&1); rc=$?; printf '%s\n' "$out"; f=0
[ "$rc" = "$want" ] || { echo "exit status $rc, want $want"; f=1; }
for p in "${patterns[@]}"; do grep -Eq -- "$p" <<<"$out" || { echo "missing: /$p/"; f=1; }; done
echo "$name: $([ $f = 0 ] && echo passed || echo FAILED)"; exit $f]=])
  set(_example $<TARGET_FILE:fp8moe_example_deepseek>)
  set(_info $<TARGET_FILE:fp8moe-info>)

  # No argument: the build RPATH resolves the SONAME to the build's library; AUTO says which backend and why.
  add_test(NAME example_deepseek_default COMMAND bash -c "${_fp8moe_expect_run}" example_deepseek_default 0
    "^backend: (cpu|cuda) .*requested auto$" "sanity checks: [0-9]+ passed, 0 failed" "^run: [0-9.]+ ms" -- ${_example})
  add_test(NAME example_deepseek_help COMMAND bash -c "${_fp8moe_expect_run}" example_deepseek_help 0
    "^usage: .*--backend auto\\|cpu\\|cuda" -- ${_example} --help)
  add_test(NAME example_deepseek_bad_option COMMAND bash -c "${_fp8moe_expect_run}" example_deepseek_bad_option 2
    "^usage: " -- ${_example} --frobnicate)
  add_test(NAME fp8moe_info_summary COMMAND bash -c "${_fp8moe_expect_run}" fp8moe_info_summary 0
    "^library +fp8moe ${PROJECT_VERSION} \\(found by SONAME\\)$" "^ +/.*/libfp8moe\\.so\\.${PROJECT_VERSION}$"
    "^ABI +${FP8MOE_ABI_VERSION_MAJOR}\\.${FP8MOE_ABI_VERSION_MINOR} "
    "^backend +cpu +available: "
    "^backend +cuda +(available|unavailable|not compiled in):"
    "^AUTO +picks (cpu|cuda) " -- ${_info} --summary)
  set(_fp8moe_first_run_tests example_deepseek_default example_deepseek_help example_deepseek_bad_option
      fp8moe_info_summary)

  # --backend cuda: runs on a GPU; without one, refuses with the plugin's reason. Without a driver (no
  # libcuda.so.1 known to the loader) the reason must say exactly that, not cudart's "driver version is
  # insufficient".
  if(FP8MOE_WITH_CUDA)
    add_test(NAME example_deepseek_cuda COMMAND bash -c [=[
example=$0 info=$1
if "$info" --summary | grep -Eq '^backend +cuda +available'; then
  "$example" --backend cuda; exit
fi
out=$("$example" --backend cuda 2>&1); rc=$?; printf '%s\n' "$out"
[ $rc = 1 ] && grep -q 'backend unavailable' <<<"$out" || { echo "example_deepseek_cuda: FAILED (exit $rc)"; exit 1; }
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1 '; then
  grep -q 'no CUDA driver' <<<"$out" || { echo "example_deepseek_cuda: FAILED: no driver, not said so"; exit 1; }
fi
echo "example_deepseek_cuda: passed"]=] ${_example} ${_info})
    list(APPEND _fp8moe_first_run_tests example_deepseek_cuda)
  endif()
  set_tests_properties(${_fp8moe_first_run_tests} PROPERTIES LABELS abi TIMEOUT 300)
endif()

# The documented meaning of fp8moe_context_args.device_ordinal (abi/fp8moe.h).
fp8moe_add_test(NAME test_device_ordinal SOURCES test_device_ordinal.c LABELS abi TIMEOUT 60)
