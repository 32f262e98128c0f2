# FindNCCL.cmake -- locate NCCL (headers and libnccl). Searches NCCL_ROOT / $ENV{NCCL_HOME}, the
# CUDA toolkit (/usr/local/cuda, where the CUDA containers put it) and the system paths
# (Debian's libnccl-dev). Produces the imported target NCCL::nccl and NCCL_FOUND, NCCL_VERSION,
# NCCL_INCLUDE_DIR, NCCL_LIBRARY.
set(_nccl_hints ${NCCL_ROOT} $ENV{NCCL_ROOT} $ENV{NCCL_HOME} ${CUDAToolkit_LIBRARY_ROOT}
    /usr/local/cuda /usr/local/nccl /opt/nccl)
find_path(NCCL_INCLUDE_DIR NAMES nccl.h
  HINTS ${_nccl_hints} ${CUDAToolkit_INCLUDE_DIRS}
  PATH_SUFFIXES include)
find_library(NCCL_LIBRARY NAMES nccl
  HINTS ${_nccl_hints} ${CUDAToolkit_LIBRARY_DIR}
  PATH_SUFFIXES lib64 lib lib/x86_64-linux-gnu)

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_ver REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) [0-9]+")
  string(REGEX REPLACE ".*NCCL_MAJOR ([0-9]+).*" "\\1" _nccl_major "${_nccl_ver}")
  string(REGEX REPLACE ".*NCCL_MINOR ([0-9]+).*" "\\1" _nccl_minor "${_nccl_ver}")
  string(REGEX REPLACE ".*NCCL_PATCH ([0-9]+).*" "\\1" _nccl_patch "${_nccl_ver}")
  set(NCCL_VERSION "${_nccl_major}.${_nccl_minor}.${_nccl_patch}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL
  REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
  VERSION_VAR NCCL_VERSION)

if(NCCL_FOUND AND NOT TARGET NCCL::nccl)
  add_library(NCCL::nccl SHARED IMPORTED)
  set_target_properties(NCCL::nccl PROPERTIES
    IMPORTED_LOCATION "${NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
