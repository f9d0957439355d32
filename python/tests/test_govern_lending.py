"""Memory governance from Python, the cases the probe of governance found:
a device's cached memory (empty regions, none of it live) goes to another
device of the card before an allocation fails, whatever the two priorities;
a preallocated device whose floor and ceiling are lowered gives its empty
region back to the card; and examples/python/priority.py checks the card's
budget up front, as `vdev demo --priority` does, in the same words."""
import os
import subprocess
import sys

import pytest

import vdev

C = vdev.config
E = C.experimental
L = C.LogicalDeviceConfiguration
MIB, GIB = 1 << 20, 1 << 30
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))


@pytest.fixture
def card(monkeypatch):
    """One simulated 4 GiB card: a budget of 2.50 GiB (less the 1.5 GiB reserve)."""
    monkeypatch.setenv("VDEV_SIM_GPUS", "1x4GiB")
    return C.list_physical_devices("GPU")[0]


def test_equal_priority_cache_is_lent(card):
    """GPU:0's growth took the whole budget for 2.5 GiB of tensors, since
    freed; GPU:1, of the same priority, gets 512 MiB of it (before: an OOM
    on an idle card), and GPU:0 hears 'lent'."""
    C.set_logical_device_configuration(card, [L(memory_floor=0), L(memory_floor=0)])
    got = []
    E.set_memory_pressure_callback("GPU:0", lambda *a: got.append(a[1:]))
    with vdev.device("GPU:0"):
        t = [vdev.zeros([n, 1024, 1024]) for n in (256, 384)]  # 1 GiB, 1.5 GiB
    del t
    assert E.get_memory_info("GPU:0")["reserved"] == 2560 * MIB
    with vdev.device("GPU:1"):
        u = vdev.zeros([128, 1024, 1024])  # 512 MiB
    left = E.get_memory_info("GPU:0")["reserved"]
    assert left < 2560 * MIB
    assert got and all(kind == "lent" for kind, _ in got)
    assert sum(n for _, n in got) == 2560 * MIB - left
    # The counters say the same: GPU:0 lent (as often as it heard 'lent'), GPU:1 borrowed.
    l0, l1 = E.get_memory_limits("GPU:0"), E.get_memory_limits("GPU:1")
    assert (l0["lends"], l0["lent"], l0["borrowed"]) == (len(got), 2560 * MIB - left, 0)
    assert (l1["lends"], l1["lent"], l1["borrowed"]) == (0, 0, 2560 * MIB - left)
    del u


def test_higher_priority_cache_is_lent(monkeypatch):
    """The probe's second case (a budget of 6.50 GiB): after GPU:1 (normal,
    floor 2 GiB) frees everything, GPU:2 (low) gets its cached memory above
    its floor; GPU:1 hears 'lent'."""
    monkeypatch.setenv("VDEV_SIM_GPUS", "1x8GiB")
    monkeypatch.setenv("VDEV_LOGICAL_DEVICES", "0:4GiB@critical,2GiB..6GiB,..@low")
    got = []
    E.set_memory_pressure_callback("GPU:1", lambda *a: got.append(a[1]))
    with vdev.device("GPU:1"):
        t = [vdev.zeros([n, 1024, 1024]) for n in (256, 384)]  # 2.5 GiB
    del t
    assert E.get_memory_info("GPU:1")["reserved"] == 2560 * MIB  # the card's whole share
    with vdev.device("GPU:2"):
        u = vdev.zeros([128, 1024, 1024])  # 512 MiB: all the card had left was GPU:1's cache
    assert E.get_memory_info("GPU:2")["current"] == 512 * MIB
    assert "lent" in got and E.get_memory_limits("GPU:1")["floor"] == 2 * GIB
    del u


def test_priority_help_says_who_lends():
    """help(set_memory_priority) says what the C library does: cached
    memory comes from devices of any priority, lower ones first (it said
    "strictly lower" only, as before lending from any priority)."""
    doc = " ".join(E.set_memory_priority.__doc__.split())
    assert "strictly lower priority (lowest first), then those of equal or higher" in doc
    assert "a floor is never given away" in doc


def test_preallocated_region_goes_back(card, monkeypatch):
    """Growth off: GPU:0 preallocated 2 GiB; its floor and ceiling lowered to
    none and 256 MiB while the region is empty give it back, and GPU:1 can
    take 1 GiB (before: 2 GiB stayed reserved and GPU:1 ran out)."""
    monkeypatch.setenv("VDEV_MEMORY_GROWTH", "false")
    C.set_logical_device_configuration(card, [L(memory_limit=2048),
                                              L(memory_floor=0, memory_priority="low")])
    assert E.get_memory_info("GPU:0")["reserved"] == 2 * GIB
    E.set_memory_limits("GPU:0", floor=0, ceiling="256MiB")
    info = E.get_memory_info("GPU:0")
    assert (info["current"], info["reserved"], info["limit"]) == (0, 0, 256 * MIB)
    with vdev.device("GPU:1"):
        u = vdev.zeros([256, 1024, 1024])  # 1 GiB
    assert E.get_memory_info("GPU:1")["current"] == GIB
    del u


def run_example(env_extra, steps="10"):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", **env_extra)
    return subprocess.run([sys.executable, os.path.join(SRC, "examples", "python", "priority.py"),
                           "--steps", steps], env=env, capture_output=True, text=True, timeout=600)


def test_priority_example_refuses_a_small_budget():
    """A 300 MiB card leaves 75 MiB to share: refused up front, exit 1, with
    the message `vdev demo --priority` gives (before: '0 steps, 3
    out-of-memory errors recovered from' and a silent exit 1)."""
    r = run_example({"VDEV_SIM_GPUS": "1x300MiB"})
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == (
        "priority.py: /physical_device:GPU:0 leaves 75.00 MiB to share (what the driver reserve "
        "leaves of its free memory), less than the 276.00 MiB the three models need; run on a "
        "GPU with 501.00 MiB free or more (VDEV_SIM_GPUS=1x501MiB)\n")
    r = run_example({"VDEV_SIM_GPUS": "1x2GiB", "VDEV_MEMORY_FRACTION": "0.1"})
    assert (r.returncode, r.stdout) == (1, "")
    assert r.stderr == (
        "priority.py: /physical_device:GPU:0 leaves 204.80 MiB to share (VDEV_MEMORY_FRACTION=0.1 "
        "of its total memory), less than the 276.00 MiB the three models need; set "
        "VDEV_MEMORY_FRACTION to 0.14 or more\n")


def test_priority_example_same_words_as_the_demo():
    """The C demo and the Python example refuse a card in the same words."""
    vdev_bin = os.path.join(os.path.dirname(os.environ.get("VDEV_LIBRARY", "")), "vdev")
    if not os.access(vdev_bin, os.X_OK):
        pytest.skip("no vdev command beside VDEV_LIBRARY")
    for extra in ({"VDEV_SIM_GPUS": "1x300MiB"},
                  {"VDEV_SIM_GPUS": "1x1GiB", "TF_DEVICE_MIN_SYS_MEMORY_IN_MB": "900"}):
        py = run_example(extra)
        c = subprocess.run([vdev_bin, "demo", "--priority", "--steps", "10"],
                           env=dict(os.environ, **extra), capture_output=True, text=True,
                           timeout=600)
        assert py.returncode == c.returncode == 1
        assert py.stderr.replace("priority.py: ", "vdev demo: ", 1) == c.stderr
