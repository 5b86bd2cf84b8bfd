# uwarp_warnings(target): the warning set every uwarp target compiles with.
function(uwarp_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
                                           -Wimplicit-fallthrough -Werror=return-type)
endfunction()
