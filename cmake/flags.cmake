# Compiler flags for every vdev target.
set(VDEV_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes
  -Wmissing-prototypes -Wcast-qual -Wvla -Wno-unused-parameter)
if(VDEV_WERROR)
  list(APPEND VDEV_WARNINGS -Werror)
endif()

set(VDEV_SAN_FLAGS "")
if(VDEV_SANITIZE)
  set(VDEV_SAN_FLAGS -fsanitize=${VDEV_SANITIZE} -fno-omit-frame-pointer)
  if(VDEV_SANITIZE MATCHES "undefined")
    list(APPEND VDEV_SAN_FLAGS -fno-sanitize-recover=undefined)
  endif()
endif()

function(vdev_target_flags target)
  # the warnings are C's (a C++ source of a target sets its own)
  target_compile_options(${target} PRIVATE "$<$<COMPILE_LANGUAGE:C>:${VDEV_WARNINGS}>"
    ${VDEV_SAN_FLAGS})
  target_link_options(${target} PRIVATE ${VDEV_SAN_FLAGS})
endfunction()
