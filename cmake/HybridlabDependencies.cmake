# Third-party packages: Debian 12's packages, or an official LibTorch given by CMAKE_PREFIX_PATH.
find_package(Torch REQUIRED)
find_package(yaml-cpp REQUIRED)
find_package(Boost 1.74 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(nlohmann_json 3 REQUIRED)
find_package(fmt REQUIRED)
find_package(Threads REQUIRED)

# yaml-cpp 0.7 exports `yaml-cpp`, 0.8 exports `yaml-cpp::yaml-cpp`: accept either.
if(TARGET yaml-cpp::yaml-cpp)
  set(HYBRIDLAB_YAML_TARGET yaml-cpp::yaml-cpp)
else()
  set(HYBRIDLAB_YAML_TARGET yaml-cpp)
endif()

# Torch's CMake config hands over a list of libraries and flags, not a target: wrap it once.
if(NOT TARGET hybridlab_torch)
  add_library(hybridlab_torch INTERFACE)
  target_link_libraries(hybridlab_torch INTERFACE ${TORCH_LIBRARIES})
  target_include_directories(hybridlab_torch SYSTEM INTERFACE ${TORCH_INCLUDE_DIRS})
  separate_arguments(_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
  target_compile_options(hybridlab_torch INTERFACE ${_torch_flags})
endif()
