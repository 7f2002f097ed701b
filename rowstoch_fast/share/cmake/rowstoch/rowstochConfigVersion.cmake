# The version of rowstoch_fast these kernels came with, read from the package's one place for it
# (rowstoch_fast/_version.py). Any version satisfies a request for an older one.
file(READ "${CMAKE_CURRENT_LIST_DIR}/../../../_version.py" _rowstoch_version_py)
string(REGEX MATCH "__version__ = \"([^\"]+)\"" _ "${_rowstoch_version_py}")
set(PACKAGE_VERSION "${CMAKE_MATCH_1}")
unset(_rowstoch_version_py)
if(PACKAGE_FIND_VERSION VERSION_GREATER PACKAGE_VERSION)
  set(PACKAGE_VERSION_COMPATIBLE FALSE)
else()
  set(PACKAGE_VERSION_COMPATIBLE TRUE)
  if(PACKAGE_FIND_VERSION STREQUAL PACKAGE_VERSION)
    set(PACKAGE_VERSION_EXACT TRUE)
  endif()
endif()
