"""Every test starts vdev fresh: the environment holds no VDEV_* or TF_*
variable but VDEV_SIM_GPUS=3x16GiB (three simulated 16 GiB GPUs), and
vdev.shutdown() runs before and after it, since vdev's configuration freezes
at start-up. The package is the source tree's (PYTHONPATH) over the build's
libvdev.so (VDEV_LIBRARY), as ctest runs it."""
import gc
import os
import subprocess
import sys
import threading

import pytest

import vdev

SIM = "3x16GiB"


def clean_env(monkeypatch, sim=SIM):
    for k in list(os.environ):
        if (k.startswith("VDEV_") or k.startswith("TF_")) and k != "VDEV_LIBRARY":
            monkeypatch.delenv(k)
    if sim is not None:
        monkeypatch.setenv("VDEV_SIM_GPUS", sim)


def from_another_thread(fn):
    """What fn raises (its type and message) when run on a thread of its
    own, or None when it returns."""
    out = []

    def run():
        try:
            fn()
            out.append(None)
        except Exception as e:  # the caller checks what it is
            out.append((type(e), str(e)))
    th = threading.Thread(target=run)
    th.start()
    th.join()
    return out[0]


@pytest.fixture(autouse=True)
def fresh_vdev(monkeypatch):
    clean_env(monkeypatch)
    try:
        vdev.shutdown()
    except RuntimeError:
        # An export left by a failed test (its traceback holds the array):
        # that test has failed already; start this one fresh all the same.
        vdev.distribute._mirrored.free_all()
        vdev._lib.lib.vdev_shutdown()
    vdev.placement.set_policy("copy")
    vdev.config.set_soft_device_placement(False)
    vdev.debugging.set_log_device_placement(False)
    yield
    gc.collect()
    vdev.shutdown()


def capture(monkeypatch, module, name):
    """Every value module.name (a function) returns, in a list, while the
    test runs: the dropout masks a layer draws, say."""
    seen = []
    inner = getattr(module, name)

    def spy(*args, **kwargs):
        seen.append(inner(*args, **kwargs))
        return seen[-1]
    monkeypatch.setattr(module, name, spy)
    return seen


def run_python(code, env=None, timeout=300):
    """Runs code in a fresh interpreter with this one's path and library;
    returns (exit status, stdout, stderr)."""
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True,
                       timeout=timeout)
    return r.returncode, r.stdout, r.stderr
