# libFuzzer builds (UWARP_FUZZ=ON). Every target, libraries included, is compiled with
# -fsanitize=fuzzer-no-link so that the code under test carries coverage instrumentation; only
# the fuzz targets themselves link the libFuzzer runtime (fuzz/CMakeLists.txt). Include this file
# before add_subdirectory(src). Configure a fuzz build with clang, apart from the normal build:
#   CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DUWARP_FUZZ=ON -DUWARP_TESTS=OFF \
#     -DUWARP_BENCH=OFF -DUWARP_SANITIZE=ON
if(UWARP_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "UWARP_FUZZ=ON needs clang (libFuzzer): configure a separate build "
                        "directory with CC=clang CXX=clang++")
  endif()
  if(NOT UWARP_SANITIZE)
    message(WARNING "UWARP_FUZZ=ON without UWARP_SANITIZE=ON: the libraries under test are not "
                    "built with AddressSanitizer, so memory errors in them may go unnoticed")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
