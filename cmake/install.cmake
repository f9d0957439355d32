# install.cmake — what `cmake --install BUILD --prefix P` puts where, and how
# the installed files find each other without any build path:
#
#   P/lib/libvdev.so.0.1.0       the shared library (soname libvdev.so.0, from
#   P/lib/libvdev.so.0, .so      the project version), with the links to it
#   P/lib/libvdev.a              the static library
#   P/lib/vdev/                  plugins (libvdev-cuda.so, libvdev-mpi.so),
#                                found at run time from the library's own
#                                folder (dladdr), or from the program's
#                                folder (../lib/vdev) when the
#                                static library is linked into it
#   P/include/vdev.h             the public header, and the parts it includes
#   P/include/vdev/*.h           (each may be included alone)
#   P/bin/vdev                   the vdev command (static library inside)
#   P/lib/pkgconfig/vdev.pc      pkg-config (written at install time, for P)
#   P/lib/cmake/vdev/            find_package(vdev): vdev::vdev, vdev::vdev_static
#
# (lib is GNUInstallDirs' LIBDIR: lib/x86_64-linux-gnu on Debian with prefix
# /usr.) Included at the end of the top-level CMakeLists.txt, once every
# target exists.
include(CMakePackageConfigHelpers)

# The header's version macros (include/vdev/status.h, which vdev.h includes)
# and the project's version must agree: the first is what programs compile
# against, the second names the shared library.
file(STRINGS ${PROJECT_SOURCE_DIR}/include/vdev/status.h _vdev_ver REGEX "^#define VDEV_VERSION_(MAJOR|MINOR|PATCH) ")
string(REGEX REPLACE ".*MAJOR ([0-9]+).*MINOR ([0-9]+).*PATCH ([0-9]+).*" "\\1.\\2.\\3" _vdev_ver "${_vdev_ver}")
if(NOT _vdev_ver STREQUAL PROJECT_VERSION)
  message(FATAL_ERROR "include/vdev/status.h says version ${_vdev_ver}, project() says ${PROJECT_VERSION}")
endif()

# ---- where the library looks for plugins ---------------------------------------
# Paths relative to the library's folder and to the program's folder, so the
# installed tree can move; src/backend/backend.c uses them. Any of the three
# folders may be absolute (cmake/install_paths.cmake).
include(${PROJECT_SOURCE_DIR}/cmake/install_paths.cmake)
foreach(_d LIBDIR BINDIR)
  vdev_install_relpath(_vdev_plugin_from_${_d} "${CMAKE_INSTALL_PREFIX}" "${CMAKE_INSTALL_${_d}}"
    "${VDEV_INSTALL_PLUGINDIR}")
endforeach()
set_property(SOURCE ${PROJECT_SOURCE_DIR}/src/backend/backend.c APPEND PROPERTY COMPILE_DEFINITIONS
  "VDEV_PLUGIN_DIR_FROM_LIB=\"${_vdev_plugin_from_LIBDIR}\""
  "VDEV_PLUGIN_DIR_FROM_BIN=\"${_vdev_plugin_from_BINDIR}\"")

# ---- RUNPATHs of the installed binaries -------------------------------------------
# A dependency's folder goes into the RUNPATH only when the loader would not
# find the library there by its soname without it. Debian's OpenBLAS links
# from /usr/lib/x86_64-linux-gnu/openblas-pthread, but the loader finds
# libopenblas.so.0 in /usr/lib/x86_64-linux-gnu, where the BLAS alternatives
# (update-alternatives) point it: a RUNPATH entry for the link folder would
# bypass the system's choice of BLAS (and Open MPI's folder the MPI
# alternatives). A library whose soname readelf does not tell (a linker
# script) keeps its folder. VDEV_INSTALL_RPATH: $ORIGIN (the root
# CMakeLists.txt says why) and those folders; VDEV_MPI_INSTALL_RPATH: the
# MPI plugin's.
function(vdev_rpath_folders out)
  set(_dirs "")
  set(_system ${CMAKE_C_IMPLICIT_LINK_DIRECTORIES} ${CMAKE_PLATFORM_IMPLICIT_LINK_DIRECTORIES})
  foreach(_lib IN LISTS ARGN)
    if(NOT IS_ABSOLUTE "${_lib}" OR NOT EXISTS "${_lib}")
      continue()
    endif()
    get_filename_component(_dir "${_lib}" DIRECTORY)
    if(_dir IN_LIST _system OR _dir IN_LIST _dirs)
      continue()
    endif()
    set(_soname "")
    if(CMAKE_READELF)
      execute_process(COMMAND ${CMAKE_READELF} -d "${_lib}" OUTPUT_VARIABLE _dyn ERROR_QUIET)
      if(_dyn MATCHES "\\(SONAME\\)[^[]*\\[([^]]+)\\]")
        set(_soname "${CMAKE_MATCH_1}")
      endif()
    endif()
    set(_found FALSE)
    if(_soname)
      foreach(_s IN LISTS _system)
        if(EXISTS "${_s}/${_soname}")
          set(_found TRUE)
        endif()
      endforeach()
    endif()
    if(NOT _found)
      list(APPEND _dirs "${_dir}")
    endif()
  endforeach()
  set(${out} ${_dirs} PARENT_SCOPE)
endfunction()
vdev_rpath_folders(_vdev_dep_dirs ${OPENBLAS_LINK_LIBRARIES} ${MICROHTTPD_LINK_LIBRARIES}
  ${YAJL_LINK_LIBRARIES} ${ZLIB_LIBRARIES})
set(VDEV_INSTALL_RPATH "$ORIGIN" ${_vdev_dep_dirs})
if(TARGET vdev_mpi)
  vdev_rpath_folders(_vdev_mpi_dirs ${MPI_C_LIBRARIES})
  set_target_properties(vdev_mpi PROPERTIES INSTALL_RPATH_USE_LINK_PATH FALSE
    INSTALL_RPATH "${_vdev_mpi_dirs}")
endif()

# ---- the libraries, the header, the command ------------------------------------
set_target_properties(vdev PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
set_target_properties(vdev_static PROPERTIES OUTPUT_NAME vdev)

install(TARGETS vdev vdev_static EXPORT vdevTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS vdev_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h")

# ---- CMake package: find_package(vdev) -------------------------------------------
set(VDEV_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/vdev)
install(EXPORT vdevTargets NAMESPACE vdev:: DESTINATION ${VDEV_INSTALL_CMAKEDIR})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/vdevConfig.cmake.in
  ${PROJECT_BINARY_DIR}/vdevConfig.cmake INSTALL_DESTINATION ${VDEV_INSTALL_CMAKEDIR}
  PATH_VARS VDEV_INSTALL_PLUGINDIR)
# 0.x: a new minor version may break the API, so only the same minor matches.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/vdevConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/vdevConfig.cmake ${PROJECT_BINARY_DIR}/vdevConfigVersion.cmake
  DESTINATION ${VDEV_INSTALL_CMAKEDIR})

# ---- pkg-config: vdev.pc ---------------------------------------------------------
# Written when installing, with the prefix given then (`--prefix P`, or
# CMAKE_INSTALL_PREFIX), so that pkg-config hands out plain absolute paths.
foreach(_d LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_d}}")
    set(VDEV_PC_${_d} "${CMAKE_INSTALL_${_d}}")
  else()
    set(VDEV_PC_${_d} "\${prefix}/${CMAKE_INSTALL_${_d}}")
  endif()
endforeach()
# What libvdev.a needs: OpenBLAS and yajl as their pkg-config gave them (a
# -L for OpenBLAS's folder where it has one), zlib, libmicrohttpd.
string(JOIN " " VDEV_PC_LIBS_PRIVATE ${OPENBLAS_LDFLAGS} ${YAJL_LDFLAGS} -lz -lmicrohttpd
  -lpthread -lm)
foreach(_lib ${CMAKE_DL_LIBS})
  string(APPEND VDEV_PC_LIBS_PRIVATE " -l${_lib}")
endforeach()
set(VDEV_PC_PREFIX "@VDEV_PC_PREFIX@") # kept for the install step
configure_file(${PROJECT_SOURCE_DIR}/cmake/vdev.pc.in ${PROJECT_BINARY_DIR}/vdev.pc.in @ONLY)
install(CODE "set(VDEV_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  configure_file(\"${PROJECT_BINARY_DIR}/vdev.pc.in\" \"${PROJECT_BINARY_DIR}/vdev.pc\" @ONLY)")
install(FILES ${PROJECT_BINARY_DIR}/vdev.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
