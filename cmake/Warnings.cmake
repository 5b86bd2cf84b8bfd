# uwarp_warnings(target): the warning set every uwarp target compiles with.
function(uwarp_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Wimplicit-fallthrough -Werror=return-type)
endfunction()

# UWARP_THREAD_SAFETY=ON (clang only): clang's thread-safety analysis over the annotations of
# base/thread_annotations.h, every warning an error (scripts/build tsa; run by scripts/test).
option(UWARP_THREAD_SAFETY "Check lock annotations with clang's -Wthread-safety, as errors" OFF)
if(UWARP_THREAD_SAFETY)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "UWARP_THREAD_SAFETY=ON needs clang: CC=clang CXX=clang++ scripts/build tsa")
  endif()
  add_compile_options(-Wthread-safety -Werror)
endif()
