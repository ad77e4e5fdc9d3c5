# cpack_stage.cmake — run by cpack (CPACK_PRE_BUILD_SCRIPTS) after it has installed each component into
# ${CPACK_TEMPORARY_DIRECTORY}/<component>/usr and before it builds the packages: gives the staged files the
# layout of the generator's distribution, so that one build produces correct .deb and .rpm packages (the table
# is in packaging/CMakeLists.txt). Other generators (TGZ, ...) keep the plain install layout.
if(CPACK_GENERATOR STREQUAL "DEB")
  set(_layout deb)
  set(_libdir "${CPACK_FP8MOE_DEB_LIBDIR}")
  set(_library_mode OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ) # Debian policy 10.2: not executable
elseif(CPACK_GENERATOR STREQUAL "RPM")
  set(_layout rpm)
  set(_libdir "${CPACK_FP8MOE_RPM_LIBDIR}")
  # rpm derives Provides (the SONAME) only from executable ELF files
  set(_library_mode OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
else()
  return()
endif()
set(_layout_dir "${CPACK_FP8MOE_LAYOUT_DIR}/layout-${_layout}")
string(REGEX REPLACE "^/" "" _prefix "${CPACK_PACKAGING_INSTALL_PREFIX}")
find_program(_gzip gzip REQUIRED)

# _fp8moe_gzip(FILE): FILE.gz, compressed as Debian policy wants (-9, no name or time stamp in the header).
function(_fp8moe_gzip file)
  execute_process(COMMAND "${_gzip}" -9nf "${file}" RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gzip -9n ${file} failed")
  endif()
endfunction()

# _fp8moe_move_dir(ROOT FROM TO): moves ROOT/FROM to ROOT/TO (either may contain the other, e.g. lib and
# lib/x86_64-linux-gnu) and removes the directories FROM leaves empty.
function(_fp8moe_move_dir root from to)
  set(parking "${root}/.fp8moe-parking")
  file(RENAME "${root}/${from}" "${parking}")
  get_filename_component(dir "${root}/${from}" DIRECTORY)
  while(NOT dir STREQUAL root)
    file(GLOB left "${dir}/*")
    if(left)
      break()
    endif()
    file(REMOVE_RECURSE "${dir}") # empty
    get_filename_component(dir "${dir}" DIRECTORY)
  endwhile()
  get_filename_component(parent "${root}/${to}" DIRECTORY)
  file(MAKE_DIRECTORY "${parent}")
  file(RENAME "${parking}" "${root}/${to}")
endfunction()

foreach(_component runtime tools dev)
  set(_root "${CPACK_TEMPORARY_DIRECTORY}/${_component}/${_prefix}")
  if(NOT IS_DIRECTORY "${_root}")
    continue()
  endif()
  string(TOUPPER "${_component}" _C)
  if(_layout STREQUAL "deb")
    set(_package "${CPACK_DEBIAN_${_C}_PACKAGE_NAME}")
  else()
    set(_package "${CPACK_RPM_${_C}_PACKAGE_NAME}")
  endif()

  # 1. the library directory of the layout
  if(NOT CPACK_FP8MOE_INSTALL_LIBDIR STREQUAL _libdir AND IS_DIRECTORY "${_root}/${CPACK_FP8MOE_INSTALL_LIBDIR}")
    _fp8moe_move_dir("${_root}" "${CPACK_FP8MOE_INSTALL_LIBDIR}" "${_libdir}")
  endif()

  # 2. the layout's own .pc and CMake package files (their relative paths depend on the libdir's depth)
  #    (COPY_FILE, not COPY: COPY skips a destination with the same time stamp, and both copies are written by
  #    the same configure run)
  if(EXISTS "${_root}/${_libdir}/pkgconfig/fp8moe.pc")
    file(COPY_FILE "${_layout_dir}/fp8moe.pc" "${_root}/${_libdir}/pkgconfig/fp8moe.pc")
    foreach(_file fp8moeConfig.cmake fp8moeConfigVersion.cmake)
      file(COPY_FILE "${_layout_dir}/${_file}" "${_root}/${_libdir}/cmake/fp8moe/${_file}")
    endforeach()
  endif()

  # 3. the library's mode
  file(GLOB _libraries "${_root}/${_libdir}/libfp8moe.so.${CPACK_FP8MOE_VERSION}")
  foreach(_library IN LISTS _libraries)
    file(CHMOD "${_library}" PERMISSIONS ${_library_mode})
  endforeach()

  # 4. the man page, compressed
  file(GLOB _man_pages "${_root}/${CPACK_FP8MOE_INSTALL_MANDIR}/man*/*.[1-9]")
  foreach(_page IN LISTS _man_pages)
    _fp8moe_gzip("${_page}")
  endforeach()

  # 5. the package's doc directory
  set(_doc "${_root}/share/doc/${_package}")
  file(MAKE_DIRECTORY "${_doc}")
  if(_layout STREQUAL "deb")
    file(COPY "${CPACK_FP8MOE_SOURCE_DIR}/packaging/debian/copyright" DESTINATION "${_doc}")
    file(COPY "${_layout_dir}/changelog.Debian" DESTINATION "${_doc}")
    _fp8moe_gzip("${_doc}/changelog.Debian")
    if(_component STREQUAL "runtime")
      file(COPY_FILE "${CPACK_FP8MOE_SOURCE_DIR}/CHANGELOG.md" "${_doc}/changelog")
      _fp8moe_gzip("${_doc}/changelog")
    endif()
  else()
    file(COPY "${CPACK_FP8MOE_SOURCE_DIR}/LICENSE" DESTINATION "${_doc}")
    if(_component STREQUAL "runtime")
      file(COPY "${CPACK_FP8MOE_SOURCE_DIR}/CHANGELOG.md" DESTINATION "${_doc}")
    endif()
  endif()
  file(GLOB_RECURSE _docs "${_doc}/*")
  file(CHMOD ${_docs} PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)

  # 6. the runtime .deb's Depends (CPack's own scan is off, see packaging/CMakeLists.txt): dpkg-shlibdeps on the
  #    staged library, as dh_shlibdeps would run it
  if(_layout STREQUAL "deb" AND _component STREQUAL "runtime")
    set(_work "${CPACK_TOPLEVEL_DIRECTORY}/fp8moe-shlibdeps")
    file(REMOVE_RECURSE "${_work}")
    file(WRITE "${_work}/debian/control" "")
    execute_process(COMMAND dpkg-shlibdeps -O "${_libraries}" WORKING_DIRECTORY "${_work}"
                    OUTPUT_VARIABLE _substvars RESULT_VARIABLE _rc ERROR_VARIABLE _err)
    string(REGEX MATCH "shlibs:Depends=([^\n]*)" _ "${_substvars}")
    if(NOT _rc EQUAL 0 OR NOT CMAKE_MATCH_1)
      message(FATAL_ERROR "dpkg-shlibdeps on ${_libraries} failed (${_rc}): ${_err}")
    endif()
    set(CPACK_DEBIAN_RUNTIME_PACKAGE_DEPENDS "${CMAKE_MATCH_1}")
    message(STATUS "fp8moe: ${_package} Depends: ${CMAKE_MATCH_1}")
  endif()
endforeach()
