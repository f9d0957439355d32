"""MirroredStrategy under the strict placement policy (TensorFlow's explicit
device policy), which refuses an op whose inputs are on another device: the
strategy moves values between devices itself, as TensorFlow's does under
any policy, so distributed batches, variables mirrored in its scope, the
replica context's all_reduce, a training step and strategy.reduce give what
they give under the copy policy, while the user's own op on two replicas'
values is still refused. Three simulated 16 GiB GPUs (conftest)."""
import numpy as np
import pytest

import vdev

D = vdev.distribute
LONG = "/job:localhost/replica:0/task:0"


def _values(policy):
    """Everything the strategy computes in a few steps, under policy."""
    vdev.shutdown()
    vdev.placement.set_policy(policy)
    s = D.MirroredStrategy()
    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (12, 4)).astype(np.float32)
    y = (x[:, :1] * x[:, 1:2] + x[:, 2:3]).astype(np.float32)
    with s.scope():
        model = vdev.models.MLP([4, 16, 1], activation="tanh", seed=5)
        opt = vdev.optimizers.SGD(0.1)
    mse = vdev.losses.MeanSquaredError(reduction="none")

    def step(bx, by):
        with vdev.GradientTape() as tape:
            loss = vdev.nn.compute_average_loss(mse(by, model(bx)))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        ctx = D.get_replica_context()
        return loss, ctx.all_reduce("MEAN", loss)

    out = []
    for bx, by in s.experimental_distribute_dataset([(x, y)] * 3):
        loss, mean = s.run(step, args=(bx, by))
        out.append(s.reduce("SUM", loss).numpy().tolist())
        with vdev.device("GPU:1"):
            r = s.reduce("MEAN", loss)
        assert r.device == LONG + "/device:GPU:1"
        out.append(r.numpy().tolist())
        out.append([t.numpy().tolist() for t in mean.values])
    per = s.experimental_distribute_values_from_function(
        lambda c: vdev.constant([1.0 + c.replica_id_in_sync_group] *
                                (1 + c.replica_id_in_sync_group)))
    out.append(float(s.reduce("SUM", per, axis=0)))  # [1], [2, 2], [3, 3, 3]
    out.append(float(s.reduce("MEAN", per, axis=0)))
    out.append(s.reduce("MEAN", model.trainable_variables[0]).numpy().tolist())
    out.append([v.numpy().tolist() for v in model.trainable_variables])
    if policy == "strict":  # in force: the user's own op across replicas is refused
        a, b = loss.values[:2]
        with pytest.raises(vdev.errors.InvalidArgumentError) as e:
            with vdev.device("CPU:0"):
                vdev.add(a, b)
        assert str(e.value).startswith(
            "Tensors on conflicting devices: cannot compute AddV2 as input #0 was expected to "
            "be on %s/device:CPU:0 but is actually on %s/device:GPU:0" % (LONG, LONG))
    return out


def test_the_strategy_under_strict_placement_does_what_it_does_under_copy():
    strict = _values("strict")
    assert strict[-4:-2] == [14.0, pytest.approx(14.0 / 6)]
    assert strict == _values("copy")
