# Hardening: the flags a distribution expects of a library it ships (Debian's dpkg-buildflags "hardening=+all",
# Fedora's redhat-hardened-cc1/ld), applied to every target of the project, host C and nvcc's host pass alike.
#
#   -fstack-protector-strong     canaries in functions with arrays or address-taken locals
#   -fstack-clash-protection     probes large stack allocations page by page
#   -fcf-protection=full         x86 CET (IBT + shadow stack) landing pads, where the compiler has it
#   -D_FORTIFY_SOURCE=2          glibc's checked string/stdio functions (__*_chk); needs optimization, so only
#                                in optimized, unsanitized builds: glibc warns under -O0 (an error with -Werror)
#                                and ASan already checks the same calls
#   -z relro -z now              full RELRO: the GOT is read-only after relocation, all symbols bound at load
#   -z noexecstack               a non-executable stack even if some linked object (a static archive, an nvcc
#                                object) lacks a .note.GNU-stack
#   PIE for executables          (CheckPIESupported)
#
# tests/packaging/check_hardening.sh checks the result on the built library and tools (CTest packaging_hardening).
option(FP8MOE_HARDEN "Compile and link with hardening flags (RELRO, BIND_NOW, stack protector, FORTIFY, CET)" ON)

if(NOT FP8MOE_HARDEN)
  message(STATUS "fp8moe: hardening flags OFF")
  return()
endif()

include(CheckCCompilerFlag)
include(CheckPIESupported)
check_pie_supported(LANGUAGES C)

set(_fp8moe_harden_cflags -fstack-protector-strong)
foreach(_flag -fstack-clash-protection -fcf-protection=full)
  string(MAKE_C_IDENTIFIER "FP8MOE_CC_HAS${_flag}" _var)
  check_c_compiler_flag(${_flag} ${_var})
  if(${_var})
    list(APPEND _fp8moe_harden_cflags ${_flag})
  endif()
endforeach()

add_compile_options("$<$<COMPILE_LANGUAGE:C>:${_fp8moe_harden_cflags}>")
if(NOT FP8MOE_SANITIZE)
  # -U first: the compiler or the environment's CPPFLAGS may already define it (to another level).
  add_compile_options("$<$<AND:$<COMPILE_LANGUAGE:C>,$<NOT:$<CONFIG:Debug>>>:-U_FORTIFY_SOURCE;-D_FORTIFY_SOURCE=2>")
endif()

# nvcc compiles the host side of each .cu file with the host compiler: give it the same code-generation flags.
# (FORTIFY is left out there: kernels' host stubs call no libc string functions, and the define would also reach
# the device pass.)
string(REPLACE ";" "," _fp8moe_harden_xcompiler "${_fp8moe_harden_cflags}")
add_compile_options("$<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=${_fp8moe_harden_xcompiler}>")

add_link_options(LINKER:-z,relro LINKER:-z,now LINKER:-z,noexecstack)
string(REPLACE ";" " " _fp8moe_harden_text "${_fp8moe_harden_cflags}")
message(STATUS "fp8moe: hardening ${_fp8moe_harden_text}, FORTIFY_SOURCE=2 in optimized builds, "
               "-z relro -z now -z noexecstack")
