# hybridlab_reuse_core_pch(TARGET): compile TARGET with the lowest layer's (hybridlab_base) precompiled
# <torch/torch.h> (one ~30 s PCH build instead of one per target). GCC refuses a PCH built with
# other -fpic/-fpie settings, so executables are compiled -fPIC like the shared core.
function(hybridlab_reuse_core_pch target)
  if(CMAKE_DISABLE_PRECOMPILE_HEADERS)
    return()
  endif()
  get_target_property(_type ${target} TYPE)
  if(_type STREQUAL "EXECUTABLE")
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
    target_compile_options(${target} PRIVATE -fPIC)
  elseif(_type STREQUAL "STATIC_LIBRARY")
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  endif()
  target_precompile_headers(${target} REUSE_FROM hybridlab_base)
endfunction()
