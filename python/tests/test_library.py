"""Finding libvdev.so: a VDEV_LIBRARY that loads but is not libvdev (another
library), or is another version of it (a function the package binds is
missing), is an ImportError that names the variable, the path and what is
wrong, as a path that does not load is; never an AttributeError. Each import
runs in a fresh interpreter."""
import ctypes.util
import os
import shutil
import subprocess

import pytest

from conftest import run_python

IMPORT = "import vdev"
ADVICE = ("Install vdev with `cmake --install BUILD --prefix P` (the package then finds the "
          "library beside it), or set VDEV_LIBRARY=/path/to/libvdev.so")


def _import_error(library):
    rc, out, err = run_python(IMPORT, env={"VDEV_LIBRARY": library})
    assert rc != 0, out
    last = err.strip().splitlines()[-1]
    assert last.startswith("ImportError: "), err
    assert "AttributeError" not in err, err
    return last[len("ImportError: "):]


def test_another_library():
    z = ctypes.util.find_library("z")  # zlib: Python's own, so always there
    if not z:
        pytest.skip("no zlib to load")
    assert _import_error(z) == (
        "vdev: cannot load libvdev.so; tried %s (VDEV_LIBRARY): not libvdev, or another "
        "version of it than this package's (it lacks the function vdev_version). %s"
        % (z, ADVICE))


def test_another_version(tmp_path):
    """A library with vdev_version but without the rest: the first function
    missing is named."""
    cc = shutil.which(os.environ.get("CC", "cc"))
    if not cc:
        pytest.skip("no C compiler")
    src, so = tmp_path / "old.c", tmp_path / "libvdev.so"
    src.write_text('const char *vdev_version(void) { return "0.0.1"; }\n')
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    assert _import_error(str(so)) == (
        "vdev: cannot load libvdev.so; tried %s (VDEV_LIBRARY): not libvdev, or another "
        "version of it than this package's (it lacks the function vdev_status_str). %s"
        % (so, ADVICE))


def test_a_path_that_does_not_load(tmp_path):
    missing = str(tmp_path / "nothing.so")
    msg = _import_error(missing)
    assert msg.startswith("vdev: cannot load libvdev.so; tried %s (VDEV_LIBRARY): " % missing)
    assert msg.endswith(ADVICE)


def test_the_library_itself():
    rc, out, err = run_python(IMPORT + "; print(vdev._lib.path)")
    assert rc == 0, err
    assert out.strip() == os.environ["VDEV_LIBRARY"]
