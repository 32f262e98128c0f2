# One place for the warning flags of kvactor's own targets (system headers stay quiet).
function(kvactor_set_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-restrict>)
endfunction()
