"""A checkpoint save that the file system refuses raises the class that
TensorFlow's file system gives the errno (ErrnoToCode): a full disk
(ENOSPC) ResourceExhaustedError, a file over the size limit (EFBIG)
OutOfRangeError, a folder it may not write (EACCES) PermissionDeniedError,
no folder (ENOENT) NotFoundError; each with vdev's message. The first three
run a child process: in a small tmpfs of its own mount namespace, under
`ulimit -f`, and as an unprivileged user (root writes anywhere)."""
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile

import numpy as np
import pytest

import vdev

CHILD = r"""
import sys
import numpy as np
import vdev
try:
    vdev.train.save_checkpoint(sys.argv[1], {"w": vdev.constant(np.zeros(1 << 16, np.float32))})
    print("saved")
except vdev.errors.OpError as e:
    print("%s|%s" % (type(e).__name__, e))
"""


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        os.path.abspath(p) for p in env.get("PYTHONPATH", ".").split(os.pathsep) if p)
    if "VDEV_LIBRARY" in env:
        env["VDEV_LIBRARY"] = os.path.abspath(env["VDEV_LIBRARY"])
    return env


def _save_in_child(path, prefix=(), preexec=None):
    """(class name, message) of the child's save to path."""
    r = subprocess.run(list(prefix) + [sys.executable, "-c", CHILD, path], env=_env(),
                       preexec_fn=preexec, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return tuple(r.stdout.strip().split("|", 1))


@pytest.fixture
def folder():
    """A folder anyone may enter (a child may run as another user)."""
    d = tempfile.mkdtemp(prefix="vdev-errno-")
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _tmp_of(path, message):
    """The temporary file's name the message gives (its pid is the child's)."""
    return message.split("'")[3]


def test_a_full_disk_is_resource_exhausted(folder):
    full = os.path.join(folder, "full")
    os.mkdir(full)
    path = os.path.join(full, "ckpt.safetensors")
    cls, msg = _save_in_child(path, prefix=[
        "unshare", "--mount", "--map-root-user", "sh", "-c",
        'mount -t tmpfs -o size=16k tmpfs "$0" && exec "$@"', full])
    assert (cls, msg) == ("ResourceExhaustedError",
                          "checkpoint '%s': cannot write '%s': No space left on device"
                          % (path, _tmp_of(path, msg)))
    assert os.path.dirname(_tmp_of(path, msg)) == full


def test_a_file_over_the_size_limit_is_out_of_range(folder):
    path = os.path.join(folder, "ckpt.safetensors")

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    cls, msg = _save_in_child(path, preexec=limit)
    assert (cls, msg) == ("OutOfRangeError", "checkpoint '%s': cannot write '%s': File too large"
                          % (path, _tmp_of(path, msg)))
    assert os.listdir(folder) == []  # the temporary file is gone


def test_a_folder_without_write_permission_is_permission_denied(folder):
    ro = os.path.join(folder, "ro")
    os.mkdir(ro, 0o555)
    os.chmod(ro, 0o555)
    path = os.path.join(ro, "ckpt.safetensors")

    def unprivileged():
        if os.geteuid() == 0:  # root ignores the folder's permission bits
            os.setgid(65534)
            os.setuid(65534)

    cls, msg = _save_in_child(path, preexec=unprivileged)
    assert (cls, msg) == ("PermissionDeniedError",
                          "checkpoint '%s': cannot create '%s': Permission denied"
                          % (path, _tmp_of(path, msg)))


def test_no_folder_is_not_found(tmp_path):
    path = tmp_path / "no" / "ckpt.safetensors"
    with pytest.raises(vdev.errors.NotFoundError) as e:
        vdev.train.save_checkpoint(path, {"w": vdev.constant([1.0])})
    assert str(e.value).startswith("checkpoint '%s': cannot create '%s/.vdev-"
                                   % (path, tmp_path / "no"))
    assert str(e.value).endswith(".tmp': No such file or directory")
    assert e.value.status == "VDEV_ERR_IO"
