# bindings.cmake — what lets other frameworks use vdev: the PyTorch allocator
# (libvdev-torch-alloc.so, contrib/torch_alloc/) and the Python package
# (python/vdev/), with their tests and install rules. Included from the
# top-level CMakeLists.txt after the library and the install rules.

# ---- libvdev-torch-alloc.so ------------------------------------------------------
# PyTorch loads it by path (torch.cuda.memory.CUDAPluggableAllocator), so it
# has no soname version; it links libvdev.so, found next to it ($ORIGIN), so
# it shares the runtime with every other user of libvdev.so in the process.
add_library(vdev_torch_alloc SHARED ${PROJECT_SOURCE_DIR}/contrib/torch_alloc/torch_alloc.c)
set_target_properties(vdev_torch_alloc PROPERTIES OUTPUT_NAME vdev-torch-alloc
  C_VISIBILITY_PRESET hidden CXX_VISIBILITY_PRESET hidden INSTALL_RPATH "$ORIGIN")
# vdev_torch_malloc_raising, the function PyTorch is given, throws a C++
# exception when an allocation fails (PyTorch takes a NULL for a block): it
# needs a C++ compiler (build-essential has one); without one vdev.torch
# refuses to install the allocator, saying why.
include(CheckLanguage)
check_language(CXX)
if(CMAKE_CXX_COMPILER)
  enable_language(CXX)
  target_sources(vdev_torch_alloc PRIVATE ${PROJECT_SOURCE_DIR}/contrib/torch_alloc/torch_alloc_raise.cpp)
  set_source_files_properties(${PROJECT_SOURCE_DIR}/contrib/torch_alloc/torch_alloc_raise.cpp
    ${PROJECT_SOURCE_DIR}/contrib/torch_alloc/test_torch_alloc_raise.cpp
    PROPERTIES COMPILE_OPTIONS "-Wall;-Wextra;$<$<BOOL:${VDEV_WERROR}>:-Werror>")
  # its test catches the exception, loading the library with dlopen as PyTorch does
  add_executable(test_torch_alloc_raise
    ${PROJECT_SOURCE_DIR}/contrib/torch_alloc/test_torch_alloc_raise.cpp)
  target_include_directories(test_torch_alloc_raise PRIVATE ${PROJECT_SOURCE_DIR}/include
    ${PROJECT_SOURCE_DIR}/contrib/torch_alloc)
  target_compile_definitions(test_torch_alloc_raise PRIVATE
    VDEV_TORCH_ALLOC_LIB="$<TARGET_FILE:vdev_torch_alloc>")
  target_link_libraries(test_torch_alloc_raise PRIVATE ${CMAKE_DL_LIBS})
  add_dependencies(test_torch_alloc_raise vdev_torch_alloc)
  vdev_target_flags(test_torch_alloc_raise)
  add_test(NAME test_torch_alloc_raise COMMAND test_torch_alloc_raise)
  set_tests_properties(test_torch_alloc_raise PROPERTIES TIMEOUT 300
    ENVIRONMENT "OPENBLAS_NUM_THREADS=1")
endif()
target_include_directories(vdev_torch_alloc PUBLIC
  $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/contrib/torch_alloc>)
target_link_libraries(vdev_torch_alloc PRIVATE vdev Threads::Threads ${CMAKE_DL_LIBS})
vdev_target_flags(vdev_torch_alloc)
install(TARGETS vdev_torch_alloc LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${PROJECT_SOURCE_DIR}/contrib/torch_alloc/vdev_torch_alloc.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# Its test loads it with dlopen, as PyTorch does, and links no vdev itself.
add_executable(test_torch_alloc ${PROJECT_SOURCE_DIR}/contrib/torch_alloc/test_torch_alloc.c)
target_include_directories(test_torch_alloc PRIVATE ${PROJECT_SOURCE_DIR}/include
  ${PROJECT_SOURCE_DIR}/contrib/torch_alloc)
target_compile_options(test_torch_alloc PRIVATE -UNDEBUG)
target_compile_definitions(test_torch_alloc PRIVATE
  VDEV_TORCH_ALLOC_LIB="$<TARGET_FILE:vdev_torch_alloc>")
target_link_libraries(test_torch_alloc PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
add_dependencies(test_torch_alloc vdev_torch_alloc)
vdev_target_flags(test_torch_alloc)
add_test(NAME test_torch_alloc COMMAND test_torch_alloc)
set_tests_properties(test_torch_alloc PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
  ENVIRONMENT "OPENBLAS_NUM_THREADS=1")

# ---- the Python package ------------------------------------------------------------
# Pure Python over libvdev.so (ctypes): nothing to compile. The interpreter is
# VDEV_PYTHON, by default the first of /usr/bin/python3 and the python3 on
# PATH that has numpy and pytest (Debian's python3-numpy, python3-pytest), else
# the first python3 found (the tests then report themselves skipped).
set(VDEV_PYTHON "" CACHE FILEPATH "Python 3 for the Python package's tests and install folder")
if(NOT VDEV_PYTHON)
  set(_vdev_py_first "")
  find_program(_vdev_py_path NAMES python3 NO_CACHE)
  foreach(_py /usr/bin/python3 ${_vdev_py_path})
    if(EXISTS "${_py}")
      if(NOT _vdev_py_first)
        set(_vdev_py_first "${_py}")
      endif()
      execute_process(COMMAND "${_py}" -c "import numpy, pytest" RESULT_VARIABLE _rc
        OUTPUT_QUIET ERROR_QUIET)
      if(_rc EQUAL 0)
        set(VDEV_PYTHON "${_py}" CACHE FILEPATH "" FORCE)
        break()
      endif()
    endif()
  endforeach()
  if(NOT VDEV_PYTHON)
    set(_vdev_python_found "${_vdev_py_first}")
  endif()
endif()
set(_vdev_py "${VDEV_PYTHON}")
if(NOT _vdev_py AND _vdev_python_found)
  set(_vdev_py "${_vdev_python_found}")
endif()
set(VDEV_PYTHON_MISSING "")
if(NOT _vdev_py)
  set(VDEV_PYTHON_MISSING "no python3 found")
elseif(NOT VDEV_PYTHON)
  set(VDEV_PYTHON_MISSING "${_vdev_py} lacks numpy or pytest (Debian: python3-numpy python3-pytest)")
endif()

# Where `cmake --install` puts the package, relative to the prefix: the
# interpreter's own layout (lib/python3.11/dist-packages for Debian's Python,
# which reads it under /usr and /usr/local; lib/python3.X/site-packages for
# others).
set(VDEV_PYTHON_INSTALL_DIR "" CACHE PATH
  "Install folder of the Python package (relative to the prefix, or absolute)")
if(NOT VDEV_PYTHON_INSTALL_DIR)
  set(_dir "lib/python3/dist-packages")
  if(_vdev_py)
    execute_process(COMMAND "${_vdev_py}" -c
      "import sys, sysconfig; v = '%d.%d' % sys.version_info[:2]; print('lib/python%s/%s' % (v, 'dist-packages' if 'dist-packages' in sysconfig.get_path('purelib') else 'site-packages'))"
      OUTPUT_VARIABLE _out OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc ERROR_QUIET)
    if(_rc EQUAL 0 AND _out)
      set(_dir "${_out}")
    endif()
  endif()
  set(VDEV_PYTHON_INSTALL_DIR "${_dir}")
endif()

# The package finds the library from its own folder: _install.py holds the
# path from <pydir>/vdev to the library folder (relative; absolute when
# either folder is: cmake/install_paths.cmake). Written when installing, for
# the prefix installed into, as vdev.pc is.
install(CODE "include(\"${PROJECT_SOURCE_DIR}/cmake/install_paths.cmake\")
  vdev_write_python_install(\"${PROJECT_BINARY_DIR}/python/_install.py\"
    \"\${CMAKE_INSTALL_PREFIX}\" \"${VDEV_PYTHON_INSTALL_DIR}\" \"${CMAKE_INSTALL_LIBDIR}\"
    ${PROJECT_VERSION_MAJOR})")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/vdev DESTINATION ${VDEV_PYTHON_INSTALL_DIR}
  FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
install(FILES ${PROJECT_BINARY_DIR}/python/_install.py
  DESTINATION ${VDEV_PYTHON_INSTALL_DIR}/vdev)

# ---- the Python tests ----------------------------------------------------------------
# One ctest per python/tests/test_*.py, with the source tree's package over
# this build's libvdev.so. Under a sanitizer the library needs the
# sanitizer's runtime loaded first, so it is preloaded into Python:
# AddressSanitizer's with leak checking off (Python itself keeps memory until
# exit), ThreadSanitizer's stopping at the first report.
file(GLOB VDEV_PY_TESTS CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/python/tests/test_*.py)
set(_vdev_py_env "VDEV_LIBRARY=$<TARGET_FILE:vdev>" "PYTHONPATH=${PROJECT_SOURCE_DIR}/python"
  "PYTHONDONTWRITEBYTECODE=1" "OPENBLAS_NUM_THREADS=1")
set(_vdev_py_skip "${VDEV_PYTHON_MISSING}")
if(VDEV_SANITIZE MATCHES "thread")
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libtsan.so
    OUTPUT_VARIABLE _tsan OUTPUT_STRIP_TRAILING_WHITESPACE)
  list(APPEND _vdev_py_env "LD_PRELOAD=${_tsan}" "TSAN_OPTIONS=halt_on_error=1")
elseif(VDEV_SANITIZE MATCHES "address")
  execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libasan.so
    OUTPUT_VARIABLE _asan OUTPUT_STRIP_TRAILING_WHITESPACE)
  list(APPEND _vdev_py_env "LD_PRELOAD=${_asan}"
    "ASAN_OPTIONS=detect_leaks=0:handle_segv=0:allow_user_segv_handler=1")
endif()
foreach(_t ${VDEV_PY_TESTS} ${PROJECT_SOURCE_DIR}/python/tests/gpu_torch_allocator.py)
  get_filename_component(_name ${_t} NAME_WE)
  if(_vdev_py_skip)
    add_test(NAME python_${_name} COMMAND sh -c "echo 'SKIP: ${_vdev_py_skip}'; exit 77")
  elseif(_name STREQUAL "gpu_torch_allocator")
    add_test(NAME python_${_name} COMMAND ${VDEV_PYTHON} ${_t})
  else()
    add_test(NAME python_${_name} COMMAND ${VDEV_PYTHON} -m pytest -q -p no:cacheprovider ${_t})
  endif()
  set_tests_properties(python_${_name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
    ENVIRONMENT "${_vdev_py_env}" LABELS python)
endforeach()
set_tests_properties(python_gpu_torch_allocator PROPERTIES LABELS "python;cuda-torch")

# `cmake --install` of this build, then the installed package run alone.
if(_vdev_py_skip)
  add_test(NAME python_install COMMAND sh -c "echo 'SKIP: ${_vdev_py_skip}'; exit 77")
else()
  add_test(NAME python_install COMMAND bash ${PROJECT_SOURCE_DIR}/python/tests/install_test.sh
    ${CMAKE_BINARY_DIR} ${VDEV_PYTHON} ${VDEV_PYTHON_INSTALL_DIR} ${CMAKE_INSTALL_LIBDIR})
endif()
# (The sanitizer's runtime goes to Python alone: preloaded into bash,
# ThreadSanitizer's crashes it.)
list(FILTER _vdev_py_env EXCLUDE REGEX "^(VDEV_LIBRARY|PYTHONPATH)=")
list(TRANSFORM _vdev_py_env REPLACE "^LD_PRELOAD=" "PYTHON_PRELOAD=")
set_tests_properties(python_install PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
  ENVIRONMENT "${_vdev_py_env}" LABELS python
  RESOURCE_LOCK vdev_build_install) # as tests/cli_install.sh: both install this build
