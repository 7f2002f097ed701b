# CMake package configuration of rowstoch_fast's C++ kernels (header-only, C++17).
#
#   find_package(rowstoch CONFIG REQUIRED)     # with -Drowstoch_DIR=$(python -c "import rowstoch_fast as r; print(r.get_cmake_dir())")
#   target_link_libraries(my_simulator PRIVATE rowstoch::kernels)
#
# rowstoch::kernels carries the include directory, C++17 and -ffp-contract=off (no fused multiply-adds: the
# bits then do not depend on -march, the vector width or the Python package's build), and OpenMP where CMake
# finds it (the kernels run serially without it; every translation unit of a program must agree).
if(TARGET rowstoch::kernels)
  return()
endif()
get_filename_component(_rowstoch_root "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
add_library(rowstoch::kernels INTERFACE IMPORTED)
set_target_properties(rowstoch::kernels PROPERTIES
  INTERFACE_INCLUDE_DIRECTORIES "${_rowstoch_root}/include"
  INTERFACE_COMPILE_FEATURES cxx_std_17
  INTERFACE_COMPILE_OPTIONS "$<$<COMPILE_LANGUAGE:CXX>:-ffp-contract=off>")
find_package(OpenMP QUIET COMPONENTS CXX)
if(OpenMP_CXX_FOUND)
  set_property(TARGET rowstoch::kernels APPEND PROPERTY INTERFACE_LINK_LIBRARIES OpenMP::OpenMP_CXX)
endif()
set(rowstoch_INCLUDE_DIR "${_rowstoch_root}/include")
set(rowstoch_FOUND TRUE)
unset(_rowstoch_root)
