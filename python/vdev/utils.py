"""Keras 2.11's data utilities a sequence or classification model's user
reaches for first, as ``vdev.utils`` (``tf.keras.utils``): ``pad_sequences``
(also ``tf.keras.preprocessing.sequence.pad_sequences``), which makes the
padded batches ``Embedding(mask_zero=True)`` masks, ``to_categorical``,
and ``Sequence``, the dataset of batches fit, evaluate and predict take
(vdev/_fit_data.py). The first two work on NumPy arrays and give NumPy
arrays, with Keras's rules, defaults and errors in its words.
"""

import numpy as np

from ._fit_data import Sequence

__all__ = ["Sequence", "pad_sequences", "to_categorical"]


def pad_sequences(sequences, maxlen=None, dtype="int32", padding="pre", truncating="pre",
                  value=0.0):
    """Keras's pad_sequences: the sequences as one array [number, maxlen]
    (maxlen the longest's length when None), each padded with ``value``
    before it ('pre', Keras's default) or after it ('post'), and one longer
    than maxlen cut at its start ('pre') or its end ('post'). A sequence's
    items may be arrays, all of the first non-empty one's shape (the
    array's trailing axes)."""
    if not hasattr(sequences, "__len__"):
        raise ValueError("`sequences` must be iterable.")
    lengths, sample_shape, found = [], (), False
    for s in sequences:
        try:
            lengths.append(len(s))
        except TypeError:
            raise ValueError("`sequences` must be a list of iterables. Found non-iterable: %s"
                             % (s,)) from None
        if not found and len(s):
            sample_shape, found = np.asarray(s).shape[1:], True
    if maxlen is None:
        maxlen = np.max(lengths)  # Keras's: no sequences at all is numpy's ValueError
    text = np.issubdtype(dtype, np.str_)
    if isinstance(value, str) and dtype != object and not text:
        raise ValueError("`dtype` %s is not compatible with `value`'s type: %s\nYou should set "
                         "`dtype=object` for variable length strings." % (dtype, type(value)))
    out = np.full((len(sequences), maxlen) + sample_shape, value, dtype=dtype)
    for i, s in enumerate(sequences):
        if not len(s):
            continue
        if truncating == "pre":
            kept = s[-maxlen:]
        elif truncating == "post":
            kept = s[:maxlen]
        else:
            raise ValueError('Truncating type "%s" not understood' % (truncating,))
        kept = np.asarray(kept, dtype=dtype)
        if kept.shape[1:] != sample_shape:
            raise ValueError("Shape of sample %s of sequence at position %s is different from "
                             "expected shape %s" % (kept.shape[1:], i, sample_shape))
        if padding == "post":
            out[i, :len(kept)] = kept
        elif padding == "pre":
            out[i, -len(kept):] = kept
        else:
            raise ValueError('Padding type "%s" not understood' % (padding,))
    return out


def to_categorical(y, num_classes=None, dtype="float32"):
    """Keras's to_categorical: class ids as one-hot rows, the classes on a
    new last axis (a last axis of 1 replaced); num_classes None (or 0) is
    the largest id + 1."""
    y = np.array(y, dtype="int")
    shape = y.shape
    if shape and shape[-1] == 1 and len(shape) > 1:
        shape = tuple(shape[:-1])
    y = y.reshape(-1)
    if not num_classes:
        num_classes = int(np.max(y)) + 1
    out = np.zeros((y.shape[0], num_classes), dtype=dtype)
    out[np.arange(y.shape[0]), y] = 1
    return out.reshape(shape + (num_classes,))
