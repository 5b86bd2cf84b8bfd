# Where `cmake --install` and the Debian package put uwarp: the GNU layout under
# CMAKE_INSTALL_PREFIX (GNUInstallDirs), every directory relative to the prefix, so that
# `cmake --install BUILD --prefix DIR` relocates the whole tree. Include before add_subdirectory.
#
# Libraries go to lib/<multiarch> (Debian: lib/x86_64-linux-gnu) under every prefix, not only under
# /usr as GNUInstallDirs alone would choose: one build tree then gives a Debian package laid out as
# Debian's own (cpack installs under /usr) and an install under /usr/local or any other prefix
# that Debian's loader, pkgconf and CMake all search (/etc/ld.so.conf.d lists
# /usr/local/lib/<multiarch>). Setting CMAKE_INSTALL_LIBDIR on the command line overrides this.
if(CMAKE_LIBRARY_ARCHITECTURE AND NOT DEFINED CACHE{CMAKE_INSTALL_LIBDIR})
  set(CMAKE_INSTALL_LIBDIR "lib/${CMAKE_LIBRARY_ARCHITECTURE}" CACHE PATH
      "Object code libraries (LIBDIR)")
endif()
include(GNUInstallDirs)

# uwarp's drop-in libibverbs.so.1 and librdmacm.so.1: a directory of their own, never the
# system's library directory, where they would answer in place of rdma-core's for every program.
# Only uwarp-run puts it on a program's library path.
set(UWARP_INSTALL_OFA_LIBDIR "${CMAKE_INSTALL_LIBDIR}/uwarp")
# The CMake package (find_package(uwarp)) and the pkg-config file (uwarp.pc).
set(UWARP_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/uwarp")
set(UWARP_INSTALL_PKGCONFIGDIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
