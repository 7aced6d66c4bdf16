# hybridlab_add_position_plugin(NAME SOURCES src1.cpp [src2.cpp ...])
#
# Builds one positional-scheme plugin: a MODULE library `NAME.so` (no `lib` prefix) that links the
# hybridlab core library and so shares its one copy of LibTorch. The host loads it by the scheme
# name the plugin declares in HYBRIDLAB_POSITION_PLUGIN(...), or by the .so path.
# Inside the hybridlab source tree the plugin lands in the folder the CLI searches; outside it
# lands in the current binary folder (point HYBRIDLAB_PLUGIN_PATH or `plugins.paths` there).
function(hybridlab_add_position_plugin name)
  cmake_parse_arguments(ARG "" "" "SOURCES" ${ARGN})
  if(NOT ARG_SOURCES)
    set(ARG_SOURCES ${ARG_UNPARSED_ARGUMENTS})
  endif()
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "hybridlab_add_position_plugin(${name}): give at least one source file")
  endif()
  if(NOT HYBRIDLAB_CORE_TARGET)
    set(HYBRIDLAB_CORE_TARGET hybridlab::hybridlab)
  endif()
  set(target hybridlab_plugin_${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  set_property(GLOBAL APPEND PROPERTY HYBRIDLAB_PLUGIN_TARGETS ${target})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME ${name} PREFIX "" CXX_STANDARD 17
                        CXX_STANDARD_REQUIRED ON POSITION_INDEPENDENT_CODE ON)
  target_link_libraries(${target} PRIVATE ${HYBRIDLAB_CORE_TARGET})
  if(HYBRIDLAB_PLUGIN_OUTPUT_DIR)  # in-tree build
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${HYBRIDLAB_PLUGIN_OUTPUT_DIR}
                          INSTALL_RPATH "$ORIGIN/../..")
    hybridlab_reuse_core_pch(${target})
    hybridlab_project_warnings(${target})
    install(TARGETS ${target} LIBRARY DESTINATION ${HYBRIDLAB_PLUGIN_INSTALL_DIR})
  endif()
endfunction()

# hybridlab_add_mixer_plugin(NAME SOURCES src1.cpp [src2.cpp ...])
#
# Builds one mixer plugin, exactly as hybridlab_add_position_plugin builds a positional scheme: a
# MODULE library `NAME.so` linking the hybridlab core library. The layer graph finds it by the
# pattern letter and name it declares in HYBRIDLAB_MIXER_PLUGIN(...).
function(hybridlab_add_mixer_plugin name)
  hybridlab_add_position_plugin(${name} ${ARGN})
endfunction()
