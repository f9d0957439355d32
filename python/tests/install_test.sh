#!/usr/bin/env bash
# install_test.sh — the Python package as a user installs it: `cmake --install`
# of this build into a temporary prefix puts the package under the prefix's
# Python folder beside libvdev.so, libvdev-torch-alloc.so and
# vdev_torch_alloc.h; Python with nothing but PYTHONPATH (no VDEV_LIBRARY, no
# build folder) imports it, loads the prefix's libvdev.so, trains a model,
# shares a tensor with numpy through DLPack, finds the prefix's PyTorch
# allocator, and runs examples/python/three_models.py; without PYTHONPATH and
# VDEV_LIBRARY a missing library is an ImportError that says what to do; no
# installed Python file holds the build folder's path.
# Usage: install_test.sh BUILD PYTHON PYDIR LIBDIR (PYDIR, LIBDIR relative to the prefix).
# PYTHON_PRELOAD: a sanitizer's runtime to preload into Python (sanitized builds).
set -u
build=$1 pydir=$3 libdir=$4
py=("$2")
[ -n "${PYTHON_PRELOAD:-}" ] && py=(env "LD_PRELOAD=$PYTHON_PRELOAD" "$2")
src=$(cd "$(dirname "$0")/../.." && pwd)
fail=0; pass=0
ok()  { pass=$((pass + 1)); }
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
unset VDEV_LIBRARY PYTHONPATH LD_LIBRARY_PATH $(env | sed -n 's/^\(VDEV_[A-Z_]*\)=.*/\1/p')
export OPENBLAS_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1

cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 && ok ||
  { bad "cmake --install: $(cat "$tmp/install.log")"; echo "$pass passed, $fail failed"; exit 1; }
pkg=$prefix/$pydir/vdev
for f in __init__.py _lib.py _install.py config/__init__.py config/experimental.py torch.py; do
  [ -f "$pkg/$f" ] && ok || bad "no $pydir/vdev/$f"
done
[ -f "$prefix/$libdir/libvdev-torch-alloc.so" ] && ok || bad "no $libdir/libvdev-torch-alloc.so"
[ -f "$prefix/include/vdev_torch_alloc.h" ] && ok || bad "no include/vdev_torch_alloc.h"
# The header's example gives PyTorch the raising allocation function (a NULL
# from vdev_torch_malloc would become a tensor over address 0), which it
# declares and the installed library exports (when built with C++).
hdr=$prefix/include/vdev_torch_alloc.h
grep -qF '"libvdev-torch-alloc.so", "vdev_torch_malloc_raising", "vdev_torch_free")' "$hdr" &&
  ok || bad "vdev_torch_alloc.h's example does not name vdev_torch_malloc_raising"
if nm -D --defined-only "$prefix/$libdir/libvdev-torch-alloc.so" |
  grep -qw vdev_torch_malloc_raising; then
  printf '#include "vdev_torch_alloc.h"\nvoid *(*f)(ssize_t, int, cudaStream_t) = %s;\n' \
    vdev_torch_malloc_raising >"$tmp/raising.c"
  cc -std=c11 -Wall -Werror -I"$prefix/include" -fsyntax-only "$tmp/raising.c" \
    >"$tmp/cc.log" 2>&1 && ok ||
    bad "vdev_torch_malloc_raising in the installed header: $(cat "$tmp/cc.log")"
fi
hits=$(grep -rlF -- "$build" "$prefix/$pydir" "$prefix/$libdir/libvdev-torch-alloc.so")
[ -z "$hits" ] && ok || bad "installed files hold the build path: $hits"
readelf -d "$prefix/$libdir/libvdev-torch-alloc.so" | grep -q 'R.*PATH.*\[\$ORIGIN\]' && ok ||
  bad "libvdev-torch-alloc.so does not look beside itself: $(readelf -d "$prefix/$libdir/libvdev-torch-alloc.so" | grep PATH)"

# _install.py's path to the library for layouts this build was not
# configured with (prefix /usr/local): relative when both folders are under
# the prefix; an absolute package folder (-DVDEV_PYTHON_INSTALL_DIR=/opt/pyvdev)
# or library folder gives the library folder's absolute path.
cat >"$tmp/pypaths.cmake" <<EOF
include("$src/cmake/install_paths.cmake")
foreach(layout "lib/python3.11/dist-packages|lib" "/opt/pyvdev|lib" "/opt/pyvdev|/opt/vdev/lib64"
               "lib/python3/dist-packages|/opt/vdev/lib64")
  string(REPLACE "|" ";" layout "\${layout}")
  list(GET layout 0 py)
  list(GET layout 1 lib)
  vdev_write_python_install("$tmp/_install.py" /usr/local "\${py}" "\${lib}" 0)
  file(STRINGS "$tmp/_install.py" line REGEX "^LIBDIR_FROM_PACKAGE")
  message("\${py} \${lib}: \${line}")
endforeach()
EOF
out=$(cmake -P "$tmp/pypaths.cmake" 2>&1)
want='lib/python3.11/dist-packages lib: LIBDIR_FROM_PACKAGE = "../../.."
/opt/pyvdev lib: LIBDIR_FROM_PACKAGE = "/usr/local/lib"
/opt/pyvdev /opt/vdev/lib64: LIBDIR_FROM_PACKAGE = "/opt/vdev/lib64"
lib/python3/dist-packages /opt/vdev/lib64: LIBDIR_FROM_PACKAGE = "/opt/vdev/lib64"'
[ "$out" = "$want" ] && ok || bad "_install.py (PYDIR LIBDIR: the line): $out"
# This install's: the library folder from the package folder.
rel=$(realpath -m --relative-to="$prefix/$pydir/vdev" "$prefix/$libdir")
grep -qxF "LIBDIR_FROM_PACKAGE = \"$rel\"" "$pkg/_install.py" && ok ||
  bad "installed _install.py: $(cat "$pkg/_install.py")"

# The installed package, run from outside the source and build folders.
cd "$tmp"
out=$(PYTHONPATH=$prefix/$pydir VDEV_SIM_GPUS=2x1GiB "${py[@]}" - "$prefix" <<'EOF' 2>&1
import os, sys
import numpy as np
import vdev, vdev.torch
prefix = sys.argv[1]
print("library", os.path.realpath(vdev._lib.path).startswith(os.path.realpath(prefix)))
print("package", os.path.realpath(vdev.__file__).startswith(os.path.realpath(prefix)))
with vdev.device("GPU:1"):
    model = vdev.models.MLP([4, 8, 1], seed=1)
x = vdev.random.uniform([16, 4], -1, 1, seed=2)
y = vdev.reduce_sum(x, axis=1, keepdims=True)
opt = vdev.optimizers.Adam(0.01)
mse = vdev.losses.MeanSquaredError()
first = None
for _ in range(200):
    with vdev.GradientTape() as tape:
        loss = mse(y, model(x))
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    first = first or float(loss)
print("trained", float(loss) < first / 2)
print("dlpack", np.from_dlpack(x).shape)
print("torchlib", os.path.realpath(vdev.torch.library_path()).startswith(os.path.realpath(prefix)),
      os.path.exists(vdev.torch.library_path()))
vdev.torch.set_device(0, "GPU:1")
print("memory", vdev.config.experimental.get_memory_info("GPU:1")["current"] > 0)
EOF
)
for want in "library True" "package True" "trained True" "dlpack (16, 4)" "torchlib True True" \
            "memory True"; do
  grep -qxF "$want" <<<"$out" && ok || bad "installed package: no line '$want' in: $out"
done

out=$(PYTHONPATH=$prefix/$pydir "${py[@]}" "$src/examples/python/three_models.py" --epochs 1 --steps 5 2>&1)
grep -q "^epoch 1/1  loss  model 1 " <<<"$out" && ok || bad "three_models.py with the installed package: $out"

# Without the install, nothing to load: an ImportError saying what to do
# (unless this machine has a libvdev.so.0 installed for the system loader).
if ! ldconfig -p 2>/dev/null | grep -q 'libvdev\.so\.0 '; then
  out=$(PYTHONPATH=$src/python "${py[@]}" -c "import vdev" 2>&1)
  grep -q "ImportError: vdev: cannot load libvdev.so; tried libvdev.so.0 (the system loader)" <<<"$out" &&
    grep -q "set VDEV_LIBRARY=/path/to/libvdev.so" <<<"$out" && ok || bad "import without a library: $out"
fi
out=$(PYTHONPATH=$src/python VDEV_LIBRARY=$tmp/none.so "${py[@]}" -c "import vdev" 2>&1)
grep -q "tried $tmp/none.so (VDEV_LIBRARY): " <<<"$out" && ok || bad "a bad VDEV_LIBRARY: $out"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
