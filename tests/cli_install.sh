#!/usr/bin/env bash
# cli_install.sh — vdev as a user installs it: `cmake --install` into a
# temporary prefix, whose headers are the source's (vdev.h and each part
# under vdev/, which compiles alone from the prefix), then the README's worked
# example (tests/install/) built against the installed files alone, with
# `pkg-config --cflags --libs vdev` and with a CMake project using
# find_package(vdev) (vdev::vdev and vdev::vdev_static), and run on a
# simulated GPU. Each program prints the libvdev file it mapped
# (/proc/self/maps), which must be the prefix's; no installed file may hold
# the build folder's path; the installed command runs from the prefix; and a
# stand-in CUDA plugin put in the prefix's plugin folder is the one the
# shared library, the command and a statically linked program load. Needs
# cmake, pkg-config and a C compiler (exit 77 without).
# Usage: cli_install.sh VDEV SHARED (VDEV: the build's vdev command, whose
# folder is the build folder).
set -u
vdev=$1
. "${BASH_SOURCE%/*}/testlib.sh"
skip() { echo "cli_install: skipped: $*"; exit 77; }

build_logical=$(cd "$(dirname "$vdev")" && pwd)
build=$(cd "$build_logical" && pwd -P)
here=$(cd "$(dirname "$0")" && pwd -P)
consumer=$here/install
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt" | head -n 1; }

cmake_cmd=$(cache CMAKE_COMMAND)
[ -x "$cmake_cmd" ] || cmake_cmd=$(command -v cmake) || skip "cmake not found"
command -v pkg-config >/dev/null 2>&1 || skip "pkg-config not found"
cc=$(cache CMAKE_C_COMPILER)
[ -x "$cc" ] || cc=$(command -v cc) || skip "no C compiler (cc) found"
for tool in nm readelf ldd; do
  command -v $tool >/dev/null 2>&1 || skip "$tool not found"
done
libdir=$(cache CMAKE_INSTALL_LIBDIR); bindir=$(cache CMAKE_INSTALL_BINDIR)
includedir=$(cache CMAKE_INSTALL_INCLUDEDIR)
libdir=${libdir:-lib}; bindir=${bindir:-bin}; includedir=${includedir:-include}
for d in "$libdir" "$bindir" "$includedir"; do
  case $d in /*) skip "an absolute install folder ($d) is outside any --prefix" ;; esac
done
# A sanitized build installs sanitized libraries: programs using them need the
# same runtime. Under ThreadSanitizer the README's example crashes inside
# OpenBLAS (cblas_sgemm calls through its unset dispatch table), in the build
# tree as well as installed, which is not what this test is about: the plain
# and ASan builds test the install.
san=$(cache VDEV_SANITIZE)
case $san in *thread*) skip "ThreadSanitizer build (the plain and ASan builds test the install)" ;; esac
sanflags=""
[ -n "$san" ] && sanflags="-fsanitize=$san -fno-omit-frame-pointer"
cflags_strict="-std=c11 -Wall -Wextra -Werror"

tmp=$(cd "$(mktemp -d)" && pwd -P)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
unset VDEV_SIM_GPUS VDEV_CUDA_PLUGIN VDEV_VISIBLE_DEVICES VDEV_LOGICAL_DEVICES VDEV_MEMORY_GROWTH \
  VDEV_MEMORY_FRACTION TF_GPU_MEMORY_FRACTION TF_FORCE_GPU_ALLOW_GROWTH VDEV_PLACEMENT \
  LD_LIBRARY_PATH PKG_CONFIG_LIBDIR PKG_CONFIG_SYSROOT_DIR CMAKE_PREFIX_PATH vdev_DIR
export OPENBLAS_NUM_THREADS=1

# ---- the plugin folder from the library's and the program's folders ----
# What install.cmake compiles into backend.c, for layouts this build was not
# configured with (prefix /opt/vdev): an absolute LIBDIR or BINDIR is taken
# as it is, never put under the prefix again ("../opt/vdev/lib64/vdev").
cat >"$tmp/paths.cmake" <<EOF
include("$here/../cmake/install_paths.cmake")
foreach(layout "lib|bin" "/opt/vdev/lib64|bin" "lib64|/opt/vdev/sbin" "/usr/lib64|/usr/bin")
  string(REPLACE "|" ";" layout "\${layout}")
  list(GET layout 0 lib)
  list(GET layout 1 bin)
  vdev_install_relpath(from_lib /opt/vdev "\${lib}" "\${lib}/vdev")
  vdev_install_relpath(from_bin /opt/vdev "\${bin}" "\${lib}/vdev")
  message("\${lib} \${bin}: \${from_lib} \${from_bin}")
endforeach()
EOF
out=$("$cmake_cmd" -P "$tmp/paths.cmake" 2>&1)
want="lib bin: vdev ../lib/vdev
/opt/vdev/lib64 bin: vdev ../lib64/vdev
lib64 /opt/vdev/sbin: vdev ../lib64/vdev
/usr/lib64 /usr/bin: vdev ../lib64/vdev"
[ "$out" = "$want" ] && ok || bad "plugin folders (LIBDIR BINDIR: from lib, from bin): $out"

# ---- install ----
"$cmake_cmd" --install "$build" --prefix "$prefix" >"$tmp/install.log" 2>&1 && ok ||
  { bad "cmake --install: $(cat "$tmp/install.log")"; finish; exit 1; }

ver=$("$vdev" --version | awk '{print $2}')
major=${ver%%.*}
L=$prefix/$libdir
[ -f "$L/libvdev.so.$ver" ] && [ ! -L "$L/libvdev.so.$ver" ] && ok || bad "no $libdir/libvdev.so.$ver"
[ "$(readlink "$L/libvdev.so.$major")" = "libvdev.so.$ver" ] && ok ||
  bad "libvdev.so.$major -> '$(readlink "$L/libvdev.so.$major")', not libvdev.so.$ver"
[ "$(readlink "$L/libvdev.so")" = "libvdev.so.$major" ] && ok ||
  bad "libvdev.so -> '$(readlink "$L/libvdev.so")', not libvdev.so.$major"
soname=$(readelf -d "$L/libvdev.so.$ver" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libvdev.so.$major" ] && ok || bad "soname '$soname', not libvdev.so.$major"
[ -f "$L/libvdev.a" ] && ok || bad "no $libdir/libvdev.a"
cmp -s "$prefix/$includedir/vdev.h" "$here/../include/vdev.h" && ok || bad "$includedir/vdev.h missing or not the source's"
# The parts vdev.h includes, each the source's and each compiling alone from
# the prefix (as <vdev/PART.h>).
for f in "$here"/../include/vdev/*.h; do
  p=vdev/$(basename "$f")
  cmp -s "$prefix/$includedir/$p" "$f" && ok || bad "$includedir/$p missing or not the source's"
  printf '#include <%s>\n' "$p" >"$tmp/part.c"
  # shellcheck disable=SC2086
  $cc $cflags_strict -Wpedantic -I"$prefix/$includedir" -fsyntax-only "$tmp/part.c" \
    >"$tmp/cc.log" 2>&1 && ok || bad "installed $p alone: $(cat "$tmp/cc.log")"
done
extra=$(cd "$prefix/$includedir" && ls vdev/*.h | while read -r p; do
  [ -f "$here/../include/$p" ] || echo "$p"; done)
[ -z "$extra" ] && ok || bad "installed headers the source does not have: $extra"
[ -x "$prefix/$bindir/vdev" ] && ok || bad "no $bindir/vdev"
[ -f "$L/pkgconfig/vdev.pc" ] && ok || bad "no $libdir/pkgconfig/vdev.pc"
for f in vdevConfig.cmake vdevConfigVersion.cmake vdevTargets.cmake; do
  [ -f "$L/cmake/vdev/$f" ] && ok || bad "no $libdir/cmake/vdev/$f"
done
if [ -f "$build/libvdev-cuda.so" ]; then
  [ -f "$L/vdev/libvdev-cuda.so" ] && ok || bad "the CUDA plugin was built but not installed in $libdir/vdev"
fi

# ---- nothing installed points into the build folder ----
for b in "$build" "$build_logical"; do
  hits=$(grep -rlF -- "$b" "$prefix")
  [ -z "$hits" ] && ok || bad "installed files hold the build path $b: $hits"
done
# The text a program shows (assertion messages name source files) names them
# from the source tree's root, not by the path it was built at. (Not in a
# sanitizer build, which is never installed: the sanitizers' own tables of
# globals name each object's source file by the path it was compiled from.)
srcdir=$(cd "$(dirname "$0")/.." && pwd -P)
[ -n "$san" ] || for f in "$L/libvdev.so.$ver" "$L/libvdev.a" "$prefix/$bindir/vdev"; do
  readelf -p .rodata "$f" 2>/dev/null | grep -qF "$srcdir/" &&
    bad "$f: the source path $srcdir in its read-only data" || ok
done
for f in "$L/libvdev.so.$ver" "$prefix/$bindir/vdev"; do
  readelf -d "$f" | grep -E 'R(UN)?PATH' | grep -qF "$build" && bad "$f: build folder in its RUNPATH" || ok
  ldd "$f" | grep -qF "$build" && bad "$f resolves a library in the build folder: $(ldd "$f")" || ok
done
# Only vdev_* names leave the installed library.
others=$(nm -D --defined-only "$L/libvdev.so.$ver" | awk '{print $NF}' | grep -v '^vdev_')
[ -z "$others" ] && ok || bad "libvdev.so exports names outside vdev_*: $others"

# ---- the installed command runs from the prefix ----
out=$(VDEV_SIM_GPUS=1x16GiB "$prefix/$bindir/vdev" devices 2>&1); rc=$?
[ $rc -eq 0 ] && ok || bad "installed vdev devices: exit $rc: $out"
has "$out" "/device:GPU:0" && ok || bad "installed vdev devices lists no GPU:0: $out"
out=$("$prefix/$bindir/vdev" --version 2>&1)
[ "$out" = "vdev $ver" ] && ok || bad "installed vdev --version: $out"
if [ -f "$build/libvdev-cuda.so" ]; then
  # The real plugin, found in the prefix: it loads and reports GPUs or why
  # there are none, rather than not being found.
  out=$("$prefix/$bindir/vdev" devices 2>&1)
  has "$out" "not built or not found" && bad "installed vdev does not find its plugin: $out" || ok
  has "$out" "cannot load" && bad "installed vdev cannot load its plugin: $out" || ok
  exports=$(nm -D --defined-only "$L/vdev/libvdev-cuda.so" | awk '{print $NF}')
  [ "$exports" = "vdev_cuda_plugin_open" ] && ok || bad "the plugin exports more than its entry point: $exports"
fi

# ---- pkg-config ----
# vdev.pc alone on pkg-config's search path: it needs no other .pc file,
# shared or static.
export PKG_CONFIG_LIBDIR=$L/pkgconfig
out=$(pkg-config --modversion vdev 2>&1)
[ "$out" = "$ver" ] && ok || bad "pkg-config --modversion vdev: $out (want $ver)"
pc_libdir=$(pkg-config --variable=libdir vdev)
[ "$pc_libdir" = "$L" ] && ok || bad "pkg-config libdir $pc_libdir, not $L"
out=$(pkg-config --variable=plugindir vdev)
[ "$out" = "$L/vdev" ] && ok || bad "pkg-config plugindir $out, not $L/vdev"
# Shared: vdev's own flags alone (no -I of OpenBLAS's, whose cblas.h would
# come ahead of the program's).
out=$(pkg-config --cflags vdev 2>&1)
[ "$(echo $out)" = "-I$prefix/$includedir" ] && ok || bad "pkg-config --cflags vdev: $out"
libs=$(pkg-config --libs vdev 2>&1)
[ "$(echo $libs)" = "-L$L -lvdev" ] && ok || bad "pkg-config --libs vdev: $libs"
static_libs=" $(pkg-config --static --libs vdev) "
for l in -lvdev -lopenblas -lyajl -lz -lmicrohttpd -lpthread -lm -ldl; do
  has "$static_libs" " $l " && ok || bad "pkg-config --static --libs vdev lacks $l: $static_libs"
done
# shellcheck disable=SC2046,SC2086
$cc $cflags_strict $sanflags -o "$tmp/app_pc" "$consumer/readme_example.c" "$consumer/loaded_from.c" \
  $(pkg-config --cflags --libs vdev) -Wl,-rpath,"$pc_libdir" >"$tmp/cc.log" 2>&1 && ok ||
  bad "cc with pkg-config: $(cat "$tmp/cc.log")"
# The static library with what pkg-config --static says it needs: it links.
# shellcheck disable=SC2046,SC2086
$cc $cflags_strict $sanflags -o "$tmp/app_pc_static" "$consumer/readme_example.c" \
  "$consumer/loaded_from.c" $(pkg-config --cflags vdev) "$pc_libdir/libvdev.a" \
  $(pkg-config --static --libs vdev) >"$tmp/cc.log" 2>&1 && ok ||
  bad "cc with libvdev.a and pkg-config --static: $(cat "$tmp/cc.log")"
# shellcheck disable=SC2046,SC2086
$cc $cflags_strict $sanflags -o "$tmp/gpu_reason" "$consumer/gpu_reason.c" \
  $(pkg-config --cflags --libs vdev) -Wl,-rpath,"$pc_libdir" >"$tmp/cc.log" 2>&1 && ok ||
  bad "cc gpu_reason.c with pkg-config: $(cat "$tmp/cc.log")"
resolved=$(ldd "$tmp/app_pc" | sed -n "s/^[[:space:]]*libvdev.so.$major => \([^ ]*\) .*/\1/p")
[ -n "$resolved" ] && [ "$(readlink -f "$resolved")" = "$L/libvdev.so.$ver" ] && ok ||
  bad "app_pc does not resolve libvdev.so.$major in the prefix: $(ldd "$tmp/app_pc")"
VDEV_SIM_GPUS=1x16GiB "$tmp/app_pc" >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 0 ] && [ ! -s "$tmp/err" ] && ok || bad "app_pc: exit $rc: $(cat "$tmp/err")"
out=$(cat "$tmp/out")
[ "$out" = "libvdev: $L/libvdev.so.$ver" ] && ok || bad "app_pc mapped the wrong libvdev: $out"
out=$(VDEV_SIM_GPUS=1x16GiB "$tmp/gpu_reason" 2>&1)
has "$out" "version: $ver" && ok || bad "vdev_version() of the installed library: $out"

unset PKG_CONFIG_LIBDIR # vdev::vdev_static finds its dependencies with pkg-config

# ---- CMake: find_package(vdev) ----
cm_flags=(-DCMAKE_C_COMPILER="$cc" -DCMAKE_C_FLAGS="$cflags_strict $sanflags"
  -DCMAKE_EXE_LINKER_FLAGS="$sanflags" -DCMAKE_BUILD_TYPE=Release)
CMAKE_PREFIX_PATH=$prefix "$cmake_cmd" -S "$consumer" -B "$tmp/cm" "${cm_flags[@]}" \
  -DVDEV_WANT="${ver%.*}" >"$tmp/cm.log" 2>&1 && ok || bad "cmake configure with find_package(vdev): $(cat "$tmp/cm.log")"
"$cmake_cmd" --build "$tmp/cm" -j 2 >"$tmp/cmb.log" 2>&1 && ok || bad "cmake --build of the consumer: $(cat "$tmp/cmb.log")"
[ "$(readlink -m "$(cat "$tmp/cm/plugin_dir.txt")")" = "$L/vdev" ] && ok ||
  bad "vdev_PLUGIN_DIR is $(cat "$tmp/cm/plugin_dir.txt"), not $L/vdev"
VDEV_SIM_GPUS=1x16GiB "$tmp/cm/app" >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 0 ] && [ ! -s "$tmp/err" ] && ok || bad "cmake app: exit $rc: $(cat "$tmp/err")"
out=$(cat "$tmp/out")
[ "$out" = "libvdev: $L/libvdev.so.$ver" ] && ok || bad "cmake app mapped the wrong libvdev: $out"
VDEV_SIM_GPUS=1x16GiB "$tmp/cm/app_static" >"$tmp/out" 2>"$tmp/err"; rc=$?
[ $rc -eq 0 ] && [ ! -s "$tmp/err" ] && ok || bad "cmake app_static: exit $rc: $(cat "$tmp/err")"
out=$(cat "$tmp/out")
[ "$out" = "libvdev: none" ] && ok || bad "app_static mapped a shared libvdev: $out"
ldd "$tmp/cm/app_static" | grep -q libvdev && bad "app_static needs libvdev.so: $(ldd "$tmp/cm/app_static")" || ok
# The version file: the next minor version is not this one (0.x).
minor=${ver#*.}; minor=${minor%%.*}
CMAKE_PREFIX_PATH=$prefix "$cmake_cmd" -S "$consumer" -B "$tmp/cm2" "${cm_flags[@]}" \
  -DVDEV_WANT="$major.$((minor + 1))" >"$tmp/cm2.log" 2>&1 && bad "find_package(vdev $major.$((minor + 1))) accepted $ver" || ok
grep -q "vdevConfig.cmake, version: $ver" "$tmp/cm2.log" && ok ||
  bad "find_package(vdev $major.$((minor + 1))): $(cat "$tmp/cm2.log")"

# ---- plugins: found in the prefix's plugin folder ----
# A stand-in plugin that declines and says where it was loaded from.
mkdir -p "$L/vdev"
plugin=$L/vdev/libvdev-cuda.so
# shellcheck disable=SC2086
$cc -shared -fPIC -Wall -Wextra -Werror -o "$plugin" "$consumer/fake_plugin.c" -I"$prefix/$includedir" \
  >"$tmp/cc.log" 2>&1 && ok || bad "building the stand-in plugin: $(cat "$tmp/cc.log")"
want="CUDA plugin: test plugin at $plugin"
out=$("$tmp/gpu_reason" 2>&1)
has "$out" "reason: $want" && ok || bad "libvdev.so did not load the prefix's plugin: $out"
out=$("$prefix/$bindir/vdev" devices 2>&1)
has "$out" "GPUs: none ($want)" && ok || bad "the installed vdev did not load the prefix's plugin: $out"
# A program that finds libvdev.so.0 through a link in another folder: the
# library's own file is in the prefix, and so are its plugins.
mkdir -p "$tmp/links"
ln -s "$L/libvdev.so.$ver" "$tmp/links/libvdev.so.$major"
out=$(LD_LIBRARY_PATH=$tmp/links "$tmp/gpu_reason" 2>&1)
has "$out" "reason: $want" && ok || bad "libvdev.so.$major through a link lost its plugins: $out"
# A program with the static library inside looks in ../lib/vdev from its folder.
cp "$tmp/cm/gpu_reason_static" "$prefix/$bindir/" && ok || bad "copying gpu_reason_static"
out=$("$prefix/$bindir/gpu_reason_static" 2>&1)
has "$out" "reason: $want" && ok || bad "a static program in the prefix did not load its plugin: $out"
# VDEV_CUDA_PLUGIN still wins.
cp "$plugin" "$tmp/other-plugin.so"
out=$(VDEV_CUDA_PLUGIN=$tmp/other-plugin.so "$tmp/gpu_reason" 2>&1)
has "$out" "reason: CUDA plugin: test plugin at $tmp/other-plugin.so" && ok || bad "VDEV_CUDA_PLUGIN ignored: $out"
out=$(VDEV_CUDA_PLUGIN=$tmp/none.so "$tmp/gpu_reason" 2>&1)
has "$out" "reason: CUDA plugin: cannot load $tmp/none.so (" && ok || bad "VDEV_CUDA_PLUGIN=missing: $out"
# A plugin that is there but does not load is named with the loader's error.
echo "not a shared library" >"$plugin"
out=$("$tmp/gpu_reason" 2>&1)
has "$out" "reason: CUDA plugin: cannot load $plugin (" && ok || bad "a broken plugin in the prefix: $out"
# Without a plugin folder: not found (nothing else on the search path here).
rm -rf "$L/vdev"
out=$("$tmp/gpu_reason" 2>&1)
want="CUDA plugin: libvdev-cuda.so not built or not found (looked in $L/vdev, libvdev's RUNPATH"
want+=" and the loader's search path; set VDEV_CUDA_PLUGIN to its path)"
has "$out" "reason: $want" && ok || bad "no plugin folder: $out"
# Then the loader's search path (LD_LIBRARY_PATH here).
mkdir -p "$tmp/ldpath"
cp "$tmp/other-plugin.so" "$tmp/ldpath/libvdev-cuda.so"
out=$(LD_LIBRARY_PATH=$tmp/ldpath "$tmp/gpu_reason" 2>&1)
has "$out" "reason: CUDA plugin: test plugin at $tmp/ldpath/libvdev-cuda.so" && ok ||
  bad "a plugin on LD_LIBRARY_PATH: $out"
echo "not a shared library" >"$tmp/ldpath/libvdev-cuda.so"
out=$(LD_LIBRARY_PATH=$tmp/ldpath "$tmp/gpu_reason" 2>&1)
has "$out" "reason: CUDA plugin: cannot load libvdev-cuda.so ($tmp/ldpath/libvdev-cuda.so: " && ok ||
  bad "a broken plugin on LD_LIBRARY_PATH: $out"

finish
