# Read by cpack for every generator (CPACK_PROJECT_CONFIG_FILE).
# CMake's CPackRPM probes weak-dependency support with `${RPM_EXECUTABLE} --suggests` but never defines
# RPM_EXECUTABLE, so without this the Suggests: tag is dropped with a warning.
if(CPACK_GENERATOR STREQUAL "RPM" AND NOT RPM_EXECUTABLE)
  find_program(RPM_EXECUTABLE rpm)
endif()

# CPackDeb prepends CPACK_PACKAGE_DESCRIPTION_SUMMARY to every component's description; each component's
# description already starts with its own synopsis line (packaging/CMakeLists.txt).
if(CPACK_GENERATOR STREQUAL "DEB")
  unset(CPACK_PACKAGE_DESCRIPTION_SUMMARY)
endif()
