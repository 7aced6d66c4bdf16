# The include check of the code's levels: every `#include "..."` in framework/ and layers/ must
# point down or sideways (never to a higher level) and, across modules, only at public headers
# (framework/include/hybridlab/, or a folder's own interface as listed below). Includes that break
# the rule today are listed in cmake/level_exceptions.txt (layers/, util/, plot/, checkpoint/ and tokenizer/ are libraries
# whose every header is their interface); a new one fails, and so does a listed
# one that no longer occurs (remove it from the list: the list only shrinks).
#
# usage: cmake -DSOURCE_DIR=<repo> -P cmake/check_levels.cmake
# The levels, lowest first (docs/design.md, "Levels of the code"):
#   0 base        util, config, runtime, plot, position (the positional SDK), checkpoint, tokenizer
#   1 kernels     layers/kernels/ (CPU, BLAS and chunked kernels; hybridlab/mixer_ops.h)
#   2 nn          layers/ (modules and mixers, the Mixer interface)
#   3 model       model, plugin, inspect
#   4 data        tasks
#   5 experiment  experiment, sweep
#   6 run         run, train, eval, generate, distributed
#   7 analysis    analysis
#   8 report      report
#   9 cli         framework/cli
cmake_minimum_required(VERSION 3.16)
if(NOT SOURCE_DIR)
  message(FATAL_ERROR "usage: cmake -DSOURCE_DIR=<repo> -P check_levels.cmake")
endif()

set(rank_util 0)
set(rank_config 0)
set(rank_runtime 0)
set(rank_plot 0)
set(rank_checkpoint 0)
set(rank_tokenizer 0)
set(rank_position 0)
set(rank_kernels 1)
set(rank_layers 2)
set(rank_model 3)
set(rank_plugin 3)
set(rank_inspect 3)
set(rank_tasks 4)
set(rank_experiment 5)
set(rank_sweep 5)
set(rank_run 6)
set(rank_train 6)
set(rank_eval 6)
set(rank_generate 6)
set(rank_distributed 6)
set(rank_analysis 7)
set(rank_report 8)
set(rank_cli 9)

# framework/include/hybridlab/<name>.h -> the module that implements it.
set(public_error util)
set(public_version util)
set(public_config config)
set(public_runtime runtime)
set(public_position position)
set(public_rotary position)
set(public_position_hooks position)
set(public_mixer layers)
set(public_mixer_ops kernels)
set(public_recurrent_mixer layers)
set(public_plugin_host plugin)
set(public_model model)
set(public_interop model)
set(public_task tasks)
set(public_inspect inspect)
set(public_run_build run)
set(public_experiment experiment)
set(public_sweep sweep)
set(public_claims experiment)
set(public_evaluator eval)
set(public_trainer train)
set(public_generate generate)
set(public_run run)
set(public_run_record run)
set(public_distributed distributed)
set(public_analysis analysis)
set(public_attention_maps analysis)
set(public_analysis_options experiment)  # the `report.analysis` options the experiment reads
set(public_report report)

# The module of a repository path (framework/src/<module>/..., layers/..., framework/cli/...,
# framework/include/hybridlab/<header>.h).
function(module_of path out)
  if(path MATCHES "^layers/kernels/")
    set(m kernels)
  elseif(path MATCHES "^layers/")
    set(m layers)
  elseif(path MATCHES "^framework/cli/")
    set(m cli)
  elseif(path MATCHES "^framework/src/([^/]+)/")
    set(m ${CMAKE_MATCH_1})
  elseif(path MATCHES "^framework/include/hybridlab/([^/.]+)\\.h")
    set(m ${public_${CMAKE_MATCH_1}})
    if(NOT m)
      message(FATAL_ERROR "check_levels: public header ${path} has no module: add "
                          "public_${CMAKE_MATCH_1} to cmake/check_levels.cmake")
    endif()
  endif()
  if(NOT DEFINED rank_${m})
    message(FATAL_ERROR "check_levels: '${path}' is in module '${m}', which has no level: add "
                        "rank_${m} to cmake/check_levels.cmake and docs/design.md")
  endif()
  set(${out} ${m} PARENT_SCOPE)
endfunction()

file(GLOB_RECURSE files RELATIVE ${SOURCE_DIR}
     ${SOURCE_DIR}/framework/*.cpp ${SOURCE_DIR}/framework/*.h
     ${SOURCE_DIR}/layers/*.cpp ${SOURCE_DIR}/layers/*.h)
list(SORT files)
set(found "")
foreach(f IN LISTS files)
  module_of(${f} from)
  file(STRINGS ${SOURCE_DIR}/${f} lines REGEX "^#include \"[^\"]+\"")
  foreach(line IN LISTS lines)
    string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" inc "${line}")
    set(private FALSE)
    if(inc MATCHES "^hybridlab/([^/.]+)\\.h$")
      module_of("framework/include/${inc}" to)
    elseif(inc MATCHES "^layers/kernels/")
      set(to kernels)  # a library whose every header is its interface, like the ones below
    elseif(inc MATCHES "^(layers|util|plot|checkpoint|tokenizer)/")
      # Libraries whose every header is their interface: the nn level, and four base utilities
      # (atomic files and console output; CSV and gnuplot plots; the safetensors format; BPE).
      set(to ${CMAKE_MATCH_1})
    elseif(NOT inc MATCHES "/")
      set(to ${from})  # a header beside the file
    elseif(inc MATCHES "^([^/]+)/")
      set(to ${CMAKE_MATCH_1})
      set(private TRUE)
      if(NOT DEFINED rank_${to})
        message(FATAL_ERROR "check_levels: ${f} includes '${inc}' from unknown module '${to}'")
      endif()
    endif()
    set(why "")
    if(rank_${to} GREATER rank_${from})
      set(why "up: ${from} (level ${rank_${from}}) -> ${to} (level ${rank_${to}})")
    elseif(private AND NOT to STREQUAL from)
      set(why "private header of module ${to}")
    endif()
    if(why)
      list(APPEND found "${f} -> ${inc}")
      set(why_${f}_${inc} "${why}")
    endif()
  endforeach()
endforeach()

set(exceptions_file ${SOURCE_DIR}/cmake/level_exceptions.txt)
file(STRINGS ${exceptions_file} listed REGEX "^[^#].* -> ")
set(failed FALSE)
foreach(v IN LISTS found)
  list(FIND listed "${v}" at)
  if(at EQUAL -1)
    string(REPLACE " -> " ";" pair "${v}")
    list(GET pair 0 f)
    list(GET pair 1 inc)
    message(SEND_ERROR "${v}: ${why_${f}_${inc}}; include a public header of a lower level "
                       "(docs/design.md, Levels of the code)")
    set(failed TRUE)
  endif()
endforeach()
foreach(v IN LISTS listed)
  list(FIND found "${v}" at)
  if(at EQUAL -1)
    message(SEND_ERROR "${v}: listed in cmake/level_exceptions.txt but no longer included: "
                       "remove the line")
    set(failed TRUE)
  endif()
endforeach()
list(LENGTH found n_found)
list(LENGTH files n_files)
if(failed)
  message(FATAL_ERROR "check_levels: include rule broken (see above)")
endif()
message(STATUS "check_levels: ${n_files} files; ${n_found} listed exceptions remain")
