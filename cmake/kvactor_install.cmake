# cmake --install: the kvactor command, every library kvactor_export() named, the headers under
# include/kvactor (the repository's own include paths: "messages/...", "model/...", "actors/...") and include/
# ("kvactor/kernels/...", "kvactor/comm/..."), the shipped model configs under share/kvactor/models, and the CMake
# package (find_package(kvactor): kvactor:: targets, their dependencies found again).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

get_property(kvactor_exported GLOBAL PROPERTY KVACTOR_EXPORTED_TARGETS)
install(TARGETS kvactor ${kvactor_exported} EXPORT kvactorTargets
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
foreach(dir messages model actors deploy)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvactor
    FILES_MATCHING PATTERN "*.hpp" PATTERN "*.h")
endforeach()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/kernels/include/ ${PROJECT_SOURCE_DIR}/comm/include/
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/deploy/models/ DESTINATION ${KVACTOR_MODELS_INSTALL_DIR}
  FILES_MATCHING PATTERN "*.json" PATTERN "*.md")

get_property(kvactor_nccl_version GLOBAL PROPERTY KVACTOR_NCCL_VERSION)
set(KVACTOR_HAS_NCCL OFF)
if(kvactor_nccl_version)
  set(KVACTOR_HAS_NCCL ON)
endif()
set(kvactor_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/kvactor)
install(EXPORT kvactorTargets NAMESPACE kvactor:: DESTINATION ${kvactor_cmake_dir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/kvactorConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/kvactorConfig.cmake INSTALL_DESTINATION ${kvactor_cmake_dir})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/kvactorConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/kvactorConfig.cmake
  ${CMAKE_CURRENT_BINARY_DIR}/kvactorConfigVersion.cmake
  ${PROJECT_SOURCE_DIR}/cmake/FindCAF.cmake ${PROJECT_SOURCE_DIR}/cmake/FindNCCL.cmake
  DESTINATION ${kvactor_cmake_dir})
