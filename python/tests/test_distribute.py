"""vdev.distribute from Python: MirroredStrategy (devices, scope and
MirroredVariables, run on every replica's own thread, distributed batches,
reduce, the replica context's all_reduce, compute_average_loss, per-replica
memory), failures inside a step (a Python exception or an out-of-memory
error on one replica fails the step on all and leaves every replica's
variables as they were), misuse, the per-example losses, and Communicator
driven by Python threads. Three simulated 16 GiB GPUs (conftest)."""
import collections
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import vdev

D = vdev.distribute
E = vdev.config.experimental
LONG = "/job:localhost/replica:0/task:0"
GPUS = ("/device:GPU:0", "/device:GPU:1", "/device:GPU:2")
CROSS_REPLICA = ("Method requires being in cross-replica context: call it outside strategy.run "
                 "(vdev's ReplicaContext has no merge_call)")
HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))


def bits(t):
    return np.asarray(t.numpy()).tobytes()


def test_strategy_devices_and_errors():
    s = D.MirroredStrategy()  # every logical GPU
    assert s.num_replicas_in_sync == 3 and s.extended.worker_devices == GPUS
    assert s.extended.parameter_devices == GPUS
    assert repr(s) == "MirroredStrategy(devices=%r)" % (GPUS,)
    s2 = D.MirroredStrategy(vdev.config.list_logical_devices("GPU")[1:])  # LogicalDevices too
    assert s2.extended.worker_devices == GPUS[1:]
    assert D.MirroredStrategy(["gpu:2"]).num_replicas_in_sync == 1
    cases = [
        ([], ValueError, "Must specify at least one device."),
        (["GPU:0", "/gpu:0"], ValueError,
         "No duplicates allowed in `devices` argument: ('%s/device:GPU:0', '%s/device:GPU:0')"
         % (LONG, LONG)),
        (["GPU:5"], ValueError, "No matching devices found for 'GPU:5': %s/device:GPU:5 unknown "
         "device (there are 3 logical GPUs)" % LONG),
        (["GPU:0", "CPU:0"], vdev.errors.UnimplementedError,
         "collectives need devices of one backend: /device:GPU:0 is on the sim backend, "
         "/device:CPU:0 on the cpu backend"),
        ("GPU:0", ValueError, "devices must be a list of device names, not the string 'GPU:0'"),
    ]
    for devices, cls, msg in cases:
        with pytest.raises(cls) as e:
            D.MirroredStrategy(devices)
        assert str(e.value) == msg
    with pytest.raises(TypeError):
        D.MirroredStrategy([0])
    with pytest.raises(ValueError):
        D.MirroredStrategy(cross_device_ops=object())


def test_default_strategy_over_logical_cpus():
    """Without GPUs the strategy takes every logical CPU, as TensorFlow's."""
    vdev.config.set_visible_devices([], "GPU")
    cpu = vdev.config.list_physical_devices("CPU")[0]
    vdev.config.set_logical_device_configuration(cpu,
                                                 [vdev.config.LogicalDeviceConfiguration()] * 2)
    s = D.MirroredStrategy()
    assert s.extended.worker_devices == ("/device:CPU:0", "/device:CPU:1")
    with s.scope():
        v = vdev.Variable([1.0, 2.0])
    out = s.run(lambda: D.get_replica_context().all_reduce("SUM", v * 1.0))
    assert [t.numpy().tolist() for t in out.values] == [[2.0, 4.0]] * 2


def test_scope_mirrors_variables_layers_and_optimizers():
    s = D.MirroredStrategy()
    base = [E.get_memory_info(d)["current"] for d in GPUS]
    assert D.get_strategy() is None and not D.has_strategy()
    assert not D.in_cross_replica_context() and D.get_replica_context() is None
    for d in GPUS:
        E.reset_memory_stats(d)
    with s.scope() as scoped:
        assert scoped is s and D.get_strategy() is s and D.in_cross_replica_context()
        v = vdev.Variable([[1.0, 2.0]], name="v")
        model = vdev.models.MLP([4, 8, 2], seed=3)
        opt = vdev.optimizers.SGD(0.1)
    # Initial values are made on the host: no replica's device holds more.
    peaks = [E.get_memory_info(d)["peak"] for d in GPUS]
    assert peaks[0] == peaks[1] == peaks[2]
    with s.scope():
        with vdev.device("GPU:2"):
            t = vdev.constant([5.0])
        w = vdev.Variable(t)
        with s.scope():  # re-entering the same strategy's scope is fine
            pass
        other = D.MirroredStrategy(["GPU:0"])
        with pytest.raises(RuntimeError) as e:  # TensorFlow's _wrong_strategy_scope
            other.scope().__enter__()
        assert str(e.value) == ("Mixing different tf.distribute.Strategy objects: %r is not %r"
                                % (s, other))
    assert not D.in_cross_replica_context()
    plain = vdev.Variable([1.0])  # outside the scope: plain
    assert type(plain) is vdev.Variable
    for x in [v, w] + model.trainable_variables:
        assert isinstance(x, D.MirroredVariable) and isinstance(x, vdev.Variable)
        assert [c.device for c in x.values] == [LONG + d for d in GPUS]
        assert len({bits(c) for c in x.values}) == 1  # identical copies
    assert v.name == "v" and v.device == LONG + GPUS[0]  # reads go to the primary
    assert v.numpy().tolist() == [[1.0, 2.0]] and w.numpy().tolist() == [5.0]
    m1 = vdev.models.MLP([4, 8, 2], seed=3)  # the same weights as a plain model
    assert [bits(a) for a in m1.trainable_variables] == [bits(a) for a in
                                                         model.trainable_variables]
    v.assign([[3.0, 4.0]])  # outside strategy.run: every replica
    assert [c.numpy().tolist() for c in v.values] == [[[3.0, 4.0]]] * 3
    v.assign_add([[1.0, 1.0]])
    v.assign_sub([[0.5, 0.5]])
    assert [c.numpy().tolist() for c in v.values] == [[[3.5, 4.5]]] * 3
    assert "MirroredVariable:{" in repr(v) and "device=%s/device:GPU:2" % LONG in repr(v)
    assert s.experimental_local_results(v)[2].numpy().tolist() == [[3.5, 4.5]]
    assert opt._replica_h is not None and len(opt._replica_h) == 3
    g = [vdev.zeros_like(x) for x in model.trainable_variables]
    with pytest.raises(RuntimeError) as e:
        opt.apply_gradients(zip(g, model.trainable_variables))
    assert str(e.value) == ("`apply_gradients() cannot be called in cross-replica context. Use "
                            "`MirroredStrategy.run` to enter replica context.")
    del v, w, x, model, opt, t, g, m1, plain, e  # (e's traceback holds the variables)
    # freeing a MirroredVariable frees every copy
    assert [E.get_memory_info(d)["current"] for d in GPUS] == base


def test_mirroring_that_fails_frees_the_copies():
    """A variable that does not fit one replica's device: OutOfMemoryError,
    and the copies made on the others are freed."""
    gpu2 = vdev.config.list_physical_devices("GPU")[2]
    vdev.config.set_logical_device_configuration(
        gpu2, [vdev.config.LogicalDeviceConfiguration(memory_limit=16)])
    s = D.MirroredStrategy()
    base = [E.get_memory_info(d)["current"] for d in GPUS]
    with s.scope():
        small = vdev.Variable(np.ones(1024, np.float32))
        with pytest.raises(vdev.OutOfMemoryError) as e:
            vdev.Variable(np.ones(8 << 20, np.float32))  # 32 MiB
    assert str(e.value).startswith("OOM when allocating tensor with shape[8388608] and type "
                                   "float (32.00 MiB) on %s/device:GPU:2: " % LONG)
    del e
    assert [E.get_memory_info(d)["current"] for d in GPUS] == [b + 4096 for b in base]
    del small
    assert [E.get_memory_info(d)["current"] for d in GPUS] == base


def test_run_results_threads_and_structures():
    s = D.MirroredStrategy()
    seen = {}
    lock = threading.Lock()
    shared = vdev.constant([7.0])
    Pair = collections.namedtuple("Pair", "a b")

    def step(x, scale=1.0):
        ctx = D.get_replica_context()
        assert D.get_strategy() is s and not D.in_cross_replica_context()
        r = ctx.replica_id_in_sync_group
        assert ctx.num_replicas_in_sync == 3 and ctx.devices == (GPUS[r],)
        with lock:
            seen[r] = (threading.get_ident(), vdev._device.current_device())
        t = vdev.constant([float(r)]) * scale  # on the replica's device
        return Pair(t, {"same": shared, "x": x}), None, 3

    out, none, three = s.run(step, args=(shared,), kwargs={"scale": 2.0})
    assert none is None and three == 3
    assert isinstance(out, Pair) and out.b["same"] is shared and out.b["x"] is shared
    assert isinstance(out.a, D.PerReplica)
    assert [t.numpy().tolist() for t in out.a.values] == [[0.0], [2.0], [4.0]]
    assert [t.device for t in out.a.values] == [LONG + d for d in GPUS]
    assert len({seen[r][0] for r in range(3)}) == 3  # three threads
    assert threading.get_ident() not in {seen[r][0] for r in range(3)}
    assert [seen[r][1] for r in range(3)] == [LONG + d for d in GPUS]  # each in its device scope
    assert s.experimental_local_results(out.a) == out.a.values
    assert s.experimental_local_results(3) == (3,)
    assert "PerReplica:{" in repr(out.a)
    one = D.MirroredStrategy(["GPU:1"])
    r = one.run(lambda: vdev.constant([1.0]))  # one replica: the value itself
    assert isinstance(r, vdev.Tensor) and r.device == LONG + "/device:GPU:1"
    per = s.experimental_distribute_values_from_function(
        lambda c: vdev.constant([float(c.replica_id_in_sync_group)]))
    got = s.run(lambda v: v * 10.0, args=(per,))  # each replica gets its component
    assert [t.numpy().tolist() for t in got.values] == [[0.0], [10.0], [20.0]]
    with pytest.raises(ValueError) as e:
        s.run(lambda v: v, args=(D.PerReplica([shared]),))
    assert str(e.value) == "a PerReplica value of 1 components given to a strategy of 3 replicas"
    with pytest.raises(ValueError) as e:
        s.run(lambda: (1,) if D.get_replica_context().replica_id_in_sync_group else [1])
    assert str(e.value) == ("the step function returned values of different structures on "
                            "different replicas")


def test_distributed_batches():
    s = D.MirroredStrategy()
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    y = np.arange(10, dtype=np.int32)
    (bx, by), = list(s.experimental_distribute_dataset([(x, y)]))
    assert isinstance(bx, D.DistributedBatch) and bx.shape == (10, 2)
    assert bx.global_batch.device == LONG + "/device:CPU:0"  # on the host
    rows = s.run(lambda a, b: (a, b), args=(bx, by))
    assert [t.numpy().tolist() for t in rows[1].values] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert np.array_equal(np.concatenate([t.numpy() for t in rows[0].values]), x)
    assert [t.device for t in rows[0].values] == [LONG + d for d in GPUS]
    s.set_batch_proportions([2, 1, 1])
    (b,), = list(s.experimental_distribute_dataset([(list(range(8)),)]))
    assert [len(t) for t in s.run(lambda t: t, args=(b,)).values] == [4, 2, 2]
    s.set_batch_proportions(None)
    assert [len(t) for t in s.run(lambda t: t, args=(b,)).values] == [3, 3, 2]
    d, = list(s.experimental_distribute_dataset([{"x": vdev.constant(x)}]))
    assert isinstance(d["x"], D.DistributedBatch)
    with pytest.raises(ValueError) as e:
        s.set_batch_proportions([1, 1])
    assert str(e.value) == "vdev_strategy_set_batch_proportions: 2 proportions for 3 replicas"
    with pytest.raises(ValueError) as e:
        s.set_batch_proportions([1, 0, 1])
    assert str(e.value) == ("vdev_strategy_set_batch_proportions: proportion 1 is 0; each is > 0 "
                            "and finite")
    other = D.MirroredStrategy(["GPU:0"])
    with pytest.raises(ValueError) as e:
        s.run(lambda t: t, args=(other._batch(x),))
    assert str(e.value) == "a DistributedBatch of another strategy"
    with pytest.raises(ValueError):
        s.experimental_distribute_dataset([x], options=object())


def test_reduce():
    s = D.MirroredStrategy()
    def value(c):
        r = c.replica_id_in_sync_group
        return vdev.constant([1.0 + r] * (1 + r))
    per = s.experimental_distribute_values_from_function(value)
    # each replica: [1], [2, 2], [3, 3, 3]
    assert float(s.reduce("SUM", per, axis=0)) == 14.0
    assert float(s.reduce(D.ReduceOp.MEAN, per, axis=0)) == pytest.approx(14.0 / 6)
    same = s.experimental_distribute_values_from_function(
        lambda c: vdev.constant([1.0, 2.0]) * float(c.replica_id_in_sync_group + 1))
    r = s.reduce("sum", same, axis=None)
    assert r.numpy().tolist() == [6.0, 12.0] and r.device == LONG + "/device:CPU:0"
    with vdev.device("GPU:1"):  # on the caller's device scope
        r = s.reduce("MEAN", same)
    assert r.numpy().tolist() == [2.0, 4.0] and r.device == LONG + "/device:GPU:1"
    t = vdev.constant([5.0])
    assert s.reduce("MEAN", t) is t  # not distributed: MEAN gives it back
    assert s.reduce("SUM", 0) == 0
    with pytest.raises(ValueError) as e:
        s.reduce("SUM", t)
    assert str(e.value) == ("A non-DistributedValues value vdev.Tensor([5.], shape=(1,), "
                            "dtype=float32) cannot be reduced with the given reduce op "
                            "ReduceOp.SUM.")
    one = D.MirroredStrategy(["GPU:2"])
    assert one.reduce("SUM", t).numpy().tolist() == [5.0]
    with pytest.raises(ValueError) as e:
        s.reduce("max", same)
    assert str(e.value) == "'MAX' is not a valid ReduceOp"
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        s.reduce("SUM", per)
    assert str(e.value) == ("vdev_strategy_reduce: replica 1's value is float of shape[2] but "
                            "replica 0's is float of shape[1]")
    with vdev.distribute.MirroredStrategy(["GPU:0"]).scope():
        mv = vdev.Variable([4.0])
    assert D.MirroredStrategy(["GPU:0"]).reduce("MEAN", mv).numpy().tolist() == [4.0]


def test_replica_all_reduce():
    s = D.MirroredStrategy()
    kept = []

    def step():
        ctx = D.get_replica_context()
        kept.append(ctx)
        r = float(ctx.replica_id_in_sync_group)
        a, (b,) = ctx.all_reduce("SUM", [vdev.constant([1.0, r]), (vdev.constant(r),)])
        m = ctx.all_reduce(D.ReduceOp.MEAN, {"m": vdev.constant([r])})["m"]
        return a, b, m

    a, b, m = s.run(step)
    assert [t.numpy().tolist() for t in a.values] == [[3.0, 3.0]] * 3
    assert [float(t) for t in b.values] == [3.0] * 3
    assert [t.numpy().tolist() for t in m.values] == [[1.0]] * 3
    with pytest.raises(RuntimeError) as e:  # a context kept past its step
        kept[0].all_reduce("SUM", vdev.constant([1.0]))
    assert str(e.value) == ("a ReplicaContext is used outside its step function (or on another "
                            "thread)")
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        s.run(lambda: D.get_replica_context().all_reduce(
            "SUM", vdev.constant([1.0] * (1 + D.get_replica_context().replica_id_in_sync_group))))
    assert str(e.value).startswith("replica 0 (/device:GPU:0): Shape mismatch in the collective "
                                   "instance 0. Op at device ")


def _train(strategy, steps, x, y, seed=5):
    with strategy.scope():
        model = vdev.models.MLP([4, 16, 1], activation="tanh", seed=seed)
        opt = vdev.optimizers.SGD(0.1)
    mse = vdev.losses.MeanSquaredError(reduction="none")

    def step(bx, by):
        with vdev.GradientTape() as tape:
            loss = vdev.nn.compute_average_loss(mse(by, model(bx)))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    losses = []
    for bx, by in strategy.experimental_distribute_dataset([(x, y)] * steps):
        losses.append(float(strategy.reduce("SUM", strategy.run(step, args=(bx, by)))))
    return model, losses


def _data(rows=12):
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (rows, 4)).astype(np.float32)
    return x, (x[:, :1] * x[:, 1:2] + x[:, 2:3]).astype(np.float32)


def test_training_matches_one_device_and_replicas_stay_identical():
    x, y = _data()
    model3, losses3 = _train(D.MirroredStrategy(), 20, x, y)
    for v in model3.trainable_variables:  # bit-identical replicas after 20 steps
        assert len({bits(c) for c in v.values}) == 1
    assert losses3[-1] < losses3[0]
    with vdev.device("GPU:0"):  # the same steps on one device, the whole batch
        ref = vdev.models.MLP([4, 16, 1], activation="tanh", seed=5)
    opt = vdev.optimizers.SGD(0.1)
    for _ in range(20):
        with vdev.device("GPU:0"):
            with vdev.GradientTape() as tape:
                loss = vdev.losses.MeanSquaredError()(vdev.constant(y), ref(vdev.constant(x)))
            grads = tape.gradient(loss, ref.trainable_variables)
            opt.apply_gradients(zip(grads, ref.trainable_variables))
    for a, b in zip(model3.trainable_variables, ref.trainable_variables):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-6)
    model3b, losses3b = _train(D.MirroredStrategy(), 20, x, y)  # two runs: the same bits
    assert losses3b == losses3
    assert [bits(v) for v in model3b.trainable_variables] == [bits(v) for v in
                                                              model3.trainable_variables]
    model1, _ = _train(D.MirroredStrategy(["GPU:1"]), 1, x, y)
    with vdev.device("GPU:1"):
        one = vdev.models.MLP([4, 16, 1], activation="tanh", seed=5)
    with vdev.device("GPU:1"):
        with vdev.GradientTape() as tape:
            per = vdev.losses.MeanSquaredError(reduction="none")(vdev.constant(y),
                                                                 one(vdev.constant(x)))
            loss = vdev.nn.compute_average_loss(per)
        g = tape.gradient(loss, one.trainable_variables)
        vdev.optimizers.SGD(0.1).apply_gradients(zip(g, one.trainable_variables))
    assert [bits(v) for v in model1.trainable_variables] == [bits(v) for v in
                                                             one.trainable_variables]


def test_steps_leave_no_memory_behind():
    x, y = _data()
    s = D.MirroredStrategy()
    with s.scope():
        model = vdev.models.MLP([4, 16, 1], seed=2)
        opt = vdev.optimizers.Adam(0.01)
    mse = vdev.losses.MeanSquaredError(reduction="none")

    def step(bx, by):
        with vdev.GradientTape() as tape:
            loss = vdev.nn.compute_average_loss(mse(by, model(bx)))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))

    data = list(s.experimental_distribute_dataset([(x, y)] * 31))
    s.run(step, args=data[0])  # the optimizer's slots exist from here
    base = [E.get_memory_info(d)["current"] for d in GPUS]
    for bx, by in data[1:]:
        s.run(step, args=(bx, by))
    assert [E.get_memory_info(d)["current"] for d in GPUS] == base
    assert s.memory_info(1) == E.get_memory_info("GPU:1")
    assert s.memory_imbalance() == pytest.approx(1.0, abs=0.05)
    with pytest.raises(ValueError) as e:
        s.memory_info(3)
    assert str(e.value) == "vdev_strategy_memory_info: replica 3 of 3"


def test_failures_fail_every_replica_and_change_nothing():
    x, y = _data()
    s = D.MirroredStrategy()
    with s.scope():
        model = vdev.models.MLP([4, 16, 1], seed=2)
        opt = vdev.optimizers.Adam(0.01)
    mse = vdev.losses.MeanSquaredError(reduction="none")
    (bx, by), = list(s.experimental_distribute_dataset([(x, y)]))
    reached = []

    def step(bx, by, bad, kind):
        ctx = D.get_replica_context()
        with vdev.GradientTape() as tape:
            loss = vdev.nn.compute_average_loss(mse(by, model(bx)))
        grads = tape.gradient(loss, model.trainable_variables)
        if ctx.replica_id_in_sync_group == bad:
            if kind == "python":
                raise KeyError("boom")
            with vdev.device(ctx.devices[0]):
                vdev.zeros([5 << 30])  # 20 GiB: more than the card
        reached.append(ctx.replica_id_in_sync_group)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    s.run(step, args=(bx, by, -1, None))  # a good step: the optimizer's slots exist
    del reached[:]
    before = [[bits(c) for c in v.values] for v in model.trainable_variables]
    base = [E.get_memory_info(d)["current"] for d in GPUS]
    with pytest.raises(KeyError) as e:
        s.run(step, args=(bx, by, 1, "python"))
    assert e.value.args == ("boom",)
    assert e.value.__notes__ == ["(raised by the step function on replica 1, /device:GPU:1)"]
    with pytest.raises(vdev.OutOfMemoryError) as e:
        s.run(step, args=(bx, by, 2, "oom"))
    assert str(e.value).startswith(
        "replica 2 (/device:GPU:2): OOM when allocating tensor with shape[5368709120] and type "
        "float (20.00 GiB) on %s/device:GPU:2: " % LONG)
    assert e.value.status == "VDEV_ERR_OOM" and isinstance(e.value.__cause__, vdev.OutOfMemoryError)
    assert sorted(reached) == [0, 0, 1, 2]  # the others got to the update, in vain
    assert [[bits(c) for c in v.values] for v in model.trainable_variables] == before
    assert [E.get_memory_info(d)["current"] for d in GPUS] == base  # nothing left behind
    s.run(step, args=(bx, by, -1, None))  # the next step works
    after = [[bits(c) for c in v.values] for v in model.trainable_variables]
    assert after != before and all(len(set(v)) == 1 for v in after)


def test_misuse():
    s = D.MirroredStrategy()
    with s.scope():
        v = vdev.Variable([1.0])
        lazy = vdev.layers.Dense(2)
    plain_opt = vdev.optimizers.SGD(0.1)

    def assign_inside():
        v.assign([2.0])
    with pytest.raises(RuntimeError) as e:
        s.run(assign_inside)
    assert str(e.value).startswith("assign of a MirroredVariable inside strategy.run: each "
                                   "replica would write its own copy")
    with pytest.raises(ValueError) as e:
        s.run(lambda: plain_opt.apply_gradients([(vdev.constant([1.0]), v)]))
    assert str(e.value).startswith("optimizer 'SGD' is used inside strategy.run but was not "
                                   "made under that strategy's scope()")
    with pytest.raises(RuntimeError) as e:
        s.run(lambda: lazy(vdev.constant([[1.0, 2.0]])))
    assert str(e.value).startswith("layer %r, made under strategy.scope(), is built inside "
                                   "strategy.run" % lazy.name)
    with pytest.raises(RuntimeError) as e:  # TensorFlow's run enters the scope first
        s.run(lambda: s.run(lambda: None))
    assert str(e.value) == CROSS_REPLICA
    with pytest.raises(TypeError):
        s.run(5)
    with pytest.raises(ValueError):
        s.run(lambda: None, options=object())
    assert v.numpy().tolist() == [1.0]
    vdev.shutdown()  # frees the strategy
    with pytest.raises(RuntimeError) as e:
        s.run(lambda: None)
    assert str(e.value) == "the strategy was freed (vdev.shutdown() frees every strategy)"
    with pytest.raises(RuntimeError):
        s.scope().__enter__()


def test_compute_average_loss():
    cal = vdev.nn.compute_average_loss
    assert float(cal([1.0, 2.0, 3.0])) == 2.0
    assert float(cal([1.0, 2.0, 3.0], global_batch_size=6)) == 1.0
    assert float(cal([1.0, 2.0], sample_weight=[2.0, 0.0])) == 1.0
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        cal(vdev.constant(5.0))
    rank0 = ("Invalid value passed for `per_example_loss`. Expected a tensor with at least rank "
             "1. Received per_example_loss of shape [] with rank 0")
    assert str(e.value) == rank0
    for bad in (0, -3):
        with pytest.raises(vdev.errors.InvalidArgumentError) as e:
            cal([1.0], global_batch_size=bad)
        assert str(e.value) == "global_batch_size must be positive."
    with pytest.raises(TypeError):
        cal([1.0], global_batch_size=2.5)
    s = D.MirroredStrategy()
    with s.scope():
        with pytest.raises(RuntimeError) as e:
            cal([1.0])
        assert str(e.value) == ("You are calling `compute_average_loss` in cross replica "
                                "context, while it was expected to be called in replica "
                                "context.")
        assert float(cal([4.0], global_batch_size=2)) == 2.0
    (b,), = list(s.experimental_distribute_dataset([(np.ones((7, 1), np.float32),)]))

    def step(b):
        per = vdev.reshape(b, [-1])
        return cal(per), cal(vdev.ones([2])), cal(per, global_batch_size=14)

    # with a batch split in this step: its rows (7) for a loss of the
    # replica's rows; another loss, or no batch: the loss's rows times the
    # replicas (TensorFlow's default)
    split, other, given = s.run(step, args=(b,))
    f32 = np.float32
    assert [float(t) for t in split.values] == [f32(3) / f32(7)] + [f32(2) / f32(7)] * 2
    assert [float(t) for t in other.values] == [f32(2) / f32(6)] + [f32(2) / f32(7)] * 2
    assert [float(t) for t in given.values] == [f32(3) / f32(14)] + [f32(2) / f32(14)] * 2
    default = s.run(lambda: cal(vdev.ones([2])))
    assert [float(t) for t in default.values] == [f32(2) / f32(6)] * 3
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:
        s.run(lambda: cal(vdev.constant(1.0)))
    assert str(e.value) == "replica 0 (/device:GPU:0): " + rank0


def test_per_example_losses():
    y = vdev.constant([[1.0, 0.0], [0.0, 1.0]])
    logits = vdev.constant([[2.0, 0.0], [1.0, 1.0]])
    cce = vdev.losses.CategoricalCrossentropy(from_logits=True, reduction="none")
    lp = np.log(np.exp([[2.0, 0.0], [1.0, 1.0]]) / np.exp([[2.0, 0.0], [1.0, 1.0]]).sum(1,
                                                                                     keepdims=True))
    np.testing.assert_allclose(cce(y, logits).numpy(), [-lp[0, 0], -lp[1, 1]], rtol=1e-6)
    mean = vdev.losses.CategoricalCrossentropy(from_logits=True)(y, logits)
    assert float(mean) == pytest.approx(float(np.mean([-lp[0, 0], -lp[1, 1]])))
    mse = vdev.losses.MeanSquaredError(reduction=vdev.losses.Reduction.NONE)
    assert mse([[1.0, 3.0], [0.0, 0.0]], [[0.0, 0.0], [2.0, 2.0]]).numpy().tolist() == [5.0, 4.0]
    with pytest.raises(ValueError) as e:
        vdev.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")
    assert str(e.value) == ("vdev's losses average over the batch (reduction 'auto' or "
                            "'sum_over_batch_size'), sum over it ('sum'), not 'none'; for one "
                            "loss per example, use CategoricalCrossentropy(from_logits=True, "
                            "reduction='none') with one-hot labels")
    with pytest.raises(ValueError):
        vdev.losses.MeanSquaredError(reduction="mean")


def _ranks(n, fn):
    """fn(rank) on n threads at once; the exceptions (None where none)."""
    errs = [None] * n

    def run(r):
        try:
            fn(r)
        except Exception as e:  # noqa: BLE001 (reported to the test)
            errs[r] = e
    th = [threading.Thread(target=run, args=(r,)) for r in range(n)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    return errs


def test_communicator():
    comm = D.Communicator(["GPU:0", "GPU:2"])
    assert comm.size == 2 and comm.devices == ("/device:GPU:0", "/device:GPU:2")
    assert comm.implementation == "ring"
    assert repr(comm) == "Communicator(('/device:GPU:0', '/device:GPU:2'), ring)"
    ts = []
    for r, d in enumerate(comm.devices):
        with vdev.device(d):
            ts.append(vdev.constant([1.0, 2.0, 3.0]) * float(r + 1))
    assert _ranks(2, lambda r: comm.all_reduce(r, [ts[r]], "SUM")) == [None, None]
    assert [t.numpy().tolist() for t in ts] == [[3.0, 6.0, 9.0]] * 2
    assert _ranks(2, lambda r: comm.all_reduce(r, ts[r], "mean")) == [None, None]
    assert [t.numpy().tolist() for t in ts] == [[3.0, 6.0, 9.0]] * 2
    with vdev.device("GPU:2"):
        ts[1] = vdev.constant([0.0, 0.0, 0.0])
    assert _ranks(2, lambda r: comm.broadcast(r, [ts[r]], root=0)) == [None, None]
    assert ts[1].numpy().tolist() == [3.0, 6.0, 9.0]
    outs = []
    for d in comm.devices:
        with vdev.device(d):
            outs.append(vdev.zeros([2, 3]))
    assert _ranks(2, lambda r: comm.all_gather(r, ts[r], outs[r])) == [None, None]
    assert [o.numpy().tolist() for o in outs] == [[[3.0, 6.0, 9.0]] * 2] * 2
    assert _ranks(2, lambda r: comm.barrier(r)) == [None, None]
    errs = _ranks(2, lambda r: comm.all_reduce(r, [ts[r]] if r == 0 else [outs[r]]))
    want = ("Shape mismatch in the collective instance 5. Op at device %s/device:GPU:2 expected "
            "shape [2,3] but another member in the group expected shape [3]. This is likely due "
            "to different input shapes at different members of the collective op." % LONG)
    assert [type(e) for e in errs] == [vdev.errors.InvalidArgumentError] * 2
    assert [str(e) for e in errs] == [want] * 2
    errs = _ranks(2, lambda r: comm.abort(r, "gave up") if r == 1 else comm.barrier(r))
    msg = ("Collective ops is aborted by: rank 1 (/device:GPU:2): gave up. The error could be "
           "from a previous operation. Free the communicator and make a new one to reset.")
    assert str(errs[0]) == msg and errs[1] is None
    assert [str(e) for e in _ranks(2, comm.barrier)] == [msg] * 2  # spent
    with pytest.raises(ValueError):
        comm.set_timeout(0)
    with pytest.raises(TypeError):
        comm.all_reduce(0, [1.0])
    with pytest.raises(TypeError):
        comm.all_gather(0, ts[0], [1.0])
    comm.free()
    with pytest.raises(RuntimeError) as e:
        comm.barrier(0)
    assert str(e.value) == ("the communicator was freed (vdev.shutdown() frees every "
                            "communicator)")
    with pytest.raises(ValueError) as e:
        D.Communicator(["GPU:1", "gpu:1"])
    assert str(e.value).startswith("No duplicates allowed in `devices` argument:")
    with pytest.raises(ValueError):
        D.Communicator("GPU:1")
    c2 = D.Communicator(["GPU:0"])
    c2.set_timeout(5)
    c2.abort(0, vdev.OutOfMemoryError("no room", "VDEV_ERR_OOM"))
    with pytest.raises(vdev.OutOfMemoryError):
        c2.barrier(0)
    vdev.shutdown()  # frees communicators too
    with pytest.raises(RuntimeError):
        c2.barrier(0)


def _demo_lines(out):
    keep = ("Replicas:", "Model:", "step ", "Loss fell", "One GPU after")
    return [l for l in out.splitlines() if l.startswith(keep)]


@pytest.mark.parametrize("sim,opts", [(None, ["--steps", "20", "--batch", "256"]),
                                      ("3x1GiB", ["--steps", "7", "--batch", "10", "--seed",
                                                  "3"])])
def test_mirrored_example_prints_the_c_demos_numbers(sim, opts):
    """examples/python/mirrored.py prints the losses of `vdev demo --mirrored`
    (examples/mirrored.c), to the last digit, for the same options."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    env.pop("VDEV_SIM_GPUS", None)
    if sim:
        env["VDEV_SIM_GPUS"] = sim
    cli = os.path.join(os.path.dirname(os.environ["VDEV_LIBRARY"]), "vdev")
    c = subprocess.run([cli, "demo", "--mirrored"] + opts, env=env, capture_output=True,
                       text=True, timeout=600)
    py = subprocess.run([sys.executable, os.path.join(SRC, "examples", "python", "mirrored.py")]
                        + opts, env=env, capture_output=True, text=True, timeout=600)
    assert c.returncode == 0, c.stderr
    assert py.returncode == 0, py.stderr
    want = _demo_lines(c.stdout)
    assert len(want) >= 5 and _demo_lines(py.stdout) == want
    assert "replicas identical bit for bit: yes" in py.stdout
    assert "Memory imbalance (largest peak / smallest): 1.0" in py.stdout


def test_another_strategy_inside_a_step_is_refused():
    # TensorFlow: a strategy's scope inside another's step mixes strategies,
    # and strategy.run inside a step needs cross-replica context.
    s = D.MirroredStrategy()
    s2 = D.MirroredStrategy(["GPU:0", "GPU:1"])

    def enter_other():
        with s2.scope():
            vdev.Variable([1.0])

    mixing = "Mixing different tf.distribute.Strategy objects: %r is not %r" % (s, s2)
    with pytest.raises(RuntimeError) as e:
        s.run(enter_other)
    assert str(e.value) == mixing

    def nested_run():
        s2.run(lambda: None)

    with pytest.raises(RuntimeError) as e:
        s.run(nested_run)
    assert str(e.value) == mixing
    with s.scope():  # another strategy's scope: the same
        with pytest.raises(RuntimeError) as e:
            s2.run(lambda: None)
        assert str(e.value) == mixing
        with pytest.raises(RuntimeError) as e:
            s2.reduce("SUM", D.PerReplica([vdev.constant(1.0)] * 2))
        assert str(e.value) == mixing
    with s2.scope():  # both still work
        assert s2.run(lambda: 7) == 7  # the strategy still runs


def test_unseeded_random_in_steps_is_fixed_by_replica_not_timing():
    """seed=None inside strategy.run: each replica's numbers are its own,
    whichever replica's thread draws first (here forced both ways), so a run
    gives the same bits every time; each run takes one seed from the counter."""
    s = D.MirroredStrategy(["GPU:0", "GPU:1"])

    def draws(first):
        went = threading.Event()

        def step():
            me = D.get_replica_context().replica_id_in_sync_group
            if me != first:
                went.wait(120)  # ends when set; the bound is for a hang only
            out = [vdev.random.normal([5]), vdev.random.uniform([3])]
            if me == first:
                went.set()
            return out
        vdev.random.set_seed(7)
        got = s.run(step)
        after = vdev.random.normal([2])  # the counter moved by one seed: the run's
        return [[bits(t) for t in r] for r in zip(*[v.values for v in got])], bits(after)

    a, b = draws(0), draws(1)
    assert a == b
    (r0, r1), _ = a
    assert r0 != r1 and r0[0] != bits(vdev.random.normal([5], seed=7))
    vdev.random.set_seed(7)
    vdev.random.normal([1])
    assert a[1] == bits(vdev.random.normal([2]))
