"""DLPack both ways with Debian's numpy (1.24) and PyTorch (1.13, CPU): both
speak DLPack 0.x through the "dltensor" capsule (no versioned capsules).
Zero copy (a write on one side is seen on the other), the lifetimes (an
export keeps vdev's memory after the tensor object goes; an import keeps the
producer's array alive after its last Python name goes; an unconsumed
capsule releases its export), strided inputs copied, refused inputs, a
stream other than None refused for host memory (as NumPy does) and 0 for
CUDA memory (as the array API says), from_dlpack's device= and copy= (the
array API's), a producer's device checked before it builds a capsule,
vdev.shutdown() refusing while exports are alive, and collectives on exported
memory done reading it when they return."""
import ctypes
import gc
import sys
import threading

import numpy as np
import pytest

import vdev

from conftest import run_python

torch = pytest.importorskip("torch")
LONG = "/job:localhost/replica:0/task:0"


def in_use(device):
    return vdev.config.experimental.get_memory_info(device)["current"]


def test_dlpack_device():
    with vdev.device("GPU:1"):
        t = vdev.constant([1.0])
    assert t.__dlpack_device__() == (1, 0)  # simulated GPU memory is host memory: kDLCPU
    assert vdev.constant(1.0).cpu().__dlpack_device__() == (1, 0)


def test_numpy_reads_vdev_in_place():
    with vdev.device("GPU:1"):
        t = vdev.constant([[1.0, 2.0], [3.0, 4.0]]) * 2  # made by an op on the GPU's stream
    a = np.from_dlpack(t)
    assert a.dtype == np.float32 and a.shape == (2, 2)
    np.testing.assert_array_equal(a, [[2, 4], [6, 8]])
    assert vdev.dlpack.live_exports() == 1
    assert not a.flags.writeable  # numpy 1.24 makes imported arrays read-only
    base = in_use("GPU:1")
    del t
    gc.collect()
    assert in_use("GPU:1") == base  # the export holds the tensor's memory
    np.testing.assert_array_equal(a, [[2, 4], [6, 8]])
    del a
    assert vdev.dlpack.live_exports() == 0
    assert in_use("GPU:1") == 0


def test_numpy_int32_scalar_and_empty():
    i = vdev.constant([1, 2, 3])
    a = np.from_dlpack(i)
    assert a.dtype == np.int32 and a.tolist() == [1, 2, 3]
    s = np.from_dlpack(vdev.constant(2.5))
    assert s.shape == () and s[()] == 2.5
    e = np.from_dlpack(vdev.zeros([0, 3]))
    assert e.shape == (0, 3)
    del a, s, e


def test_vdev_reads_numpy_in_place():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    base = in_use("CPU:0")
    t = vdev.from_dlpack(a)
    assert t.device == LONG + "/device:CPU:0" and t.shape == (2, 3)
    assert in_use("CPU:0") == base  # no vdev memory: numpy's
    a[1, 2] = 50.0
    assert t.numpy()[1, 2] == 50.0
    # the producer stays alive as long as the tensor
    ref = sys.getrefcount(a)
    del a
    gc.collect()
    np.testing.assert_array_equal(t.numpy(), [[0, 1, 2], [3, 4, 50]])
    # ops read it, on any device
    with vdev.device("GPU:2"):
        s = vdev.reduce_sum(vdev.identity(t))
    assert float(s) == 60.0 and s.device == LONG + "/device:GPU:2"
    assert ref >= 2


def test_vdev_import_keeps_producer_alive():
    import weakref

    class Holder(np.ndarray):
        pass

    a = np.ones(4, dtype=np.float32).view(Holder)
    w = weakref.ref(a)
    t = vdev.from_dlpack(a)
    del a
    gc.collect()
    assert w() is not None  # the DLPack export of numpy holds the array
    del t
    gc.collect()
    assert w() is None


def test_vdev_copies_strided_numpy():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = vdev.from_dlpack(a[:, ::2])  # strided: copied
    np.testing.assert_array_equal(t.numpy(), a[:, ::2])
    a[0, 0] = 99
    assert t.numpy()[0, 0] == 0
    tt = vdev.from_dlpack(a.T)
    np.testing.assert_array_equal(tt.numpy(), a.T)


def test_torch_both_ways():
    with vdev.device("GPU:0"):
        t = vdev.random.uniform([3, 4], seed=1)
    x = torch.from_dlpack(t)
    assert x.dtype == torch.float32 and tuple(x.shape) == (3, 4)
    np.testing.assert_array_equal(x.numpy(), t.numpy())
    x[0, 0] = -7.0
    assert t.numpy()[0, 0] == -7.0
    x2 = torch.utils.dlpack.from_dlpack(vdev.dlpack.to_dlpack(t))  # the capsule route
    assert x2[0, 0].item() == -7.0
    del x, x2
    assert vdev.dlpack.live_exports() == 0

    y = torch.arange(8, dtype=torch.int32).reshape(2, 4)
    v = vdev.from_dlpack(y)
    assert v.dtype is vdev.int32 and v.numpy().tolist() == y.tolist()
    y[1, 3] = 70
    assert v.numpy()[1, 3] == 70
    z = vdev.from_dlpack(torch.utils.dlpack.to_dlpack(torch.ones(5)))  # a capsule
    assert z.numpy().tolist() == [1.0] * 5
    w = vdev.from_dlpack(torch.arange(6.0).reshape(2, 3).t())  # strided: copied
    np.testing.assert_array_equal(w.numpy(), np.arange(6.0).reshape(2, 3).T)
    # into training: an imported tensor feeds a model on a simulated GPU
    with vdev.device("GPU:1"):
        m = vdev.models.MLP([4, 2], seed=1)
    out = m(vdev.from_dlpack(torch.ones(3, 4)))
    assert out.device == LONG + "/device:GPU:1" and out.shape == (3, 2)


def test_refused_imports():
    with pytest.raises(vdev.errors.UnimplementedError) as e:
        vdev.from_dlpack(np.ones(3))  # float64
    assert str(e.value) == ("vdev_tensor_from_dlpack: dtype float64; vdev tensors are float32 or "
                            "int32: cast it to float32 before the import")
    with pytest.raises(vdev.errors.UnimplementedError) as e:
        vdev.from_dlpack(torch.ones(2, dtype=torch.int64))
    assert str(e.value) == ("vdev_tensor_from_dlpack: dtype int64; vdev tensors are float32 or "
                            "int32: cast it to int32 before the import")
    assert vdev.from_dlpack(torch.ones(2, dtype=torch.int64).to(torch.int32)).dtype is vdev.int32
    with pytest.raises(vdev.errors.UnimplementedError) as e:
        vdev.from_dlpack(np.zeros((1, 1, 1, 1, 2), np.float32))
    assert str(e.value) == "vdev_tensor_from_dlpack: 5 dimensions; vdev tensors have 0 to 4"
    with pytest.raises(TypeError) as e:
        vdev.from_dlpack([1.0, 2.0])
    assert str(e.value).startswith("from_dlpack takes an object with __dlpack__")
    cap = torch.utils.dlpack.to_dlpack(torch.ones(2))
    vdev.from_dlpack(cap)
    with pytest.raises(ValueError) as e:
        vdev.from_dlpack(cap)  # consumed already
    assert "consumed already" in str(e.value)


def test_refused_capsule_stays_usable():
    cap = torch.utils.dlpack.to_dlpack(torch.ones(2, dtype=torch.float64))
    with pytest.raises(vdev.errors.UnimplementedError):
        vdev.from_dlpack(cap)
    assert torch.utils.dlpack.from_dlpack(cap).tolist() == [1.0, 1.0]  # still unconsumed


def test_interrupt_after_import_is_no_double_free():
    """A KeyboardInterrupt just after vdev took the capsule (here raised by a
    wrapper around the call) must not leave the capsule to run the deleter
    vdev ran: a strided tensor is copied, its deleter run at once, and
    PyTorch's capsule destructor used to run it again (glibc: "free():
    double free detected", an abort)."""
    code = """if True:
        import gc, torch, vdev, vdev.dlpack as vd
        real = vd.lib
        class Interrupting:
            def __getattr__(self, name):
                return getattr(real, name)
            def vdev_tensor_from_dlpack(self, m):
                real.vdev_tensor_from_dlpack(m)
                raise KeyboardInterrupt
        vd.lib = Interrupting()
        for i in range(20):
            try:
                vdev.from_dlpack(torch.rand(300, 300).t())
            except KeyboardInterrupt:
                pass
            gc.collect()
        print("done")
    """
    rc, out, err = run_python(code, timeout=600)  # a hang's bound, on a loaded machine too
    assert (rc, out) == (0, "done\n"), err[-2000:]


def test_unconsumed_capsule_releases_its_export():
    with vdev.device("GPU:2"):
        t = vdev.zeros([256])
    cap = t.__dlpack__()
    assert vdev.dlpack.live_exports() == 1
    del t
    gc.collect()
    assert in_use("GPU:2") == 1024
    del cap  # never consumed: its destructor runs the deleter
    assert vdev.dlpack.live_exports() == 0
    assert in_use("GPU:2") == 0


def test_stream_host_memory_takes_none_only(monkeypatch):
    # as NumPy: a stream means nothing for host memory (kDLCPU), so any but
    # None is refused, on the CPU and on a simulated GPU alike
    with vdev.device("GPU:1"):
        g = vdev.constant([1.0])
    for t in (vdev.constant([1.0]), g):
        for stream in (1, 0, -1, 2):
            with pytest.raises(RuntimeError) as e:
                t.__dlpack__(stream=stream)
            assert str(e.value) == ("vdev only supports stream=None for a tensor in host memory "
                                    "(kDLCPU), as NumPy does.")
        assert vdev.dlpack.live_exports() == 0
        assert np.from_dlpack(t).tolist() == [1.0]  # stream=None, as numpy asks
    # device memory (kDLCUDA) takes an int, as the DLPack protocol says
    monkeypatch.setattr(vdev.dlpack, "device_of", lambda t: (vdev.dlpack.kDLCUDA, 0))
    monkeypatch.setattr(vdev.dlpack, "to_capsule", lambda t: "capsule")
    for stream in (None, 1, 2, -1, 3, 2**62):
        assert g.__dlpack__(stream=stream) == "capsule"
    # the array API disallows 0 (ambiguous: None, 1 or 2?) and any below -1
    for stream in (0, -2):
        with pytest.raises(ValueError) as e:
            g.__dlpack__(stream=stream)
        assert str(e.value) == ("stream %d is not a CUDA stream of the DLPack protocol: it is "
                                "None, -1, 1 (the legacy default stream), 2 (the per-thread "
                                "default stream) or a stream above 2; 0 is ambiguous" % stream)
    with pytest.raises(TypeError) as e:
        g.__dlpack__(stream="1")
    assert str(e.value) == "stream must be an int or None, not str"


def test_round_trip_and_stale_export():
    t = vdev.constant([1.0, 2.0])
    u = vdev.from_dlpack(t)  # vdev's own export, back as a CPU tensor over the same memory
    assert u.device == LONG + "/device:CPU:0" and u.numpy().tolist() == [1.0, 2.0]
    del t, u
    assert vdev.dlpack.live_exports() == 0
    s = vdev.constant([1.0])
    vdev.shutdown()
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        s.__dlpack__()
    assert str(e.value) == ("vdev_tensor_to_dlpack: the tensor belongs to a runtime that was "
                            "shut down (made before vdev_shutdown)")


def test_shutdown_refuses_while_exports_live():
    a = np.from_dlpack(vdev.constant([1.0, 2.0]))
    with pytest.raises(RuntimeError) as e:
        vdev.shutdown()
    assert str(e.value) == ("vdev.shutdown(): 1 DLPack export of vdev tensors is still alive "
                            "(numpy arrays or torch tensors over vdev memory); delete them first")
    assert vdev.is_initialized()
    del a
    vdev.shutdown()
    assert not vdev.is_initialized()


def test_imports_outlive_shutdown():
    a = np.arange(3, dtype=np.float32)
    t = vdev.from_dlpack(a)
    vdev.shutdown()  # the memory is numpy's: nothing to refuse
    with pytest.raises(vdev.errors.InvalidArgumentError):
        t.numpy()
    del t  # the handle goes, numpy's deleter runs
    gc.collect()
    assert a.tolist() == [0.0, 1.0, 2.0]


def test_tensorflow_namespace_and_exit():
    """vdev.experimental.dlpack is tf.experimental.dlpack's; a capsule left to
    the interpreter's exit is released without a crash."""
    cap = vdev.experimental.dlpack.to_dlpack(vdev.constant([1.0, 2.0]))
    t = vdev.experimental.dlpack.from_dlpack(cap)
    assert t.numpy().tolist() == [1.0, 2.0]
    del t, cap
    rc, out, err = run_python(
        "import vdev, numpy as np\n"
        "keep = vdev.constant([1.0]).__dlpack__()\n"     # never consumed
        "arr = np.from_dlpack(vdev.constant([2.0]))\n"   # alive at exit
        "print('done')\n")
    assert rc == 0 and out == "done\n", err
    assert "Exception ignored" not in err and "Error" not in err


def test_collectives_read_exported_memory_before_returning():
    # A PyTorch tensor over a simulated GPU's memory is the root of a
    # broadcast and the input of an all-gather; the consumer writes it as
    # soon as the call returns. Products queued first keep the stream that
    # copies it busy, so a copy that the call did not wait for would still be
    # queued then, and would read the consumer's values.
    comm = vdev.distribute.Communicator(["GPU:0", "GPU:1"])
    with vdev.device("GPU:0"):
        src = vdev.constant([1.0, 2.0, 3.0, 4.0]) * 1
        gin = vdev.constant([1.0, 2.0]) * 1
        gout0 = vdev.zeros([4])
        big0 = vdev.ones([768, 768])
    with vdev.device("GPU:1"):
        dst = vdev.zeros([4])
        gin1 = vdev.constant([5.0, 6.0]) * 1
        gout1 = vdev.zeros([4])
        big = vdev.ones([768, 768])
    x, g = torch.from_dlpack(src), torch.from_dlpack(gin)
    errors = []

    def rank(r):
        try:
            if r == 1:
                with vdev.device("GPU:1"):
                    busy = [vdev.matmul(big, big) for _ in range(3)]
                comm.broadcast(1, [dst], root=0)
                with vdev.device("GPU:1"):
                    busy += [vdev.matmul(big, big) for _ in range(3)]
                comm.all_gather(1, gin1, gout1)
                del busy
            else:
                comm.broadcast(0, [src], root=0)
                x[:] = 100.0  # the consumer, at once
                with vdev.device("GPU:0"):
                    busy = [vdev.matmul(big0, big0) for _ in range(3)]
                comm.all_gather(0, gin, gout0)  # gin copied on GPU:0's stream
                g[:] = 100.0
                del busy
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert dst.numpy().tolist() == [1.0, 2.0, 3.0, 4.0]
    assert gout1.numpy().tolist() == [1.0, 2.0, 5.0, 6.0]
    assert gout0.numpy().tolist() == [1.0, 2.0, 5.0, 6.0]
    assert src.numpy().tolist() == [100.0] * 4  # the consumer's write stands
    del x, g
    comm.free()
    assert vdev.dlpack.live_exports() == 0


def test_array_api_keywords():
    # the array API's __dlpack__(stream, max_version, dl_device, copy), as
    # newer numpy and PyTorch call it: the capsule stays DLPack 0.x's
    with vdev.device("GPU:1"):
        g = vdev.constant([1.0, 2.0])
    for t in (vdev.constant([1.0, 2.0]), g, vdev.Variable([1.0, 2.0])):
        cap = t.__dlpack__(stream=None, max_version=(1, 0), dl_device=(1, 0), copy=False)
        assert type(cap).__name__ == "PyCapsule" and "dltensor" in repr(cap)
        a = torch.utils.dlpack.from_dlpack(cap)
        a[0] = 7.0  # no copy: seen by vdev
        assert t.numpy().tolist() == [7.0, 2.0]
        with vdev.GradientTape() as tape:
            c = torch.utils.dlpack.from_dlpack(t.__dlpack__(copy=True))
        assert tape.watched_variables() == ()  # the copy is no op of the tape's
        c[1] = 9.0  # a copy: not seen
        assert c.tolist() == [7.0, 9.0] and t.numpy().tolist() == [7.0, 2.0]
        del a, c, cap
        gc.collect()
        assert vdev.dlpack.live_exports() == 0
        with pytest.raises(BufferError) as e:
            t.__dlpack__(dl_device=(2, 0))
        assert str(e.value) == ("vdev exports a tensor on its own device only: this one is on "
                                "(1, 0) (__dlpack_device__), not dl_device (2, 0)")
        with pytest.raises(TypeError) as e:
            t.__dlpack__(max_version=1)
        assert str(e.value) == "max_version must be None or a (major, minor) tuple of ints, not 1"
        with pytest.raises(TypeError) as e:
            t.__dlpack__(copy="yes")
        assert str(e.value) == "copy must be True, False or None, not str"
        for bad in ("cpu", ("1", "0"), (1.0, 0), (True, 0), (1, False), [1, 0], (1, 0, 0)):
            with pytest.raises(TypeError) as e:
                t.__dlpack__(dl_device=bad)
            assert str(e.value) == ("dl_device must be None or a (device type, device id) "
                                    "tuple of ints, not %r" % (bad,))
        import enum
        dl_cpu = enum.IntEnum("DLDeviceType", {"kDLCPU": 1}).kDLCPU  # as PyTorch passes it
        cap = t.__dlpack__(dl_device=(dl_cpu, 0))
        del cap
        assert vdev.dlpack.live_exports() == 0
    # numpy 2's np.from_dlpack(x, copy=True) passes them all
    cap = vdev.constant([3.0]).__dlpack__(stream=None, max_version=(1, 0), dl_device=None,
                                          copy=True)
    assert np.from_dlpack(type("X", (), {"__dlpack__": lambda s, stream=None: cap,
                                         "__dlpack_device__": lambda s: (1, 0)})()).tolist() \
        == [3.0]
    gc.collect()
    assert vdev.dlpack.live_exports() == 0


def test_to_dlpack_takes_tensors_only():
    # TensorFlow's check and error class (TFE_ToDlpackCapsule)
    for x in (np.ones(2, np.float32), [1.0], None):
        with pytest.raises(vdev.errors.InvalidArgumentError) as e:
            vdev.experimental.dlpack.to_dlpack(x)
        assert e.value.message == ("The argument to `to_dlpack` must be a vdev tensor, not "
                                   "Python object")
    assert vdev.dlpack.live_exports() == 0


def test_versioned_capsule_named():
    # a DLPack 1.x capsule (from a producer asked with max_version) is named
    # as such, not taken for a consumed one
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    cap = new(8, b"dltensor_versioned", None)
    with pytest.raises(BufferError) as e:
        vdev.from_dlpack(cap)
    assert str(e.value) == ('from_dlpack: a DLPack 1.x capsule ("dltensor_versioned"); vdev '
                            'reads DLPack 0.x "dltensor" capsules (its producer gives one to '
                            '__dlpack__() without max_version)')
    with pytest.raises(ValueError) as e:
        vdev.from_dlpack(new(8, b"other", None))
    assert str(e.value) == ("from_dlpack: the capsule is not a DLPack tensor, or was consumed "
                            "already (a capsule can be used once)")


def test_producer_device_checked_before_its_capsule():
    # __dlpack_device__ first (the standard's order): memory the host cannot
    # read is refused before the producer builds a capsule for nothing
    calls = []

    class Producer:
        def __init__(self, device):
            self.device = device

        def __dlpack_device__(self):
            return self.device

        def __dlpack__(self, stream=None):
            calls.append(stream)
            return torch.utils.dlpack.to_dlpack(torch.ones(2))

    for device, name in (((2, 0), "kDLCUDA"), ((10, 3), "kDLROCM")):
        with pytest.raises(vdev.errors.UnimplementedError) as e:
            vdev.from_dlpack(Producer(device))
        assert str(e.value) == ("vdev_tensor_from_dlpack: the memory is on %s (device type %d, "
                                "device %d), which the host cannot read; vdev imports host "
                                "memory (kDLCPU, kDLCUDAHost, kDLCUDAManaged): copy it to the "
                                "host first" % (name, device[0], device[1]))
    assert calls == []
    assert vdev.from_dlpack(Producer((1, 0))).numpy().tolist() == [1.0, 1.0]
    assert calls == [None]


def test_from_dlpack_copy():
    # the array API's copy=: True always copies (vdev owns the copy), False
    # never does (BufferError where it must), None copies where it must
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    shared, owned = vdev.from_dlpack(a, copy=False), vdev.from_dlpack(a, copy=True)
    a[0, 0] = 40.0
    assert shared.numpy()[0, 0] == 40.0 and owned.numpy()[0, 0] == 0.0
    assert owned.device == LONG + "/device:CPU:0"
    np.testing.assert_array_equal(vdev.from_dlpack(a[:, ::2], copy=True).numpy(), a[:, ::2])
    with vdev.device("GPU:1"):
        g = vdev.constant([1.0, 2.0])
    c = vdev.from_dlpack(g, copy=True)  # a copy: its import's export goes at once
    assert vdev.dlpack.live_exports() == 0 and c.numpy().tolist() == [1.0, 2.0]
    for x in (a[:, ::2], a.T):
        with pytest.raises(BufferError) as e:
            vdev.from_dlpack(x, copy=False)
        assert str(e.value) == ("from_dlpack: copy=False, but the memory is strided or not "
                                "4-byte aligned, which vdev imports by copying it")
    odd = np.frombuffer(np.zeros(20, np.uint8).tobytes(), np.float32, 4, offset=2)
    with pytest.raises(BufferError):
        vdev.from_dlpack(odd, copy=False)  # unaligned
    cap = torch.utils.dlpack.to_dlpack(torch.arange(6.0).reshape(2, 3).t())
    with pytest.raises(BufferError):
        vdev.from_dlpack(cap, copy=False)
    assert torch.utils.dlpack.from_dlpack(cap).shape == (3, 2)  # refused: still unconsumed
    assert vdev.from_dlpack(np.zeros((0, 3), np.float32)[:, ::2], copy=False).shape == (0, 2)
    with pytest.raises(TypeError) as e:
        vdev.from_dlpack(a, copy="no")
    assert str(e.value) == "copy must be True, False or None, not str"
    with pytest.raises(TypeError):
        vdev.from_dlpack(a, "CPU:0")  # device and copy are keywords only
    gc.collect()
    assert vdev.dlpack.live_exports() == 0


def test_from_dlpack_device():
    a = np.arange(4, dtype=np.float32)
    for name in ("CPU:0", "/cpu:0", LONG + "/device:CPU:0", vdev.constant(1.0).cpu().device):
        t = vdev.from_dlpack(a, device=name)
        assert t.device == LONG + "/device:CPU:0"
        a[0] += 1.0
        assert t.numpy()[0] == a[0]  # no copy
    g = vdev.from_dlpack(a, device="GPU:1")  # a copy made there
    assert g.device == LONG + "/device:GPU:1" and g.numpy().tolist() == a.tolist()
    a[1] = -5.0
    assert g.numpy()[1] == 1.0
    assert vdev.from_dlpack(a, device="GPU:2", copy=True).device == LONG + "/device:GPU:2"
    with pytest.raises(ValueError) as e:
        vdev.from_dlpack(a, device="GPU:1", copy=False)
    assert str(e.value) == ("from_dlpack: device 'GPU:1' needs a copy (vdev imports host memory "
                            "onto CPU:0), which copy=False refuses")
    with pytest.raises(RuntimeError) as e:
        vdev.from_dlpack(a, device="GPU:99")  # vdev.device's errors
    assert "unknown device" in str(e.value)
    with pytest.raises(ValueError) as e:
        vdev.from_dlpack(a, device=5)
    assert str(e.value) == "Expecting a string device name. Got <class 'int'>(5)"
    gc.collect()
    assert vdev.dlpack.live_exports() == 0
