# Third-party packages: Debian 12's packages, or an official LibTorch given by CMAKE_PREFIX_PATH.
# HYBRIDLAB_BUNDLED_DEPS=<dir> (made by scripts/device-bundle.sh) takes everything but LibTorch
# from that folder instead: header-only CLI11, nlohmann-json, fmt, Catch2 and a Boost subset, and
# yaml-cpp built from source with LibTorch's compile flags (its _GLIBCXX_USE_CXX11_ABI).
set(HYBRIDLAB_BUNDLED_DEPS "" CACHE PATH
    "Folder from scripts/device-bundle.sh to use instead of the system's packages (not LibTorch)")
find_package(Torch REQUIRED)
find_package(Threads REQUIRED)

# LibTorch >= 2.13 headers require C++20 (they #error below it); older ones build as C++17.
if(DEFINED Torch_VERSION AND Torch_VERSION VERSION_GREATER_EQUAL 2.13)
  set(CMAKE_CXX_STANDARD 20)
endif()
message(STATUS "hybridlab: LibTorch ${Torch_VERSION}, C++${CMAKE_CXX_STANDARD}, "
               "flags '${TORCH_CXX_FLAGS}'")

if(HYBRIDLAB_BUNDLED_DEPS)
  get_filename_component(_bundle "${HYBRIDLAB_BUNDLED_DEPS}" ABSOLUTE)
  if(NOT EXISTS "${_bundle}/MANIFEST")
    message(FATAL_ERROR "HYBRIDLAB_BUNDLED_DEPS=${_bundle} is not a bundle from "
                        "scripts/device-bundle.sh (no MANIFEST)")
  endif()
  message(STATUS "hybridlab: third-party libraries from the bundle ${_bundle}")
  # Every header-only library gets the imported target name its package exports.
  foreach(_t Boost::headers CLI11::CLI11 nlohmann_json::nlohmann_json fmt::fmt Catch2::Catch2)
    add_library(${_t} INTERFACE IMPORTED)
    set_target_properties(${_t} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_bundle}/include")
  endforeach()
  set_target_properties(fmt::fmt PROPERTIES INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY=1)
  list(APPEND CMAKE_MODULE_PATH "${_bundle}/cmake")  # Catch.cmake for catch_discover_tests
  set(HYBRIDLAB_BUNDLED_CATCH2 ON)

  # yaml-cpp 0.7.0 from source, static and position independent (it goes into the shared core).
  set(YAML_CPP_BUILD_TESTS OFF CACHE BOOL "" FORCE)
  set(YAML_CPP_BUILD_TOOLS OFF CACHE BOOL "" FORCE)
  set(YAML_CPP_BUILD_CONTRIB ON CACHE BOOL "" FORCE)
  set(YAML_CPP_INSTALL OFF CACHE BOOL "" FORCE)
  set(YAML_BUILD_SHARED_LIBS OFF CACHE BOOL "" FORCE)
  # yaml-cpp 0.7.0 asks for CMake 3.4, which CMake >= 4 refuses without this.
  set(CMAKE_POLICY_VERSION_MINIMUM 3.5)
  add_subdirectory("${_bundle}/yaml-cpp" "${CMAKE_BINARY_DIR}/_deps/yaml-cpp" EXCLUDE_FROM_ALL)
  unset(CMAKE_POLICY_VERSION_MINIMUM)
  separate_arguments(_yaml_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")
  # Same C++ ABI as LibTorch; <cstdint> for newer GCCs, which no longer pull it in transitively.
  target_compile_options(yaml-cpp PRIVATE ${_yaml_torch_flags} -include cstdint -w)
  set_target_properties(yaml-cpp PROPERTIES POSITION_INDEPENDENT_CODE ON)
else()
  find_package(yaml-cpp REQUIRED)
  find_package(Boost 1.74 REQUIRED)
  find_package(CLI11 REQUIRED)
  find_package(nlohmann_json 3 REQUIRED)
  find_package(fmt REQUIRED)
  # RE2 runs the BPE tokenizers' pre-tokenizer patterns (framework/src/tokenizer/pretokenizer.h).
  find_package(PkgConfig REQUIRED)
  pkg_check_modules(RE2 REQUIRED IMPORTED_TARGET re2)
endif()
# A bundle (a GPU machine without network) has no RE2: that build reads no BPE tokenizer
# (task.tokenizer other than `bytes` is refused with a message) and is otherwise complete.

# yaml-cpp 0.7 exports `yaml-cpp`, 0.8 exports `yaml-cpp::yaml-cpp`: accept either.
if(HYBRIDLAB_BUNDLED_DEPS)
  # Built in this tree and linked into the core: not part of the installed package's interface.
  set(HYBRIDLAB_YAML_TARGET $<BUILD_INTERFACE:yaml-cpp>)
elseif(TARGET yaml-cpp::yaml-cpp)
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
