# The Debian package of everything `cmake --install` installs (cmake/Install.cmake, ofa/,
# tools/), under /usr: in a build tree built with `scripts/build normal installable`,
# `cpack -G DEB` (run in the build tree; scripts/package does both) writes
# uwarp_<version>-1_<arch>.deb there. Include last.
set(CPACK_PACKAGE_NAME uwarp)
set(CPACK_PACKAGE_VENDOR uwarp)
set(CPACK_PACKAGE_CONTACT "uwarp maintainers <maintainers@uwarp.invalid>" CACHE STRING
    "The Maintainer field of the Debian package")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "software iWARP RDMA NIC in user space")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "\
uwarp speaks iWARP (RDMAP RFC 5040, DDP RFC 5041, MPA RFC 5044, RFC 6581, RFC 7306) over
ordinary kernel TCP sockets, entirely in user space: no kernel module, no root, no RDMA
hardware. It talks to Linux siw and to hardware iWARP RNICs.

This package holds uwarp-run, which runs unmodified libibverbs and librdmacm programs (rping,
perftest, libfabric, MPI) over uwarp's drop-in libraries (in a directory of their own, never
in place of rdma-core's), the benchmark uwarp-perf, the command uwarp (the device's
description, live counters of the processes using it, traffic capture), and the native C++ API: headers,
libuwarp.so, libuwarp.a, a CMake package (find_package(uwarp)) and uwarp.pc.")
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_RELEASE 1)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
# Depends: from the libraries the ELF files need (dpkg-shlibdeps, Debian's dpkg-dev); the
# libibverbs.so.1 that librdmacm.so.1 needs is uwarp's own beside it (its RUNPATH is $ORIGIN), so
# rdma-core's libibverbs1 is not among them.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The programs uwarp-run is for; what an application linking libuwarp.a also links.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "ibverbs-utils, rdmacm-utils")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "perftest, libisal-dev, liburing-dev")
set(CPACK_STRIP_FILES ON)
set(CPACK_GENERATOR DEB)
include(CPack)
