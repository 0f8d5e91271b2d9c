# tierProvider.cmake -- tier_add_provider(): builds a tier provider the way every provider must be
# built. Part of the SDK's abi component: find_package(tier CONFIG COMPONENTS abi) includes it, and
# the project's own plugins/ use the same file.
#
#   tier_add_provider(<target> <source>...)
#
# Makes a MODULE library lib<target>.so that links tier::abi, hides every symbol (hidden
# visibility and a version script) except tier_provider_entry, and refuses undefined symbols at
# link time (--no-undefined: a missing library fails the build, not the dlopen). Link your own
# libraries to <target> as usual. Optional variables, read at the call:
#   TIER_PROVIDER_OUTPUT_DIRECTORY  where the .so is written (default: the usual build folder)
#   TIER_PROVIDER_INSTALL_DIR       install(TARGETS) destination (default: not installed)
# Every provider made here is appended to the global property TIER_PROVIDERS.
include_guard(GLOBAL)

function(tier_add_provider target)
  if(NOT ARGN)
    message(FATAL_ERROR "tier_add_provider(${target}): no source files given")
  endif()
  if(NOT TARGET tier::abi)
    message(FATAL_ERROR "tier_add_provider(${target}): tier::abi is not defined "
            "(find_package(tier CONFIG REQUIRED COMPONENTS abi) first)")
  endif()
  # The version script: the project's own (set as a global property in its tree) or the one
  # installed beside this file.
  get_property(script GLOBAL PROPERTY TIER_PROVIDER_VERSION_SCRIPT)
  if(NOT script)
    set(script "${CMAKE_CURRENT_FUNCTION_LIST_DIR}/tier_provider.map")
  endif()
  add_library(${target} MODULE ${ARGN})
  target_link_libraries(${target} PRIVATE tier::abi)
  set_target_properties(${target} PROPERTIES
                        PREFIX "lib"
                        C_VISIBILITY_PRESET hidden
                        CXX_VISIBILITY_PRESET hidden
                        VISIBILITY_INLINES_HIDDEN ON
                        LINK_DEPENDS "${script}")
  target_link_options(${target} PRIVATE "LINKER:--version-script=${script}" "LINKER:--no-undefined")
  if(TIER_PROVIDER_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY
                                               "${TIER_PROVIDER_OUTPUT_DIRECTORY}")
  endif()
  if(TIER_PROVIDER_INSTALL_DIR)
    install(TARGETS ${target} LIBRARY DESTINATION "${TIER_PROVIDER_INSTALL_DIR}")
  endif()
  set_property(GLOBAL APPEND PROPERTY TIER_PROVIDERS ${target})
endfunction()
