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
  C_VISIBILITY_PRESET hidden INSTALL_RPATH "$ORIGIN")
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
