# FindCAF.cmake -- locate the C++ Actor Framework 0.17 (Debian's libcaf-dev ships no CMake package
# config). Imported targets: CAF::core CAF::io CAF::test (header-only DSL) CAF::openssl (if found).
# Sets CAF_FOUND, CAF_VERSION, CAF_INCLUDE_DIR.
find_path(CAF_INCLUDE_DIR NAMES caf/config.hpp caf/all.hpp)

if(CAF_INCLUDE_DIR AND EXISTS "${CAF_INCLUDE_DIR}/caf/config.hpp")
  # config.hpp holds e.g. "#define CAF_VERSION 1706"
  file(STRINGS "${CAF_INCLUDE_DIR}/caf/config.hpp" _caf_ver_line REGEX "^#define CAF_VERSION [0-9]+")
  string(REGEX REPLACE "^#define CAF_VERSION ([0-9]+).*" "\\1" _caf_ver "${_caf_ver_line}")
  math(EXPR _caf_major "${_caf_ver} / 10000")
  math(EXPR _caf_minor "(${_caf_ver} / 100) % 100")
  math(EXPR _caf_patch "${_caf_ver} % 100")
  set(CAF_VERSION "${_caf_major}.${_caf_minor}.${_caf_patch}")
endif()

if(NOT CAF_FIND_COMPONENTS)
  set(CAF_FIND_COMPONENTS core)
endif()
foreach(_comp IN LISTS CAF_FIND_COMPONENTS)
  find_library(CAF_${_comp}_LIBRARY NAMES caf_${_comp})
  if(CAF_${_comp}_LIBRARY)
    set(CAF_${_comp}_FOUND TRUE)
  endif()
endforeach()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(CAF
  REQUIRED_VARS CAF_INCLUDE_DIR
  VERSION_VAR CAF_VERSION
  HANDLE_COMPONENTS)

# 0.18 changed inspect() and atoms; refuse it rather than fail deep inside a template.
if(CAF_FOUND AND CAF_VERSION VERSION_GREATER_EQUAL 0.18)
  message(FATAL_ERROR "kvactor needs CAF 0.17.x, found ${CAF_VERSION}")
endif()

if(CAF_FOUND)
  find_package(Threads REQUIRED)
  if(CAF_core_FOUND AND NOT TARGET CAF::core)
    add_library(CAF::core SHARED IMPORTED)
    set_target_properties(CAF::core PROPERTIES
      IMPORTED_LOCATION "${CAF_core_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${CAF_INCLUDE_DIR}"
      INTERFACE_LINK_LIBRARIES Threads::Threads)
  endif()
  if(CAF_io_FOUND AND NOT TARGET CAF::io)
    add_library(CAF::io SHARED IMPORTED)
    set_target_properties(CAF::io PROPERTIES
      IMPORTED_LOCATION "${CAF_io_LIBRARY}"
      INTERFACE_LINK_LIBRARIES CAF::core)
  endif()
  if(EXISTS "${CAF_INCLUDE_DIR}/caf/test/dsl.hpp" AND NOT TARGET CAF::test)
    add_library(CAF::test INTERFACE IMPORTED)
    set_target_properties(CAF::test PROPERTIES INTERFACE_LINK_LIBRARIES CAF::core)
  endif()
  if(CAF_openssl_FOUND AND NOT TARGET CAF::openssl)
    add_library(CAF::openssl SHARED IMPORTED)
    set_target_properties(CAF::openssl PROPERTIES
      IMPORTED_LOCATION "${CAF_openssl_LIBRARY}"
      INTERFACE_LINK_LIBRARIES CAF::io)
  endif()
endif()
mark_as_advanced(CAF_INCLUDE_DIR CAF_core_LIBRARY CAF_io_LIBRARY CAF_openssl_LIBRARY)
