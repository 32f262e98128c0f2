# One helper per kind of target, so every library and test is built the same way.

# kvactor_export(name): installed and exported as kvactor::<name without "kvactor_"> (see
# cmake/kvactor_install.cmake), its headers found under include/kvactor once installed.
function(kvactor_export name)
  string(REGEX REPLACE "^kvactor_" "" short ${name})
  set_target_properties(${name} PROPERTIES EXPORT_NAME ${short})
  get_target_property(type ${name} TYPE)
  if(NOT type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${name}
      PUBLIC $<INSTALL_INTERFACE:include/kvactor> $<INSTALL_INTERFACE:include>)
  endif()
  set_property(GLOBAL APPEND PROPERTY KVACTOR_EXPORTED_TARGETS ${name})
endfunction()

# kvactor_build_includes(name dir): a public include dir of the source tree (build only; the
# installed package has its headers under include/).
function(kvactor_build_includes name dir)
  target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${dir}>)
endfunction()

# Unity batches for the CAF-heavy targets: each of their files spends most of its time compiling
# the same CAF templates, so compiling seven at a time saves two thirds of their build (CI has two
# cores). Off for one-file-at-a-time error messages: -DKVACTOR_UNITY_BUILD=OFF.
option(KVACTOR_UNITY_BUILD "Compile the CAF-heavy targets in unity batches" ON)
function(kvactor_unity name)
  if(KVACTOR_UNITY_BUILD)
    set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 7)
  endif()
endfunction()

# kvactor_add_library(name [UNITY] SOURCES a.cpp ... LINK dep ...)
function(kvactor_add_library name)
  cmake_parse_arguments(arg "UNITY" "" "SOURCES;LINK" ${ARGN})
  add_library(${name} STATIC ${arg_SOURCES})
  if(arg_UNITY)
    kvactor_unity(${name})
  endif()
  kvactor_build_includes(${name} ${PROJECT_SOURCE_DIR})
  target_link_libraries(${name} PUBLIC ${arg_LINK})
  kvactor_set_warnings(${name})
  kvactor_export(${name})
endfunction()

# kvactor_add_test(name SOURCES a_test.cpp ... LINK dep ...): one binary, every TEST seen by ctest.
# A test that calls GTEST_SKIP exits 0; ctest reports it as skipped, never as passed, by matching
# the "[  SKIPPED ]" line GoogleTest prints for it (a failed test prints "[  FAILED  ]" instead, so
# a failure is never hidden). ctest checks the skip expression before the exit status.
# Tests compile at -O1: their own code is assertions and set-up (what they exercise is in the
# libraries, at full optimisation), and -O1 builds them in a quarter less time than -O3.
function(kvactor_add_test name)
  cmake_parse_arguments(arg "UNITY" "" "SOURCES;LINK" ${ARGN})
  add_executable(${name} ${arg_SOURCES})
  target_compile_options(${name} PRIVATE -O1)
  if(arg_UNITY)
    kvactor_unity(${name})
  endif()
  target_link_libraries(${name} PRIVATE ${arg_LINK} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    KVACTOR_SOURCE_DIR="${PROJECT_SOURCE_DIR}" KVACTOR_MODELS_DIR="${PROJECT_SOURCE_DIR}/deploy/models")
  kvactor_set_warnings(${name})
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60
    PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
endfunction()

# kvactor_test_timeout(name seconds): the test's time limit, times KVACTOR_TEST_SLOWDOWN (a
# sanitizer build, tests/sanitize.sh, runs that many times slower).
set(KVACTOR_TEST_SLOWDOWN 1 CACHE STRING "How many times slower than a plain build the tests run")
function(kvactor_test_timeout name seconds)
  math(EXPR limit "${seconds} * ${KVACTOR_TEST_SLOWDOWN}")
  set_tests_properties(${name} PROPERTIES TIMEOUT ${limit})
endfunction()
