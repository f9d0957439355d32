"""Keras's optimizer arguments in vdev's optimizers: SGD(nesterov=),
Adam(amsgrad=), clipnorm / clipvalue / global_clipnorm and weight_decay on
both, each checked over several steps against a NumPy transcription of
Keras 2.11+'s formulas (keras/optimizers/sgd.py, adam.py, optimizer.py:
_clip_gradients, _apply_weight_decay), and against torch where torch's
optimizer means the same (SGD's Nesterov, AdamW's decay with AMSGrad, the
global norm's clipping), when torch is installed. Bad arguments get Keras's
error."""
import numpy as np
import pytest

import vdev

F = np.float32


def _clip(grads, clipnorm=None, clipvalue=None, global_clipnorm=None):
    """Keras's Optimizer._clip_gradients, in float32."""
    if clipnorm and clipnorm > 0:
        out = []
        for g in grads:
            norm = np.sqrt(np.sum(g * g, dtype=F))
            out.append((g * F(clipnorm)) / np.maximum(norm, F(clipnorm)))
        return out
    if global_clipnorm and global_clipnorm > 0:
        norm = np.sqrt(sum(np.sum(g * g, dtype=F) for g in grads), dtype=F)
        c = F(global_clipnorm)
        with np.errstate(divide="ignore"):
            scale = c * np.minimum(F(1) / norm, F(1) / c) + (norm - norm)
        return [g * scale for g in grads]
    if clipvalue and clipvalue > 0:
        return [np.clip(g, -F(clipvalue), F(clipvalue)) for g in grads]
    return grads


def _keras_run(kind, steps, ws, grads_of, lr, momentum=0.0, nesterov=False, amsgrad=False,
               beta_1=0.9, beta_2=0.999, eps=1e-7, weight_decay=None, **clip):
    """Keras 2.11+'s update, step after step, on float32 copies of ws."""
    ws = [w.astype(F) for w in ws]
    slots = [[np.zeros_like(w) for _ in range(3)] for w in ws]
    for t in range(steps):
        grads = _clip([g.astype(F) for g in grads_of(t)], **clip)
        if weight_decay is not None:
            ws = [w - w * F(weight_decay) * F(lr) for w in ws]
        for w, g, s in zip(ws, grads, slots):
            if kind == "sgd":
                if momentum == 0:
                    w += -g * F(lr)
                    continue
                s[0][:] = -g * F(lr) + s[0] * F(momentum)
                w += (-g * F(lr) + s[0] * F(momentum)) if nesterov else s[0]
            else:
                step = t + 1
                alpha = lr * np.sqrt(1 - beta_2 ** step) / (1 - beta_1 ** step)
                s[0][:] = s[0] + (g - s[0]) * F(1 - beta_1)
                s[1][:] = s[1] + (g * g - s[1]) * F(1 - beta_2)
                v = s[1]
                if amsgrad:
                    s[2][:] = np.maximum(s[2], s[1])
                    v = s[2]
                w -= (s[0] * F(alpha)) / (np.sqrt(v) + F(eps))
    return ws


def _data(seed=0):
    rng = np.random.default_rng(seed)
    ws = [rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (4,))]
    gs = [[rng.uniform(-2, 2, w.shape) for w in ws] for _ in range(6)]
    return ws, gs


def _vdev_run(opt, ws, gs, steps=6):
    vs = [vdev.Variable(w.astype(F)) for w in ws]
    for t in range(steps):
        opt.apply_gradients(zip([vdev.constant(g.astype(F)) for g in gs[t]], vs))
    return [v.numpy() for v in vs]


CASES = [
    ("sgd", dict(learning_rate=0.1, momentum=0.9, nesterov=True)),
    ("sgd", dict(learning_rate=0.1, momentum=0.0, nesterov=True)),
    ("sgd", dict(learning_rate=0.05, momentum=0.5, weight_decay=0.1)),
    ("sgd", dict(learning_rate=0.1, clipnorm=1.0)),
    ("sgd", dict(learning_rate=0.1, momentum=0.9, clipvalue=0.5)),
    ("sgd", dict(learning_rate=0.1, global_clipnorm=1.5)),
    ("sgd", dict(learning_rate=0.1, clipnorm=1.0, clipvalue=0.1)),  # clipnorm wins
    ("adam", dict(learning_rate=0.01, amsgrad=True)),
    ("adam", dict(learning_rate=0.01, beta_2=0.5, amsgrad=True)),
    ("adam", dict(learning_rate=0.01, amsgrad=True, weight_decay=0.05, clipnorm=2.0)),
    ("adam", dict(learning_rate=0.01, beta_1=0.5, beta_2=0.6, weight_decay=0.3)),
    ("adam", dict(learning_rate=0.01, global_clipnorm=0.5)),
]


@pytest.mark.parametrize("kind,kw", CASES)
@pytest.mark.parametrize("dev", ["GPU:0", "CPU:0"])
def test_matches_keras_formulas(kind, kw, dev):
    ws, gs = _data()
    with vdev.device(dev):
        opt = (vdev.optimizers.SGD if kind == "sgd" else vdev.optimizers.Adam)(**kw)
        got = _vdev_run(opt, ws, gs)
    args = {k: v for k, v in kw.items() if k != "learning_rate"}
    want = _keras_run(kind, 6, ws, lambda t: gs[t], kw["learning_rate"], **args)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)


def test_each_argument_changes_the_result():
    """So that the comparisons above cannot pass with an argument ignored."""
    ws, gs = _data()
    base = _vdev_run(vdev.optimizers.SGD(0.1, momentum=0.9), ws, gs)
    for kw in (dict(nesterov=True), dict(clipnorm=1.0), dict(clipvalue=0.5),
               dict(global_clipnorm=1.5), dict(weight_decay=0.1)):
        other = _vdev_run(vdev.optimizers.SGD(0.1, momentum=0.9, **kw), ws, gs)
        assert not np.allclose(base[0], other[0], rtol=1e-4), kw
    base = _vdev_run(vdev.optimizers.Adam(0.01, beta_2=0.5), ws, gs)
    ams = _vdev_run(vdev.optimizers.Adam(0.01, beta_2=0.5, amsgrad=True), ws, gs)
    assert not np.allclose(base[0], ams[0], rtol=1e-4)


def test_gradients_are_not_written_and_vhat_is_a_slot():
    w = vdev.Variable([1.0, -2.0])
    g = vdev.constant([3.0, 4.0])
    opt = vdev.optimizers.Adam(0.1, amsgrad=True, clipnorm=1.0)
    opt.apply_gradients([(g, w)])
    np.testing.assert_array_equal(g.numpy(), [3.0, 4.0])
    assert opt.get_slot_names() == ["m", "v", "vhat"]
    assert [n for n, _ in opt._slot_handles(w)] == ["m", "v", "vhat"]
    assert vdev.optimizers.Adam().get_slot_names() == ["m", "v"]


def test_attributes_and_setters():
    opt = vdev.optimizers.SGD(0.5, momentum=0.5)
    assert (opt.nesterov, opt.clipnorm, opt.clipvalue, opt.global_clipnorm,
            opt.weight_decay) == (False, None, None, None, None)
    opt.nesterov = True
    w = vdev.Variable([1.0])
    opt.apply_gradients([(vdev.constant([0.5]), w)])
    assert w.numpy()[0] == 0.625  # vel -0.25; 1 + 0.5 * -0.25 - 0.25
    opt.clipvalue = 0.125
    opt.nesterov = False
    opt.apply_gradients([(vdev.constant([0.5]), w)])  # vel 0.5 * -0.25 - 0.0625
    assert w.numpy()[0] == 0.4375
    opt.clipnorm = -1.0  # <= 0: off, as Keras
    assert opt.clipnorm == -1.0
    a = vdev.optimizers.Adam(amsgrad=1, weight_decay=0.004)
    assert a.amsgrad == 1 and a.weight_decay == 0.004


def test_bad_arguments():
    for cls in (vdev.optimizers.SGD, vdev.optimizers.Adam):
        with pytest.raises(ValueError) as e:
            cls(clipnorm=1.0, global_clipnorm=2.0)
        assert str(e.value) == ("At most one of `clipnorm` and `global_clipnorm` can be set. "
                                "Received: clipnorm=1.0, global_clipnorm=2.0.")
        with pytest.raises(ValueError) as e:
            cls(clipnorm=0, global_clipnorm=None, weight_decay=float("nan"))
        assert "weight decay is NaN, not a finite number" in str(e.value)
        with pytest.raises(TypeError):
            cls(nesterov_or_amsgrad=True)
    # the setters' errors in the constructor's words (no C function's name)
    for cls in (vdev.optimizers.SGD, vdev.optimizers.Adam):
        with pytest.raises(ValueError) as e:
            cls(global_clipnorm=float("inf"))
        assert str(e.value) == "global_clipnorm is inf, not a finite number"
        opt = cls()
        with pytest.raises(ValueError) as e:
            opt.global_clipnorm = float("inf")
        assert str(e.value) == "global_clipnorm is inf, not a finite number"
        assert opt.global_clipnorm is None
    # weight_decay is a number or None (not stored as a string)
    for bad in ("0.1", b"0.1", True):
        with pytest.raises(TypeError) as e:
            vdev.optimizers.SGD(weight_decay=bad)
        assert str(e.value) == "weight_decay must be a number or None, not %r" % (bad,)
        opt = vdev.optimizers.Adam(weight_decay=0.5)
        with pytest.raises(TypeError):
            opt.weight_decay = bad
        assert opt.weight_decay == 0.5


def test_clipnorm_and_global_clipnorm_set_later():
    """Keras checks the pair in the constructor only: set later, both are
    kept and clipnorm wins, as in Keras's _clip_gradients."""
    ws, gs = _data(2)
    for first, then in (("clipnorm", "global_clipnorm"), ("global_clipnorm", "clipnorm")):
        opt = vdev.optimizers.SGD(0.1, momentum=0.5, **{first: 0.5})
        setattr(opt, then, 0.75)
        assert (opt.clipnorm, opt.global_clipnorm) == ((0.5, 0.75) if first == "clipnorm"
                                                       else (0.75, 0.5))
        got = _vdev_run(opt, ws, gs)
        want = _keras_run("sgd", 6, ws, lambda t: gs[t], 0.1, momentum=0.5,
                          clipnorm=opt.clipnorm)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)
        opt.clipnorm = None  # global_clipnorm takes over
        assert opt.global_clipnorm in (0.5, 0.75)


def test_infinite_clipnorm_and_clipvalue_clip_nothing():
    """tf.clip_by_norm and tf.clip_by_value with inf leave the gradient."""
    ws, gs = _data(3)
    base = _vdev_run(vdev.optimizers.Adam(0.01), ws, gs)
    for kw in (dict(clipnorm=float("inf")), dict(clipvalue=float("inf"))):
        opt = vdev.optimizers.Adam(0.01, **kw)
        assert getattr(opt, list(kw)[0]) == float("inf")
        for a, b in zip(_vdev_run(opt, ws, gs), base):
            np.testing.assert_array_equal(a, b)


def test_exclude_from_weight_decay():
    """Keras 2.11's exclude_from_weight_decay: the variables listed and
    those whose name matches (re.search) are not decayed; one step is one
    iteration; only before the first update."""
    ws, gs = _data(4)
    for kind, make in (("sgd", lambda: vdev.optimizers.SGD(0.1, momentum=0.9,
                                                           weight_decay=0.2)),
                       ("adam", lambda: vdev.optimizers.Adam(0.05, amsgrad=True,
                                                             weight_decay=0.2, clipnorm=1.0))):
        for how in ("var_list", "var_names", "all"):
            opt = make()
            vs = [vdev.Variable(w.astype(F), name=n) for w, n in zip(ws, ("d/kernel", "d/bias"))]
            if how == "var_list":
                opt.exclude_from_weight_decay(var_list=[vs[1]])
            elif how == "var_names":
                opt.exclude_from_weight_decay(var_names=["bi.s$"])
            else:
                opt.exclude_from_weight_decay(var_list=vs[:1], var_names=["bias"])
            for t in range(6):
                opt.apply_gradients(zip([vdev.constant(g.astype(F)) for g in gs[t]], vs))
            assert opt.iterations == 6
            kw = dict(momentum=0.9) if kind == "sgd" else dict(amsgrad=True, clipnorm=1.0)
            lr = 0.1 if kind == "sgd" else 0.05
            want_k = _keras_run(kind, 6, ws, lambda t: gs[t], lr, weight_decay=0.2, **kw)
            want_b = _keras_run(kind, 6, ws, lambda t: gs[t], lr, **kw)
            want = [want_k[0] if how != "all" else want_b[0], want_b[1]]
            for g, w in zip([v.numpy() for v in vs], want):
                np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-6)
            with pytest.raises(ValueError) as e:
                opt.exclude_from_weight_decay(var_names=["kernel"])
            assert str(e.value) == ("`exclude_from_weight_decay()` can only be configued "
                                    "before the optimizer is built.")
    # global_clipnorm: one norm over both groups, as Keras (one update)
    opt = vdev.optimizers.SGD(1.0, weight_decay=0.5, global_clipnorm=1.0)
    opt.exclude_from_weight_decay(var_names=["bias"])
    vs = [vdev.Variable([2.0], name="k"), vdev.Variable([2.0], name="bias")]
    opt.apply_gradients(zip([vdev.constant([3.0]), vdev.constant([4.0])], vs))
    # norm 5: gradients 0.6 and 0.8; k decayed by 2 * 0.5 * 1 first
    np.testing.assert_allclose([v.numpy()[0] for v in vs], [1.0 - 0.6, 2.0 - 0.8], rtol=1e-6)
    assert opt.iterations == 1
    # a variable that comes later and matches a name is excluded too (Keras
    # matches names at each update)
    late = vdev.Variable([2.0], name="late/bias")
    opt.apply_gradients([(vdev.constant([0.0]), late), (vdev.constant([0.0]), vs[0])])
    np.testing.assert_allclose([late.numpy()[0], vs[0].numpy()[0]], [2.0, 0.4 - 0.4 * 0.5],
                               rtol=1e-6)


def test_against_torch():
    torch = pytest.importorskip("torch")
    ws, gs = _data(1)

    def torch_run(make, clip=None):
        ps = [torch.tensor(w.astype(F), requires_grad=True) for w in ws]
        opt = make(ps)
        for t in range(6):
            for p, g in zip(ps, gs[t]):
                p.grad = torch.tensor(g.astype(F))
            if clip:
                torch.nn.utils.clip_grad_norm_(ps, clip)
            opt.step()
        return [p.detach().numpy() for p in ps]

    pairs = [
        (lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, nesterov=True), None,
         vdev.optimizers.SGD(0.1, momentum=0.9, nesterov=True)),
        (lambda ps: torch.optim.AdamW(ps, lr=0.01, eps=1e-7, weight_decay=0.05, amsgrad=True),
         None, vdev.optimizers.Adam(0.01, amsgrad=True, weight_decay=0.05)),
        (lambda ps: torch.optim.SGD(ps, lr=0.1), 1.5,
         vdev.optimizers.SGD(0.1, global_clipnorm=1.5)),
    ]
    for make, clip, opt in pairs:
        for a, b in zip(_vdev_run(opt, ws, gs), torch_run(make, clip)):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_exclude_from_weight_decay_under_a_strategy():
    """Each replica's optimizer runs the two groups itself, one step."""
    s = vdev.distribute.MirroredStrategy()
    with s.scope():
        k = vdev.Variable([1.0, 2.0], name="k")
        b = vdev.Variable([1.0, 2.0], name="d/bias")
        opt = vdev.optimizers.SGD(0.25, weight_decay=0.5)
    opt.exclude_from_weight_decay(var_names=["bias"])

    def step():
        opt.apply_gradients([(vdev.constant([1.0, 1.0]), k), (vdev.constant([1.0, 1.0]), b)])
    s.run(step)
    n = s.num_replicas_in_sync  # the gradients summed over the replicas
    want_k = [w - w * 0.5 * 0.25 - 0.25 * n for w in (1.0, 2.0)]
    want_b = [w - 0.25 * n for w in (1.0, 2.0)]
    for c in k.values:
        np.testing.assert_allclose(c.numpy(), want_k, rtol=1e-6)
    for c in b.values:
        np.testing.assert_allclose(c.numpy(), want_b, rtol=1e-6)
    assert opt.iterations == 1
