"""A checkpoint save that the file system refuses raises the class that
TensorFlow's file system gives the errno (ErrnoToCode): a full disk
(ENOSPC) ResourceExhaustedError, a file over the size limit (EFBIG)
OutOfRangeError, a folder it may not write (EACCES) PermissionDeniedError,
no folder (ENOENT) NotFoundError; each with vdev's message. The first three
run a child process: in a small tmpfs of its own mount namespace, under
`ulimit -f`, and as an unprivileged user (root writes anywhere); where a
container forbids the namespace, or an unprivileged user cannot read the
package, those two are skipped, saying why, and the test of the mapping
alone covers their errno values."""
import errno
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
    env, cmd = _env(), [sys.executable, "-c", CHILD, path]
    if prefix and env.get("LD_PRELOAD"):
        # a sanitizer's runtime goes to Python alone (ThreadSanitizer's,
        # preloaded into the shell, crashes it), as cmake/bindings.cmake says
        cmd = ["env", "LD_PRELOAD=" + env.pop("LD_PRELOAD")] + cmd
    r = subprocess.run(list(prefix) + cmd, env=env, preexec_fn=preexec, capture_output=True,
                       text=True, timeout=600)  # a hang's bound, on a loaded machine too
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


def test_each_errno_of_a_checkpoint_message_gives_tensorflows_class():
    """The mapping itself, for every errno it names (the end-to-end tests
    below need a mount namespace or an unprivileged user, which some
    containers do not give)."""
    io = vdev.errors._NAMES.index("VDEV_ERR_IO")
    for name, cls in vdev.errors._ERRNO_CLASS.items():
        if not hasattr(errno, name):
            continue
        reason = os.strerror(getattr(errno, name))
        e = vdev.errors.from_status(io, "checkpoint 'c': cannot write 't': " + reason)
        assert type(e) is cls, (name, reason, type(e))
    e = vdev.errors.from_status(io, "checkpoint 'c': cannot write 't': Input/output error")
    assert type(e) is vdev.errors.UnknownError
    e = vdev.errors.from_status(io, "checkpoint 'c' is damaged: 1 byte of data after the last "
                                    "entry")
    assert type(e) is vdev.errors.DataLossError
    # only checkpoint messages: another file error keeps VDEV_ERR_IO's class
    e = vdev.errors.from_status(io, "VDEV_TRACE_FILE=\"x\": cannot open for writing: "
                                    "No space left on device")
    assert type(e) is not vdev.errors.ResourceExhaustedError


def _namespaces():
    """Whether this machine lets an unprivileged process make a user and mount
    namespace (many containers forbid it)."""
    try:
        return subprocess.run(["unshare", "--mount", "--map-root-user", "true"],
                              capture_output=True, timeout=120).returncode == 0
    except OSError:
        return False


def _reachable_by_others(paths):
    """Whether a user other than the owner can reach and read every path."""
    for p in paths:
        p = os.path.abspath(p)
        while True:
            st = os.stat(p)
            need = 0o001 if os.path.isdir(p) else 0o004
            if not st.st_mode & need:
                return False
            parent = os.path.dirname(p)
            if parent == p:
                break
            p = parent
    return True


def test_a_full_disk_is_resource_exhausted(folder):
    if not _namespaces():
        pytest.skip("no user and mount namespaces here (a container's seccomp profile forbids "
                    "them): the mapping test covers ENOSPC")
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

    env = _env()
    lib = env.get("VDEV_LIBRARY", os.path.dirname(vdev.__file__))
    if os.geteuid() == 0 and not _reachable_by_others(
            [sys.executable, lib, os.path.dirname(vdev.__file__), folder]):
        pytest.skip("the package or its library lies where an unprivileged user cannot read "
                    "it (a checkout in /root): the mapping test covers EACCES")

    def unprivileged():
        if os.geteuid() == 0:  # root ignores the folder's permission bits
            os.setgid(65534)
            os.setuid(65534)

    cls, msg = _save_in_child(path, preexec=unprivileged)
    assert (cls, msg) == ("PermissionDeniedError",
                          "checkpoint '%s': cannot create '%s': Permission denied"
                          % (path, _tmp_of(path, msg)))


def test_no_folder_is_not_found(tmp_path):
    # save_checkpoint makes a missing folder (as TensorFlow's saver does), so
    # the folder is a dangling link: a name it cannot make a folder of
    (tmp_path / "no").symlink_to(tmp_path / "gone" / "deeper")
    path = tmp_path / "no" / "ckpt.safetensors"
    with pytest.raises(vdev.errors.NotFoundError) as e:
        vdev.train.save_checkpoint(path, {"w": vdev.constant([1.0])})
    assert str(e.value).startswith("checkpoint '%s': cannot create '%s/.vdev-"
                                   % (path, tmp_path / "no"))
    assert str(e.value).endswith(".tmp': No such file or directory")
    assert e.value.status == "VDEV_ERR_IO"
