# hybridlab_project_warnings(TARGET): the warning set for code this project owns.
function(hybridlab_project_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra)
  if(HYBRIDLAB_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
