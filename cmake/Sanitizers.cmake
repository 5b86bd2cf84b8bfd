# Sanitizer builds apply to every target, so that libraries and tests are instrumented alike.
if(UWARP_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
if(UWARP_TSAN)
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()

# UWARP_OFA_PRELOAD_ENV: the environment for tests that run an uninstrumented Debian program
# over uwarp's instrumented libibverbs.so.1 (uwarp-run): the sanitizer runtime, for the scripts to
# preload into that program only (UWARP_OFA_PRELOAD). Empty in other builds.
set(UWARP_OFA_PRELOAD_ENV "")
if(UWARP_SANITIZE OR UWARP_TSAN)
  if(UWARP_TSAN)
    set(_uwarp_runtimes libtsan.so)
  else()
    set(_uwarp_runtimes libasan.so libubsan.so)
  endif()
  set(_uwarp_preload "")
  foreach(rt ${_uwarp_runtimes})
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=${rt} OUTPUT_VARIABLE path
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    list(APPEND _uwarp_preload ${path})
  endforeach()
  string(REPLACE ";" ":" _uwarp_preload "${_uwarp_preload}")
  set(UWARP_OFA_PRELOAD_ENV "UWARP_OFA_PRELOAD=${_uwarp_preload}" "ASAN_OPTIONS=detect_leaks=0")
endif()
