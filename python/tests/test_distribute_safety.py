"""vdev.distribute: what keeps a data-parallel step right or says why not.
A loss that averages over a replica's rows is refused under a strategy, as
Keras refuses it (its mean, summed over the replicas, would make the
gradients num_replicas_in_sync times too large), and Reduction.SUM is there
instead; variables, layers and strategy scopes made inside strategy.run are
refused (each replica would make its own); compute_average_loss divides by
a distributed batch only for a loss of that batch's rows; an error in a step
keeps what it carries (an out-of-memory report, a user's own OpError
subclass); str() of a MirroredVariable is TensorFlow's. Three simulated
GPUs (conftest), small ones where memory runs out."""
import numpy as np
import pytest

import vdev
from conftest import clean_env

D = vdev.distribute
LONG = "/job:localhost/replica:0/task:0"
CROSS_REPLICA = ("Method requires being in cross-replica context: call it outside strategy.run "
                 "(vdev's ReplicaContext has no merge_call)")
KERAS_MEAN = (
    "Please use `tf.keras.losses.Reduction.SUM` or `tf.keras.losses.Reduction.NONE` for loss "
    "reduction when losses are used with `tf.distribute.Strategy` outside of the built-in "
    "training loops. You can implement `tf.keras.losses.Reduction.SUM_OVER_BATCH_SIZE` using "
    "global batch size like:\n```\nwith strategy.scope():\n    loss_obj = "
    "tf.keras.losses.CategoricalCrossentropy(reduction=tf.keras.losses.Reduction.NONE)\n....\n"
    "    loss = tf.reduce_sum(loss_obj(labels, predictions)) * (1. / global_batch_size)\n```\n"
    "Please see https://www.tensorflow.org/tutorials/distribute/custom_training for more "
    "details.")
NOTE = "(raised by the step function on replica %d, /device:GPU:%d)"


def _x():
    return np.arange(18, dtype=np.float32).reshape(6, 3) / 10


def test_a_mean_loss_under_a_strategy_is_refused_and_sum_is_there():
    s = D.MirroredStrategy()
    with s.scope():
        w = vdev.Variable(np.ones((3, 1), np.float32))
        opt = vdev.optimizers.SGD(0.1)
    (x, y), = s.experimental_distribute_dataset([(_x(), np.zeros((6, 1), np.float32))])
    L = vdev.losses

    def step(loss_fn, x, y):
        with vdev.GradientTape() as tape:
            loss = loss_fn(y, vdev.matmul(x, w))
            if loss_fn.reduction == "sum":
                loss = loss / 6.0  # the global batch
        opt.apply_gradients(zip(tape.gradient(loss, [w]), [w]))

    for reduction in ("auto", "sum_over_batch_size"):
        for fn in (L.MeanSquaredError(reduction),
                   L.CategoricalCrossentropy(from_logits=True, reduction=reduction),
                   L.SparseCategoricalCrossentropy(from_logits=True, reduction=reduction)):
            with pytest.raises(ValueError) as e:
                s.run(step, args=(fn, x, y))
            assert str(e.value) == KERAS_MEAN
            assert e.value.__notes__ == [NOTE % (0, 0)]
            with s.scope(), pytest.raises(ValueError) as e:  # Keras: has_strategy()
                fn([[1.0]], [[2.0]])
            assert str(e.value) == KERAS_MEAN
    assert w.numpy().tolist() == [[1.0]] * 3  # nothing was applied
    s.run(step, args=(L.MeanSquaredError(L.Reduction.SUM), x, y))
    xs = _x()
    want = np.ones((3, 1), np.float32) - np.float32(0.1) * (2 * xs.T @ (xs @ np.ones((3, 1))) / 6)
    for c in w.values:  # the true gradient of the mean over the global batch
        np.testing.assert_allclose(c.numpy(), want, rtol=1e-5)
    # SUM outside a strategy: the sum of the per-example losses
    y2, p2 = [[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[0.5, 0.5], [2.0, 1.0], [0.0, 3.0]]
    per = L.MeanSquaredError(reduction="none")(y2, p2).numpy()
    assert float(L.MeanSquaredError(reduction="sum")(y2, p2)) == pytest.approx(per.sum())
    logits = vdev.constant([[2.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    onehot = [[1.0, 0.0], [0.0, 1.0], [0.0, 1.0]]
    per = L.CategoricalCrossentropy(from_logits=True, reduction="none")(onehot, logits).numpy()
    assert float(L.CategoricalCrossentropy(from_logits=True, reduction="sum")(
        onehot, logits)) == pytest.approx(per.sum(), rel=1e-6)
    assert float(L.SparseCategoricalCrossentropy(from_logits=True, reduction="sum")(
        vdev.constant([0, 1, 1], dtype=vdev.int32), logits)) == pytest.approx(per.sum(),
                                                                              rel=1e-6)
    with pytest.raises(ValueError) as e:
        L.MeanSquaredError(reduction="mean")
    assert str(e.value) == ("vdev's losses average over the batch (reduction 'auto' or "
                            "'sum_over_batch_size'), sum over it ('sum') or give one loss per "
                            "example ('none'), not 'mean'")


def test_variables_layers_and_scopes_made_inside_a_step_are_refused():
    s = D.MirroredStrategy()
    (x,), = s.experimental_distribute_dataset([(np.ones((6, 4), np.float32),)])
    made = []

    def variable(x):
        made.append(vdev.Variable(np.ones((3, 1), np.float32)))

    def layer(x):
        made.append(vdev.layers.Dense(1, input_dim=4, name="d"))

    def lazy_layer(x):
        d = vdev.layers.Dense(1, name="lazy")
        made.append(d(x))

    def scoped(x):
        with s.scope():
            made.append(vdev.layers.Dense(1, input_dim=4))

    tail = (" inside strategy.run: variables must be made once for every replica, not once by "
            "each. %s under strategy.scope(), before strategy.run")
    cases = [(variable, "a vdev.Variable is made" + tail % "Make it"),
             (layer, "layer 'd' is built" + tail % "Make it, with input_dim (or call it once),"),
             (lazy_layer, "layer 'lazy' is built" + tail
              % "Make it, with input_dim (or call it once),"),
             (scoped, CROSS_REPLICA),
             (lambda x: s.reduce("SUM", x), CROSS_REPLICA)]
    for fn, msg in cases:
        with pytest.raises(RuntimeError) as e:
            s.run(fn, args=(x,))
        assert str(e.value) == msg
    assert made == []
    with s.scope():  # outside strategy.run: mirrored, as before
        d = vdev.layers.Dense(1, input_dim=4)
    assert isinstance(d.kernel, D.MirroredVariable)
    assert s.run(lambda x: d(x), args=(x,)).values[0].shape == (2, 1)
    # a vdev.Variable made inside a step as a copy or a replica's view stays possible
    assert s.run(lambda: len(d.kernel.values)) == 3


def test_compute_average_loss_divides_by_a_batch_only_for_its_rows():
    s = D.MirroredStrategy()
    six, nine = np.ones((6, 1), np.float32), np.ones((9, 1), np.float32)
    (a, b), = s.experimental_distribute_dataset([(six, nine)])
    cal = vdev.nn.compute_average_loss

    def loss_of_first(p, q):  # the loss is over p's rows (2 per replica)
        return cal(vdev.reshape(p, [-1]))

    f32 = np.float32
    # two batches of different rows: TensorFlow's rule, whatever their order
    for args in ((a, b), (b, a)):
        first = s.run(loss_of_first, args=args)
        rows = 2 if args[0] is a else 3
        assert [float(t) for t in first.values] == [f32(rows) / f32(rows * 3)] * 3
    # one batch, and a loss of other rows: TensorFlow's rule, not the batch's
    other = s.run(lambda p: cal(vdev.ones([5])), args=(a,))
    assert [float(t) for t in other.values] == [f32(5) / f32(15)] * 3
    # inputs and labels of one global batch: the batch's rows
    (p, q), = s.experimental_distribute_dataset([(np.ones((7, 1), np.float32),) * 2])
    mine = s.run(lambda p, q: cal(vdev.reshape(p, [-1])), args=(p, q))
    assert [float(t) for t in mine.values] == [f32(3) / f32(7)] + [f32(2) / f32(7)] * 2
    with pytest.raises(vdev.errors.InvalidArgumentError) as e:  # empty: TensorFlow's rule
        s.run(lambda p: cal(vdev.zeros([0])), args=(a,))
    assert str(e.value) == "replica 0 (/device:GPU:0): global_batch_size must be positive."


def test_an_out_of_memory_report_survives_strategy_run(monkeypatch):
    clean_env(monkeypatch, sim="3x16MiB")
    monkeypatch.setenv("VDEV_OOM_REPORT", "1")
    s = D.MirroredStrategy()

    def step():
        if D.get_replica_context().replica_id_in_sync_group == 1:
            vdev.zeros([8192, 1024])  # 32 MiB

    with pytest.raises(vdev.OutOfMemoryError) as e:
        s.run(step)
    assert str(e.value).startswith("replica 1 (/device:GPU:1): OOM when allocating tensor "
                                   "with shape[8192,1024]")
    report = e.value.report
    assert report.startswith(str(e.value) + "\n")
    assert "\nAllocator (/device:GPU:1) state: " in report
    assert e.value.__cause__.report == report[len("replica 1 (/device:GPU:1): "):]


def test_an_error_of_the_step_is_raised_as_it_was():
    class MyErr(vdev.errors.InvalidArgumentError):
        def __init__(self, detail):
            super().__init__("my error: " + detail)

    s = D.MirroredStrategy()
    raised = []

    def step(err):
        if D.get_replica_context().replica_id_in_sync_group == 1:
            raised.append(err)
            raise err

    for err in (MyErr("bad"), vdev.errors.InvalidArgumentError(None, None, "tf form")):
        with pytest.raises(type(err)) as e:
            s.run(step, args=(err,))
        assert e.value is raised[-1]
        assert e.value.__notes__ == [NOTE % (1, 1)]
    assert str(raised[0]) == "my error: bad"


def test_str_of_a_mirrored_variable_is_tensorflows():
    s = D.MirroredStrategy(["GPU:0", "GPU:2"])
    with s.scope():
        v = vdev.Variable([1.0], name="v")
    want = ("MirroredVariable:{\n"
            "  0: <vdev.Variable 'v' shape=(1,) dtype=float32, device=%s/device:GPU:0, "
            "numpy=array([1.], dtype=float32)>,\n"
            "  1: <vdev.Variable 'v' shape=(1,) dtype=float32, device=%s/device:GPU:2, "
            "numpy=array([1.], dtype=float32)>\n}" % (LONG, LONG))
    assert str(v) == want and repr(v) == want
    p = s.run(lambda: D.get_replica_context().replica_id_in_sync_group)
    assert str(p) == "PerReplica:{\n  0: 0,\n  1: 1\n}"


def test_apply_gradients_on_a_variable_of_no_or_another_strategy_is_keras_refusal():
    # Every replica updated the one copy it read, replica 0's (or a plain
    # variable on one device): refused by vdev_replica_apply_gradients as
    # "tensor #0 is on /device:GPU:0, not on the replica's device ..."
    s1 = D.MirroredStrategy(["GPU:0", "GPU:1", "GPU:2"])
    s2 = D.MirroredStrategy(["GPU:0", "GPU:1"])
    with s1.scope():
        v1 = vdev.Variable([1.0, 2.0], name="v1")
    with s2.scope():
        opt = vdev.optimizers.SGD(0.5)
        v2 = vdev.Variable([1.0, 2.0], name="v2")
    with vdev.device("GPU:0"):
        plain = vdev.Variable([1.0, 2.0], name="plain")

    def step(var):
        def fn():
            with vdev.GradientTape() as tape:
                loss = vdev.math.reduce_sum(var * 2.0)
            opt.apply_gradients(zip(tape.gradient(loss, [var]), [var]))
        return fn

    for var in (v1, plain):
        with pytest.raises(ValueError) as e:
            s2.run(step(var))
        assert str(e.value) == (
            "Trying to create optimizer slot variable under the scope for "
            "tf.distribute.Strategy (%s), which is different from the scope used for the "
            "original variable (%s). Make sure the slot variables are created under the same "
            "strategy scope. This may happen if you're restoring from a checkpoint outside the "
            "scope" % (s2, var))
        assert var.numpy().tolist() == [1.0, 2.0]
    s2.run(step(v2))  # its own variable: gradients 2 summed over 2 replicas, times 0.5
    assert [c.numpy().tolist() for c in v2.values] == [[-1.0, 0.0], [-1.0, 0.0]]
