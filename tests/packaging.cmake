# Packaging and ABI-stability tests (label `packaging`; the ABI ones also `abi`). They skip (exit 77) only when
# a packaging tool is missing; CI installs: rpm rpm2cpio cpio pkgconf dpkg-dev file binutils abigail-tools.
set(_fp8moe_pkg_tests "${CMAKE_CURRENT_SOURCE_DIR}/packaging")
set(_fp8moe_pkg_work "${CMAKE_CURRENT_BINARY_DIR}/packaging")
set(_fp8moe_has_info 0)
if(TARGET fp8moe-info)
  set(_fp8moe_has_info 1)
endif()

# A sanitizer build links libasan/libubsan: it is not something to package.
if(NOT FP8MOE_SANITIZE)
  add_test(NAME packaging_deb
    COMMAND bash "${_fp8moe_pkg_tests}/check_deb.sh" "${PROJECT_BINARY_DIR}" "${PROJECT_SOURCE_DIR}"
            "${_fp8moe_pkg_work}/deb" "${CMAKE_C_COMPILER}" "${CMAKE_COMMAND}" "${CMAKE_CPACK_COMMAND}"
            "${PROJECT_VERSION}" "${FP8MOE_SOVERSION}" "${_fp8moe_has_info}")
  add_test(NAME packaging_rpm
    COMMAND bash "${_fp8moe_pkg_tests}/check_rpm.sh" "${PROJECT_BINARY_DIR}" "${PROJECT_SOURCE_DIR}"
            "${_fp8moe_pkg_work}/rpm" "${CMAKE_C_COMPILER}" "${CMAKE_CPACK_COMMAND}"
            "${PROJECT_VERSION}" "${FP8MOE_SOVERSION}" "${_fp8moe_has_info}")
  set_tests_properties(packaging_deb packaging_rpm PROPERTIES LABELS "packaging" SKIP_RETURN_CODE 77 TIMEOUT 300)
endif()

# The ABI gate: the fresh library against the committed ABI 1.0 baseline (needs -g: RelWithDebInfo/Debug).
add_test(NAME packaging_abi_gate
  COMMAND bash "${PROJECT_SOURCE_DIR}/packaging/abi/abi_gate.sh" check "${PROJECT_SOURCE_DIR}/packaging/abi"
          "${PROJECT_SOURCE_DIR}/abi" "$<TARGET_FILE:fp8moe>")

# The gate's own test: broken variants must fail it, an extended one must pass. The fake plugins get the
# library's version script, so symbol versions match the baseline.
if(NOT COMMAND fp8moe_generate_version_script)
  include("${PROJECT_SOURCE_DIR}/cmake/version_script.cmake")
endif()
fp8moe_generate_version_script("${PROJECT_SOURCE_DIR}/plugin.def" "${_fp8moe_pkg_work}/abi_fake_plugin.map")
add_test(NAME packaging_abi_gate_selftest
  COMMAND bash "${_fp8moe_pkg_tests}/abi_selftest.sh" "${PROJECT_SOURCE_DIR}" "${_fp8moe_pkg_work}/abi_selftest"
          "${CMAKE_C_COMPILER}" "${_fp8moe_pkg_work}/abi_fake_plugin.map")
set_tests_properties(packaging_abi_gate packaging_abi_gate_selftest PROPERTIES
  LABELS "packaging;abi" SKIP_RETURN_CODE 77 TIMEOUT 300)

# Hardening (cmake/hardening.cmake) on the library and the tools as built: RELRO, BIND_NOW, no executable stack,
# stack protector, FORTIFY, CET landing pads, PIE. Not for sanitizer or Debug builds, which are built without
# FORTIFY on purpose. The self-test shows that the check refuses a library built without the flags.
if(NOT FP8MOE_SANITIZE AND NOT CMAKE_BUILD_TYPE STREQUAL "Debug")
  set(_fp8moe_hardened_files "$<TARGET_FILE:fp8moe>")
  foreach(_exe fp8moe-info fp8moe_example_deepseek)
    if(TARGET ${_exe})
      list(APPEND _fp8moe_hardened_files "$<TARGET_FILE:${_exe}>")
    endif()
  endforeach()
  add_test(NAME packaging_hardening
    COMMAND bash "${_fp8moe_pkg_tests}/check_hardening.sh" check ${_fp8moe_hardened_files})
  add_test(NAME packaging_hardening_selftest
    COMMAND bash "${_fp8moe_pkg_tests}/check_hardening.sh" selftest "${CMAKE_C_COMPILER}"
            "${_fp8moe_pkg_work}/hardening_selftest")
  set_tests_properties(packaging_hardening packaging_hardening_selftest PROPERTIES LABELS "packaging" TIMEOUT 300)
endif()
