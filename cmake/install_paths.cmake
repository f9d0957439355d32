# install_paths.cmake — the paths between installed folders that installed
# files carry (the plugin folder seen from the library's and the program's
# folders, compiled into src/backend/backend.c; the library folder seen from
# the Python package, in its _install.py). Each folder of GNUInstallDirs is
# relative to the prefix (lib, the usual) or absolute
# (-DCMAKE_INSTALL_LIBDIR=/opt/vdev/lib64), and so is
# VDEV_PYTHON_INSTALL_DIR: each is made absolute against the prefix before a
# path between two is taken, so an absolute one is never put under the
# prefix a second time. Functions only, so that the install tests
# (tests/cli_install.sh, python/tests/install_test.sh) run them with
# `cmake -P` on layouts this build was not configured with.

# OUT: DIR as an absolute path: DIR itself when absolute, else PREFIX/DIR.
function(vdev_install_abs out prefix dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "${prefix}/${dir}" PARENT_SCOPE)
  endif()
endfunction()

# OUT: the relative path from folder FROM to folder TO (each relative to
# PREFIX or absolute); "." when they are the same folder.
function(vdev_install_relpath out prefix from to)
  vdev_install_abs(_from "${prefix}" "${from}")
  vdev_install_abs(_to "${prefix}" "${to}")
  file(RELATIVE_PATH _rel "${_from}" "${_to}")
  string(REGEX REPLACE "(.)/$" "\\1" _rel "${_rel}") # "../../" -> "../.."
  if(_rel STREQUAL "")
    set(_rel ".")
  endif()
  set(${out} "${_rel}" PARENT_SCOPE)
endfunction()

# OUT: how the Python package (PYDIR/vdev) reaches the library folder LIBDIR.
# Both relative to the prefix: a relative path, so the installed tree can
# move. Either absolute: LIBDIR's absolute path (PREFIX/LIBDIR when only the
# package's folder is absolute), as nothing ties the two folders together.
function(vdev_python_libdir out prefix pydir libdir)
  if(IS_ABSOLUTE "${pydir}" OR IS_ABSOLUTE "${libdir}")
    vdev_install_abs(_lib "${prefix}" "${libdir}")
  else()
    file(RELATIVE_PATH _lib "/P/${pydir}/vdev" "/P/${libdir}")
    string(REGEX REPLACE "(.)/$" "\\1" _lib "${_lib}") # "../../../" -> "../../.."
  endif()
  set(${out} "${_lib}" PARENT_SCOPE)
endfunction()

# Writes FILE, the package's _install.py: the library folder as
# vdev_python_libdir gives it, and the library's soname version. Run when
# installing (bindings.cmake), with the prefix installed into.
function(vdev_write_python_install file prefix pydir libdir soversion)
  vdev_python_libdir(_lib "${prefix}" "${pydir}" "${libdir}")
  file(WRITE "${file}"
    "\"\"\"Written by cmake --install: where the package finds libvdev.so.\"\"\"\n"
    "LIBDIR_FROM_PACKAGE = \"${_lib}\"\n"
    "SOVERSION = ${soversion}\n")
endfunction()
