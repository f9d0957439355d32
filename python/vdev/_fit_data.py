"""Batches for ``fit``, ``evaluate`` and ``predict`` from a
``vdev.utils.Sequence`` (Keras's ``keras.utils.Sequence``: ``__len__``
batches, ``__getitem__(i)`` the i-th, ``on_epoch_end`` after each epoch)
or a generator (any iterator), each item a batch: ``(x, y)``, ``(x, y,
sample_weight)`` or ``x`` alone (Keras's unpack_x_y_sample_weight), made
arrays as fit makes its arrays. As Keras's data adapters: a Sequence is
read anew each epoch (its batches in a new order each epoch with
``shuffle``, the order from fit's seed), ``len(sequence)`` batches unless
``steps_per_epoch`` says fewer, its ``on_epoch_end`` called after the
callbacks' (not after an epoch that stopped training) and after each
evaluate or predict; a generator is one stream for the whole
fit, never restarted, ``steps_per_epoch`` batches an epoch (vdev asks
for it: Keras runs a generator without it until it ends, forever for the
endless generators fit is usually given); a generator that ends early
ends the fit with Keras's warning, as arrays that run out do, and no
batch is read that is not used. ``y``, ``sample_weight`` and ``validation_split`` with
such data are Keras's ValueErrors; ``class_weight`` weighs each batch;
``validation_data`` may be one too (``validation_steps`` batches, or all).
"""

import inspect

import numpy as np

__all__ = ["Sequence"]


class Sequence:
    """Keras's keras.utils.Sequence: a dataset of batches to subclass
    (``__getitem__``, ``__len__``; ``on_epoch_end`` optional)."""

    def __getitem__(self, index):
        raise NotImplementedError

    def __len__(self):
        raise NotImplementedError

    def on_epoch_end(self):
        """Called by fit after each epoch (shuffle the data here)."""

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]


def is_stream(x):
    """Whether x is a Sequence or an iterator (a generator), not arrays."""
    return isinstance(x, Sequence) or inspect.isgenerator(x) or (
        hasattr(x, "__next__") and not hasattr(x, "shape"))


def unpack(item):
    """Keras's unpack_x_y_sample_weight: (x, y, sample_weight)."""
    if isinstance(item, list):
        item = tuple(item)
    if not isinstance(item, tuple):
        return item, None, None
    if len(item) == 1:
        return item[0], None, None
    if len(item) == 2:
        return item[0], item[1], None
    if len(item) == 3:
        return item
    raise ValueError("Data is expected to be in format `x`, `(x,)`, `(x, y)`, or `(x, y, "
                     "sample_weight)`, found: %r" % (item,))


class Stream:
    """The batches of a Sequence or a generator (see the module)."""

    def __init__(self, data, what="x"):
        self.data = data
        self.sequence = isinstance(data, Sequence)
        self._it = None if self.sequence else iter(data)
        self._held = []  # a generator's items read ahead (the first, to build the model)

    def length(self):
        return len(self.data) if self.sequence else None

    def first(self):
        """The first batch, not consumed."""
        if self.sequence:
            return unpack(self.data[0])
        if not self._held:
            self._held.append(next(self._it))
        return unpack(self._held[0])

    def _next(self):
        if self._held:
            return self._held.pop(0)
        return next(self._it)

    def epoch(self, shuffle=False, seed=None, e=0):
        """One epoch's raw batches: a Sequence's (in a new order with
        shuffle), a generator's from where it is (the one stream)."""
        if self.sequence:
            n = len(self.data)
            order = np.random.default_rng([seed, e]).permutation(n) if shuffle else range(n)
            for i in order:
                yield unpack(self.data[int(i)])
            return
        while True:
            try:
                item = self._next()
            except StopIteration:
                return
            yield unpack(item)

    def epoch_end(self):
        if self.sequence:
            self.data.on_epoch_end()


def refuse_with_stream(y, sample_weight, validation_split):
    """Keras's refusals of what a Sequence or generator brings itself."""
    if y is not None:
        raise ValueError("`y` argument is not supported when using python generator or "
                         "keras.utils.Sequence as input.")
    if sample_weight is not None:
        raise ValueError("`sample_weight` argument is not supported when using python "
                         "generator or keras.utils.Sequence as input.")
    if validation_split:
        raise ValueError("`validation_split` is only supported for Tensors or NumPy arrays, "
                         "found following types in the input: [%s]" % ("generator",))


def steps_of(src, steps, arg):
    """The batches to take: ``steps``, else a Sequence's length; a
    generator without steps is vdev's ValueError (its progress needs the
    count)."""
    if steps is not None:
        return int(steps)
    if src.sequence:
        return len(src.data)
    raise ValueError("vdev's fit, evaluate and predict on a generator take %s (the batches "
                     "to take from it): Keras runs a generator until it ends" % (arg,))


def batches(model, src, class_weight, shuffle, seed, first, passes):
    """The stream's batches as fit takes them: (x, y, weights) arrays."""
    from ._loss_weights import class_weights
    for e in range(first, first + passes):
        for x, y, w in src.epoch(shuffle, seed, e):
            xb, yb = model._data(x, y)
            if yb is None:
                raise ValueError("Target data is missing: a batch of the generator or "
                                 "Sequence gave x alone, and the model was compiled with "
                                 "loss=%s" % (model.loss,))
            wb = model._weights(w, xb, yb)
            if class_weight is not None:
                wb = class_weights(class_weight, yb, wb)
            yield xb, yb, wb


def evaluate(model, src, steps, cbs):
    """evaluate's loop over a stream's batches (fit's validation too)."""
    totals = model._new_totals()
    cbs.call("on_test_begin", None)
    it = batches(model, src, None, False, None, 0, 1)
    for step in range(steps):  # a batch is read only when it is used
        cbs.call("on_test_batch_begin", step, None)
        try:
            xb, yb, wb = next(it)
        except StopIteration:
            break
        loss, out, mask = model._test_batch(xb, yb, wb)
        model._add(totals, loss, xb.shape[0], yb, out, mask, wb)
        cbs.call("on_test_batch_end", step, model._logs(totals))
    logs = model._logs(totals)
    cbs.call("on_test_end", logs)
    src.epoch_end()  # Keras's: each evaluate is an epoch of its Sequence
    return logs


def predict(model, src, steps, cbs):
    """predict's loop over a stream's batches (their x)."""
    cbs.call("on_predict_begin", None)
    outs = []
    it = src.epoch()
    for step in range(steps):
        cbs.call("on_predict_batch_begin", step, None)
        try:
            x, _, _ = next(it)
        except StopIteration:
            break
        xb, _ = model._data(x, None)
        out = model(xb, training=False).numpy()
        outs.append(out)
        cbs.call("on_predict_batch_end", step, {"outputs": out})
    cbs.call("on_predict_end", None)
    src.epoch_end()
    if not outs:
        raise ValueError("Unexpected result of `predict_function` (Empty batch_outputs). "
                         "Please use `Model.compile(..., run_eagerly=True)`, or "
                         "`tf.config.run_functions_eagerly(True)` for more information of "
                         "where went wrong, or file a issue/bug to `tf.keras`.")
    return np.concatenate(outs)
