# What `cmake --install` installs of the native API (directories: cmake/InstallDirs.cmake): the
# headers, libuwarp.so and libuwarp.a, the CMake package (find_package(uwarp): uwarp::uwarp,
# uwarp::uwarp_static) and the pkg-config file uwarp.pc. The drop-in OFA libraries, uwarp-run,
# uwarp-perf and uwarp are installed by ofa/ and tools/. Include after add_subdirectory(src); not in libFuzzer
# builds, which make no installed library (src/CMakeLists.txt).
include(CMakePackageConfigHelpers)

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/uwarp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

install(TARGETS uwarp_shared uwarp_archive EXPORT uwarpTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT uwarpTargets NAMESPACE uwarp:: DESTINATION ${UWARP_INSTALL_CMAKEDIR})
# `cmake --install --strip` and the package (CPACK_STRIP_FILES) strip programs and shared
# libraries; CMake leaves archives as they are: libuwarp.a loses its debug information (97 % of
# its size in a RelWithDebInfo build) here.
install(CODE "
  if(CMAKE_INSTALL_DO_STRIP)
    execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug
      \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:uwarp_archive>\"
      COMMAND_ERROR_IS_FATAL ANY)
  endif()")
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/uwarpConfig.cmake.in
  ${PROJECT_BINARY_DIR}/uwarpConfig.cmake INSTALL_DESTINATION ${UWARP_INSTALL_CMAKEDIR})
# 0.x: a minor version may change the API; find_package(uwarp 0.1) accepts 0.1.* only.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/uwarpConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/uwarpConfig.cmake ${PROJECT_BINARY_DIR}/uwarpConfigVersion.cmake
        DESTINATION ${UWARP_INSTALL_CMAKEDIR})

# uwarp.pc names the prefix it is installed under, which `cmake --install --prefix` and cpack
# choose at install time: it is written then, from uwarp.pc.in.
install(CODE "
  set(UWARP_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(CMAKE_INSTALL_LIBDIR \"${CMAKE_INSTALL_LIBDIR}\")
  set(CMAKE_INSTALL_INCLUDEDIR \"${CMAKE_INSTALL_INCLUDEDIR}\")
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  configure_file(\"${CMAKE_CURRENT_LIST_DIR}/uwarp.pc.in\" \"${PROJECT_BINARY_DIR}/uwarp.pc\" @ONLY)")
install(FILES ${PROJECT_BINARY_DIR}/uwarp.pc DESTINATION ${UWARP_INSTALL_PKGCONFIGDIR})

# `scripts/build normal installable`: everything installed, built; nothing else (no test).
add_custom_target(installable)
add_dependencies(installable uwarp_shared uwarp_archive uwarp-perf uwarp-tool)
if(TARGET uwarp-run)
  add_dependencies(installable uwarp-run)
endif()
