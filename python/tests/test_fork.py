"""A process forked from one whose vdev runs (multiprocessing's default start
method on Linux) gets none of vdev's threads: its use of the parent's
tensors and devices is an UnimplementedError saying to use spawn, at once,
where it used to wait forever; the parent goes on; a 'spawn' child starts
its own vdev and works."""
import multiprocessing
import os
import signal

import pytest

import vdev


def _in_fork(fn):
    """Runs fn() in a forked child (at most 60 s); returns what it wrote."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, never return into pytest
        os.close(r)
        try:
            signal.alarm(60)  # a hang ends the child, and the test fails
            out = fn()
        except BaseException as e:  # noqa: BLE001 - everything goes to the parent
            out = "%s: %s" % (type(e).__name__, e)
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    chunks = []
    while True:
        b = os.read(r, 65536)
        if not b:
            break
        chunks.append(b)
    os.close(r)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status), "the child died (signal %d)" % os.WTERMSIG(status)
    return b"".join(chunks).decode()


def test_forked_child_is_refused_not_hung():
    with vdev.device("GPU:0"):
        t = vdev.constant([1.0, 2.0])
        q = t * 5.0  # work queued on the stream when the child is made
    parent = os.getpid()

    def child():
        try:
            (t + 1.0).numpy()
        except vdev.errors.UnimplementedError as e:
            return str(e)
        return "no error"

    msg = _in_fork(child)
    # the first call of vdev's the child makes names itself first
    assert msg.startswith("vdev_tensor_dtype: vdev was started in process %d, from which this "
                          "process was forked" % parent), msg
    assert "multiprocessing.get_context('spawn')" in msg
    assert q.numpy().tolist() == [5.0, 10.0]  # the parent goes on

    def child_new():
        try:
            vdev.zeros([2])
        except vdev.errors.UnimplementedError as e:
            return str(e)
        return "no error"

    assert "vdev was started in process %d" % parent in _in_fork(child_new)


def test_forked_child_configuration_is_refused_as_start_up_is():
    vdev.zeros([1])  # vdev runs in the parent
    gpu = vdev.config.list_physical_devices("GPU")[0]
    parent = os.getpid()

    def child():
        out = [str(vdev.is_initialized())]
        for call in (lambda: vdev.config.set_memory_growth(gpu, True), vdev.init):
            try:
                call()
                out.append("no error")
            except vdev.errors.UnimplementedError as e:
                out.append(str(e).split(",")[0])
        return "|".join(out)

    assert _in_fork(child) == (
        "False|vdev_config_set_memory_growth: vdev was started in process %d|"
        "vdev_init: vdev was started in process %d" % (parent, parent))


def _spawned(q):
    import vdev as v
    with v.device("GPU:1"):
        q.put((v.constant([1.0, 2.0]) * 3.0).numpy().tolist())


def test_spawn_child_works():
    vdev.zeros([1])  # vdev runs in the parent
    ctx = multiprocessing.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_spawned, args=(q,))
    p.start()
    got = q.get(timeout=600)  # bounds a hang only: the child starts Python, numpy and vdev
    p.join(300)
    assert p.exitcode == 0 and got == [3.0, 6.0]


def test_forked_child_strategy_and_communicator_are_refused_and_freed_quietly():
    # The parent's strategy and communicator: a call is the fork error (it
    # said "the strategy belongs to a runtime that was shut down"), and
    # freeing one only drops its handle (it joined replica threads that are
    # not in the child, and the child died of SIGSEGV)
    strategy = vdev.distribute.MirroredStrategy(["GPU:0", "GPU:1"])
    comm = vdev.distribute.Communicator(["GPU:0", "GPU:1"])
    parent = os.getpid()

    def child():
        out = []
        for call in (lambda: strategy.run(lambda: 1), lambda: strategy.memory_info(0),
                     lambda: comm.set_timeout(5.0),
                     lambda: comm.barrier(0)):
            try:
                call()
                out.append("no error")
            except vdev.errors.UnimplementedError as e:
                out.append(str(e).split(",")[0])
        strategy._free()
        comm.free()
        return "|".join(out + ["freed"])

    assert _in_fork(child) == (
        "vdev_strategy_run: vdev was started in process %d|"
        "vdev_strategy_memory_info: vdev was started in process %d|"
        "vdev_comm_set_timeout: vdev was started in process %d|"
        "vdev_comm_barrier: vdev was started in process %d|freed" % ((parent,) * 4))
    assert strategy.run(lambda: 1) == 1  # the parent's go on
    assert comm.size == 2
    comm.set_timeout(5.0)
