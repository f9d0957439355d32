"""Memory governance from Python: LogicalDeviceConfiguration's memory_floor
and memory_priority (set, read back, checked at start-up, frozen after it),
the run-time calls of vdev.config.experimental (get_memory_limits,
set_memory_limits, set_memory_priority, the pressure callback), their errors
with vdev's messages, and examples/python/priority.py. One simulated 3 GiB
card: its budget is 1.50 GiB (3 GiB less the 1.5 GiB driver reserve)."""
import os
import subprocess
import sys
import threading

import pytest

import vdev
from vdev.config import _govern

C = vdev.config
E = C.experimental
L = C.LogicalDeviceConfiguration
MIB, GIB = 1 << 20, 1 << 30
BUDGET = 1536 * MIB
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))


@pytest.fixture
def card(monkeypatch):
    """The one simulated GPU (vdev is shut down, so the environment is read anew)."""
    monkeypatch.setenv("VDEV_SIM_GPUS", "1x3GiB")
    return C.list_physical_devices("GPU")[0]


def three(card):
    """critical (floor 512 MiB, ceiling the budget), low (no floor, 256 MiB),
    and a TensorFlow-style fixed share of 128 MiB."""
    C.set_logical_device_configuration(card, [
        L(memory_floor=512, memory_priority="critical"),
        L(memory_limit=256, memory_floor=0, memory_priority="low"),
        L(memory_limit=128)])


def test_configuration_reads_back_and_starts(card):
    three(card)
    want = [L(memory_floor=512, memory_priority="critical"),
            L(memory_limit=256, memory_floor=0, memory_priority="low"),
            L(memory_limit=128)]
    assert C.get_logical_device_configuration(card) == want
    assert [d.name for d in C.list_logical_devices("GPU")] == [
        "/device:GPU:0", "/device:GPU:1", "/device:GPU:2"]
    # After start-up a ceiling of "the card's budget" reads as the budget.
    assert C.get_logical_device_configuration(card) == [L(memory_limit=1536, memory_floor=512,
                                                          memory_priority="critical")] + want[1:]
    assert E.get_memory_limits("GPU:0") == {
        "floor": 512 * MIB, "ceiling": BUDGET, "priority": "critical", "ceiling_lowered": False,
        "card_budget": BUDGET, "card_floors": 640 * MIB, "card_claimed": 640 * MIB,
        "available": BUDGET - 128 * MIB, "lends": 0, "lent": 0, "borrowed": 0}
    lim = E.get_memory_limits("GPU:1")
    assert (lim["floor"], lim["ceiling"], lim["priority"]) == (0, 256 * MIB, "low")
    lim = E.get_memory_limits("/device:GPU:2")  # any name form
    assert (lim["floor"], lim["ceiling"], lim["priority"]) == (128 * MIB, 128 * MIB, "normal")
    assert E.get_memory_info("GPU:1")["limit"] == 256 * MIB
    # The same split again is nothing; another is TensorFlow's RuntimeError.
    three(card)
    with pytest.raises(RuntimeError) as e:
        C.set_logical_device_configuration(card, [L(memory_limit=128)])
    assert str(e.value) == "Virtual devices cannot be modified after being initialized"


def test_plain_limits_keep_tensorflows_meaning(card):
    C.set_logical_device_configuration(card, [L(memory_limit=256), L(memory_limit=128)])
    assert C.get_logical_device_configuration(card) == [L(memory_limit=256),
                                                        L(memory_limit=128)]
    lim = E.get_memory_limits("GPU:0")  # a fixed share: floor == ceiling
    assert (lim["floor"], lim["ceiling"], lim["priority"]) == (256 * MIB, 256 * MIB, "normal")


def test_configuration_errors(card):
    with pytest.raises(ValueError) as e:
        C.set_logical_device_configuration(card, [L(memory_limit=100, memory_floor=200)])
    assert str(e.value) == ("logical device 0 of /physical_device:GPU:0 has a floor of 200.00 MiB "
                            "above its ceiling of 100.00 MiB")
    with pytest.raises(ValueError) as e:
        C.set_logical_device_configuration(card, [L(memory_priority="urgent")])
    assert str(e.value) == ("memory_priority must be 'low', 'normal', 'high' or 'critical', "
                            "not 'urgent'")
    with pytest.raises(ValueError):
        C.set_logical_device_configuration(card, [L(memory_priority=3)])
    for bad in (-1, True, "512"):
        with pytest.raises(ValueError) as e:
            C.set_logical_device_configuration(card, [L(memory_floor=bad)])
        assert str(e.value) == "memory_floor must be a number of MiB >= 0, not %r" % (bad,)
    with pytest.raises(ValueError) as e:  # TensorFlow's rule without vdev's extras
        C.set_logical_device_configuration(card, [L()])
    assert str(e.value) == "Setting memory limit is required for GPU virtual devices"
    with pytest.raises(ValueError) as e:  # CUDA's numbered priorities: vdev names them
        C.set_logical_device_configuration(card, [L(memory_limit=10, experimental_priority=1)])
    assert "experimental_priority" in str(e.value) and "memory_priority" in str(e.value)
    cpu = C.list_physical_devices("CPU")[0]
    for cfg in (L(memory_floor=0), L(memory_priority="low")):
        with pytest.raises(ValueError) as e:
            C.set_logical_device_configuration(cpu, [cfg, L()])
        assert str(e.value) == ("Setting memory_floor or memory_priority on CPU virtual devices "
                                "is not supported (logical CPUs share the host)")
    assert C.get_logical_device_configuration(card) is None  # nothing was set
    # Floors that do not fit the card fail at start-up, naming card, budget and sum.
    C.set_logical_device_configuration(card, [L(memory_floor=1024), L(memory_floor=1024)])
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        vdev.init()
    assert str(e.value) == (
        "/physical_device:GPU:0: its 2 logical devices' floors sum to 2.00 GiB (2147483648 "
        "bytes), more than the card's budget of 1.50 GiB (1610612736 bytes: 3.00 GiB free less "
        "the 1.50 GiB driver reserve)")


def test_set_memory_limits(card):
    three(card)
    E.set_memory_limits("GPU:1", ceiling="512MiB")  # raise: at once
    lim = E.get_memory_limits("GPU:1")
    assert (lim["floor"], lim["ceiling"], lim["ceiling_lowered"]) == (0, 512 * MIB, False)
    E.set_memory_limits("GPU:1", floor=64 * MIB)  # None keeps the ceiling
    lim = E.get_memory_limits("GPU:1")
    assert (lim["floor"], lim["ceiling"]) == (64 * MIB, 512 * MIB)
    assert E.get_memory_limits("GPU:0")["card_floors"] == 704 * MIB
    E.set_memory_limits("GPU:1", floor=0, ceiling="0.25GiB")  # lower
    lim = E.get_memory_limits("GPU:1")
    assert (lim["floor"], lim["ceiling"], lim["ceiling_lowered"]) == (0, 256 * MIB, True)
    E.set_memory_limits("GPU:1", ceiling=0)  # 0: the card's budget
    assert E.get_memory_limits("GPU:1")["ceiling"] == BUDGET
    E.set_memory_limits("GPU:1", ceiling="1000MB")  # powers of 1000 too
    assert E.get_memory_limits("GPU:1")["ceiling"] == 10**9
    E.set_memory_limits("GPU:1", ceiling=" 512 m ")  # one letter, any case, spaces: as in C
    assert E.get_memory_limits("GPU:1")["ceiling"] == 512 * MIB


def test_set_memory_limits_errors(card):
    three(card)
    cases = [
        # Python's advice, not C's ("10ull << 20"): a plain int is bytes; a
        # size with a unit was meant as written, and is too small
        (dict(floor=10), ValueError,
         "/device:GPU:1: a floor of 10 bytes is less than 1 MiB: sizes are in bytes (did you mean "
         "'10MiB'?)"),
        (dict(floor=0, ceiling="1KiB"), ValueError,
         "/device:GPU:1: a ceiling of '1KiB' (1024 bytes) is less than 1 MiB: a floor or ceiling "
         "other than 0 is at least 1 MiB"),
        (dict(floor="300MiB"), ValueError,
         "/device:GPU:1: floor 300.00 MiB is above the ceiling 256.00 MiB"),
        (dict(ceiling="2GiB"), ValueError,
         "/device:GPU:1: ceiling 2.00 GiB is more than /physical_device:GPU:0's budget of "
         "1.50 GiB"),
        (dict(floor="1000MiB", ceiling="1400MiB"), ValueError,
         "/physical_device:GPU:0: its logical devices' floors would sum to 1.60 GiB, more than "
         "its budget of 1.50 GiB"),
        (dict(floor="1x"), ValueError,
         "floor '1x' is not a size (a whole number or a decimal, then a unit: B, KiB, MiB, GiB, "
         "TiB, KB, MB, GB, TB, K, M, G or T, in any case but 'b')"),
        (dict(floor="2.GiB"), ValueError,
         "floor '2.GiB' is not a size (a whole number or a decimal, then a unit: B, KiB, MiB, "
         "GiB, TiB, KB, MB, GB, TB, K, M, G or T, in any case but 'b')"),
        (dict(floor="1e3MiB"), ValueError,
         "floor '1e3MiB' is not a size (a whole number or a decimal, then a unit: B, KiB, MiB, "
         "GiB, TiB, KB, MB, GB, TB, K, M, G or T, in any case but 'b')"),
        (dict(floor="300000000b"), ValueError,
         "floor '300000000b' is not a size (a whole number or a decimal, then a unit: B, KiB, "
         "MiB, GiB, TiB, KB, MB, GB, TB, K, M, G or T, in any case but 'b')"),
        (dict(floor="1.5B"), ValueError, "floor '1.5B' is not a whole number of bytes"),
        (dict(ceiling=-5), ValueError, "ceiling must be >= 0 bytes, not -5"),
        (dict(floor=1.5), TypeError,
         "floor must be a number of bytes or a size such as '2GiB', not 1.5"),
        (dict(ceiling=True), TypeError,
         "ceiling must be a number of bytes or a size such as '2GiB', not True"),
    ]
    for kw, cls, msg in cases:
        with pytest.raises(cls) as e:
            E.set_memory_limits("GPU:1", **kw)
        assert str(e.value) == msg, kw
    lim = E.get_memory_limits("GPU:1")  # nothing changed
    assert (lim["floor"], lim["ceiling"], lim["ceiling_lowered"]) == (0, 256 * MIB, False)
    with pytest.raises(ValueError) as e:
        E.set_memory_limits("GPU:9", ceiling=0)
    assert str(e.value) == ("No matching devices found for 'GPU:9': /job:localhost/replica:0/"
                            "task:0/device:GPU:9 unknown device (there are 3 logical GPUs)")
    with pytest.raises(ValueError) as e:
        E.get_memory_limits("GPU")
    assert str(e.value).startswith("Failed parsing device name: 'GPU'.")
    with pytest.raises(TypeError):
        E.set_memory_limits(1, floor=0, ceiling=0)


def test_lowered_ceiling_refuses_allocations_and_floor_held_live(card):
    three(card)
    E.set_memory_limits("GPU:1", ceiling="1GiB")
    with vdev.device("GPU:1"):
        t = vdev.zeros([256 * 256 * 1024])  # 256 MiB, live
    with pytest.raises(vdev.OutOfMemoryError) as e:  # others hold the memory live
        E.set_memory_limits("GPU:0", floor="1300MiB")
    assert str(e.value) == (
        "cannot raise the floor now: GPU:0 (critical) asked for a floor of 1.27 GiB and "
        "/physical_device:GPU:0 has 1.12 GiB left for it; GPU:1 (low) holds 256.00 MiB above "
        "its floor, all of it live; would help: freeing memory or lower ceilings on those "
        "devices, a smaller batch")
    assert E.get_memory_limits("GPU:0")["floor"] == 512 * MIB
    E.set_memory_limits("GPU:1", ceiling="100MiB")  # below what is live: refused, never taken
    assert E.get_memory_limits("GPU:1")["ceiling_lowered"] is True
    with pytest.raises(vdev.OutOfMemoryError) as e:
        with vdev.device("GPU:1"):
            vdev.zeros([1])
    assert "the ceiling was lowered at run time: new allocations fail until usage fits under " \
        "it (short by 156.00 MiB)" in str(e.value)
    assert E.get_memory_info("GPU:1")["current"] == 256 * MIB  # the live tensor stays
    del t
    with vdev.device("GPU:1"):
        assert vdev.zeros([1]).numpy().tolist() == [0.0]


def test_priorities(card):
    three(card)
    assert E.get_memory_priority("GPU:2") == "normal"
    E.set_memory_priority("GPU:2", "HIGH")
    assert E.get_memory_priority("GPU:2") == "high"
    assert E.get_memory_limits("GPU:2")["priority"] == "high"
    with pytest.raises(ValueError) as e:
        E.set_memory_priority("GPU:2", "urgent")
    assert str(e.value) == "priority must be 'low', 'normal', 'high' or 'critical', not 'urgent'"
    with pytest.raises(ValueError):
        E.set_memory_priority("GPU:2", None)
    with pytest.raises(ValueError) as e:
        E.set_memory_priority("GPU:3", "low")
    assert str(e.value).startswith("No matching devices found for 'GPU:3'")
    assert E.get_memory_priority("GPU:2") == "high"


def test_pressure_callback(card, capfd):
    three(card)
    got = []
    E.set_memory_pressure_callback("GPU:1", lambda *a: got.append(a))
    assert E.get_memory_pressure_callback("/device:GPU:1") is not None
    with vdev.device("GPU:1"):
        t = vdev.zeros([64 * 256 * 1024])  # 64 MiB
    E.set_memory_limits("GPU:1", ceiling="32MiB")  # the caller's thread is told
    assert got == [("/device:GPU:1", "ceiling", 32 * MIB)]

    def broken(device, kind, nbytes):
        raise KeyError("from the callback")
    E.set_memory_pressure_callback("GPU:1", broken)
    E.set_memory_limits("GPU:1", ceiling="16MiB")  # printed, not raised
    err = capfd.readouterr().err
    assert "Exception in the memory pressure callback" in err and "from the callback" in err
    E.set_memory_pressure_callback("GPU:1", None)
    assert E.get_memory_pressure_callback("GPU:1") is None
    E.set_memory_limits("GPU:1", ceiling="8MiB")
    assert len(got) == 1
    del t
    with pytest.raises(TypeError):
        E.set_memory_pressure_callback("GPU:1", 5)
    with pytest.raises(ValueError):
        E.set_memory_pressure_callback("GPU:7", print)
    E.set_memory_pressure_callback("GPU:2", print)
    vdev.shutdown()  # forgotten with the runtime
    assert _govern._callbacks == {}


def test_pressure_callback_replaced_while_running(card):
    """A callback that reads and replaces the callbacks, from inside and
    while another thread replaces it, deadlocks nowhere; after removal from
    inside itself, the next pressure calls nobody."""
    three(card)
    entered, go, seen = threading.Event(), threading.Event(), []
    hang = 120  # seconds: every wait ends at its event; only a deadlock reaches this

    def slow(device, kind, nbytes):
        entered.set()
        go.wait(hang)
        seen.append(E.get_memory_pressure_callback(device))
        E.set_memory_pressure_callback(device, None)  # from inside

    E.set_memory_pressure_callback("GPU:1", slow)
    with vdev.device("GPU:1"):
        t = vdev.zeros([64 * 256 * 1024])  # 64 MiB
    lower = threading.Thread(target=E.set_memory_limits, args=("GPU:1", 0, 32 * MIB))
    lower.start()
    assert entered.wait(hang)
    other = []
    setter = threading.Thread(target=E.set_memory_pressure_callback,
                              args=("GPU:1", lambda *a: other.append(a)))
    setter.start()
    setter.join(hang)
    assert not setter.is_alive()
    go.set()
    lower.join(hang)
    assert not lower.is_alive()
    assert len(seen) == 1 and seen[0] is not slow  # the new one was in place
    assert E.get_memory_pressure_callback("GPU:1") is None
    E.set_memory_limits("GPU:1", ceiling="16MiB")
    assert other == []
    del t


def test_lending_tells_the_lender(card):
    """A critical device short of memory takes a low device's cached (empty)
    regions; the low device hears 'lent'."""
    C.set_logical_device_configuration(card, [L(memory_floor=0, memory_priority="critical"),
                                              L(memory_floor=0, memory_priority="low")])
    got = []
    E.set_memory_pressure_callback("GPU:1", lambda *a: got.append(a[1]))
    with vdev.device("GPU:1"):
        t = vdev.zeros([1200 * 256 * 1024])  # 1200 MiB, then freed: cached
    del t
    assert E.get_memory_info("GPU:1")["reserved"] >= 1200 * MIB
    with vdev.device("GPU:0"):
        u = vdev.zeros([1000 * 256 * 1024])
    assert "lent" in got and E.get_memory_info("GPU:0")["current"] == 1000 * MIB
    del u


def test_parse_bytes():
    p = _govern.parse_bytes
    assert p(0, "x") == 0 and p(12345, "x") == 12345
    assert p("2GiB", "x") == 2 * GIB and p("1.5 GiB", "x") == 3 * GIB // 2
    assert p("512mib", "x") == 512 * MIB and p("3KB", "x") == 3000 and p("7", "x") == 7
    assert p("0.5KiB", "x") == 512 and p("1TB", "x") == 10**12 and p("2g", "x") == 2 * GIB
    for bad in ("", "GiB", "1..5GiB", "1 PiB", "-1GiB", ".5KiB", "2.GiB", "1e3MiB", "8b"):
        with pytest.raises(ValueError):
            p(bad, "x")


def test_priority_example():
    """examples/python/priority.py: the critical model never sees an
    out-of-memory error and finishes, the secondary models finish theirs,
    the monitor moves their ceilings (timings are never checked)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    env.pop("VDEV_SIM_GPUS", None)
    r = subprocess.run([sys.executable, os.path.join(SRC, "examples", "python", "priority.py"),
                        "--steps", "10"], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[:3] == [
        "One GPU (Simulated GPU), three logical GPUs sharing 1.50 GiB:",
        "  GPU:0 critical model: floor 384.00 MiB, priority critical",
        "  GPU:1, GPU:2 secondary models A and B: no floor, priority low, ceilings moved by the "
        "monitor"]
    assert lines[3].startswith("critical model: 30 steps, 0 out-of-memory errors; median step ")
    assert " ms alone (10 steps after 10 untimed warm-up steps), " in lines[3]
    assert lines[4].startswith("model A: 10 steps, ") and lines[5].startswith("model B: 10 steps, ")
    assert lines[6].startswith("monitor: ") and not lines[6].startswith("monitor: 0 looks")
    r = subprocess.run([sys.executable, os.path.join(SRC, "examples", "python", "priority.py"),
                        "--steps", "5"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.startswith("usage: priority.py")
    assert r.stderr.endswith("priority.py: error: --steps takes a whole number from 10 to 100000, "
                             "not 5\n")
