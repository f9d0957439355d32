"""Keras 2.11's text and lookup preprocessing layers, exported by
``vdev.layers``: ``StringLookup``, ``IntegerLookup`` and
``TextVectorization``. vdev has no string tensors, so these run on the host,
on Python strings (a list, nested lists or a NumPy array of them) and
integers, before a model: their int output is a vdev int32 tensor (on the
device scope they were made in, else the current one) for an
``Embedding(mask_zero=True)``; their multi-hot and count outputs float32.

The vocabulary is Keras's IndexLookup's: the mask token first (when there
is one; TextVectorization's is ""), then the out-of-vocabulary token
(``[UNK]``; IntegerLookup's -1), then the tokens ``adapt`` counted, most
frequent first, ties broken by the tokens in reverse order (Keras's
``np.lexsort((tokens, counts))[::-1]``), at most ``max_tokens`` in all; or
the ``vocabulary`` given, in its order. ``get_vocabulary``,
``vocabulary_size``, ``set_vocabulary``, ``invert`` (ids back to tokens),
and the output modes "int", "one_hot", "multi_hot" and "count" (with
``pad_to_max_tokens``) are Keras's. TextVectorization standardizes as
Keras's ops do (``lower``: ASCII letters only, tf.strings.lower's; strip:
Keras's punctuation class), splits on runs of ASCII whitespace (or into
characters), makes ``ngrams`` (joined by a space, each width in turn), and
pads the int output with 0 to the longest text of the batch or to
``output_sequence_length`` (cutting longer texts at the end). What vdev
has not is a ValueError naming it: more than one out-of-vocabulary index
(Keras hashes the token), "tf_idf", sparse and ragged outputs.
"""

import collections
import numbers
import re

import numpy as np

from . import _ops
from ._conv_layers import _base
from ._device import current_device, device
from ._tensor import float32, int32

__all__ = ["IntegerLookup", "StringLookup", "TextVectorization"]

_MODES = ("int", "one_hot", "multi_hot", "count")
_PUNCTUATION = re.compile(r'[!"#$%&()\*\+,-\./:;<=>?@\[\\\]^_`{|}~\']')
_WHITESPACE = re.compile(r"[ \t\n\r\v\f]+")


def _flat(data):
    """The tokens of data (a token, or nested lists / an array of them)."""
    if isinstance(data, np.ndarray):
        return list(data.reshape(-1))
    if isinstance(data, (list, tuple)):
        return [t for d in data for t in _flat(d)]
    return [data]


def _nested(data):
    """data as nested lists (an array's tolist)."""
    return data.tolist() if isinstance(data, np.ndarray) else data


class _IndexLookup(_base()):
    """Keras's IndexLookup: the vocabulary and the lookups; the
    subclasses give the key type and the special tokens' defaults."""

    def __init__(self, max_tokens, num_oov_indices, mask_token, oov_token, vocabulary, invert,
                 output_mode, sparse, pad_to_max_tokens, name, trainable):
        cls = type(self).__name__
        if max_tokens is not None and max_tokens <= 1:
            raise ValueError("If set, `max_tokens` must be greater than 1. Received: "
                             "max_tokens=%s" % (max_tokens,))
        if pad_to_max_tokens and max_tokens is None:
            raise ValueError("If pad_to_max_tokens is True, must set `max_tokens`. Received: "
                             "max_tokens=%s" % (max_tokens,))
        if num_oov_indices < 0:
            raise ValueError("`num_oov_indices` must be greater than or equal to 0. Received: "
                             "num_oov_indices=%s" % (num_oov_indices,))
        if num_oov_indices > 1:
            raise ValueError("vdev's %s takes num_oov_indices 0 or 1, not %d: Keras hashes an "
                             "out-of-vocabulary token among several (farmhash), vdev does not"
                             % (cls, num_oov_indices))
        if output_mode not in _MODES:
            if output_mode == "tf_idf":
                raise ValueError("vdev's %s has no output_mode 'tf_idf'" % cls)
            raise ValueError("Unknown value for `output_mode`. Expected one of %s. Received: "
                             "output_mode=%s" % (list(_MODES) + ["tf_idf"], output_mode))
        if invert and output_mode != "int":
            raise ValueError("`output_mode` must be `'int'` when `invert` is true. Received: "
                             "output_mode=%s" % (output_mode,))
        if sparse:
            raise ValueError("vdev's %s takes sparse=False only: vdev has no sparse tensors"
                             % cls)
        super().__init__(name, trainable)
        self.max_tokens, self.num_oov_indices = max_tokens, int(num_oov_indices)
        self.mask_token, self.oov_token = mask_token, oov_token
        self.invert, self.output_mode = bool(invert), output_mode
        self.pad_to_max_tokens, self.sparse = bool(pad_to_max_tokens), False
        self._device = current_device()
        self._tokens = []  # the vocabulary past the special tokens
        self._given = vocabulary is not None
        if vocabulary is not None:
            self.set_vocabulary(vocabulary)

    # ---- the vocabulary ----
    def _oov_start(self):
        return 1 if self.mask_token is not None and self.output_mode == "int" else 0

    def _token_start(self):
        return self._oov_start() + self.num_oov_indices

    def vocabulary_size(self):
        """Keras's: the special tokens and the vocabulary."""
        return self._token_start() + len(self._tokens)

    def get_vocabulary(self, include_special_tokens=True):
        """Keras's: every id's token in order (the mask token, the OOV
        token, the vocabulary)."""
        vocab = ([self.oov_token] * self._token_start()) + list(self._tokens)
        if self.mask_token is not None and self.output_mode == "int":
            vocab[0] = self.mask_token
        return vocab if include_special_tokens else vocab[self._token_start():]

    def set_vocabulary(self, vocabulary, idf_weights=None):
        """Keras's: the vocabulary given (its special tokens first, or
        none of them), each token once."""
        if idf_weights is not None:
            raise ValueError("vdev's %s has no idf weights" % type(self).__name__)
        tokens = [self._key(t) for t in _flat(_nested(vocabulary))]
        specials = [self.mask_token] if self.mask_token is not None else []
        specials += [self.oov_token] * self.num_oov_indices
        if specials and tokens[:len(specials)] == specials:
            tokens = tokens[len(specials):]
        repeated = [t for t, n in collections.Counter(tokens).items() if n > 1]
        if repeated:
            raise ValueError("The passed vocabulary has at least one repeated term. Please "
                             "uniquify your dataset. The repeated terms are %s" % (repeated,))
        for special, what in ((self.mask_token, "mask"), (self.oov_token, "OOV")):
            if special is not None and special in tokens and (what == "mask" or
                                                              self.num_oov_indices):
                raise ValueError("Found reserved %s token at unexpected location in "
                                 "`vocabulary`. Note that passed `vocabulary` does not need to "
                                 "include the OOV and mask tokens. Either remove all mask and "
                                 "OOV tokens, or include them only at the start of the "
                                 "vocabulary in precisely this order: %s. Received: "
                                 "vocabulary=%s" % (what, specials, vocabulary))
        if self.max_tokens is not None and self._token_start() + len(tokens) > self.max_tokens:
            raise ValueError("Attempted to set a vocabulary larger than the maximum vocab size. "
                             "Passed vocab size is %d, max vocab size is %d."
                             % (self._token_start() + len(tokens), self.max_tokens))
        self._tokens = tokens
        self._index = {t: i + self._token_start() for i, t in enumerate(tokens)}

    def adapt(self, data, batch_size=None, steps=None):
        """Keras's: the tokens of data counted; the vocabulary the most
        frequent (ties: the tokens in reverse order), at most max_tokens
        with the special tokens."""
        counts = collections.Counter(self._key(t) for t in self._adapt_tokens(data))
        for special in (self.mask_token, self.oov_token):
            counts.pop(special, None)
        tokens = list(counts)
        order = np.lexsort((np.array(tokens, dtype=object).astype(self._np_key),
                            np.array([counts[t] for t in tokens])))[::-1]
        if self.max_tokens:
            order = order[:self.max_tokens - self._token_start()]
        self._tokens = [tokens[i] for i in order]
        self._index = {t: i + self._token_start() for i, t in enumerate(self._tokens)}

    def _adapt_tokens(self, data):
        return _flat(_nested(data))

    # ---- lookups ----
    def _lookup(self, token):
        token = self._key(token)
        if self.mask_token is not None and token == self.mask_token:
            return 0
        i = self._index.get(token) if self._tokens else None
        if i is not None:
            return i
        if not self.num_oov_indices:
            raise ValueError("vdev's %s: %r is out of the vocabulary, and num_oov_indices is 0"
                             % (type(self).__name__, token))
        return self._oov_start()

    def _ids(self, rows):
        """rows (nested lists of tokens) as nested lists of ids."""
        if isinstance(rows, list):
            return [self._ids(r) for r in rows]
        return self._lookup(rows)

    def _tensor(self, values, dtype):
        if self._device is not None and current_device() is None:
            with device(self._device):
                return _ops.convert_to_tensor(values, dtype)
        return _ops.convert_to_tensor(values, dtype)

    def _encode(self, ids):
        """The ids (nested lists) in the layer's output mode, as Keras's
        encode_categorical_inputs: a scalar is one sample; one_hot gives a
        last axis of 1 to inputs without one; then a count per row (1 at
        most but for "count") of rank 2 at most."""
        if self.output_mode == "int":
            return self._tensor(np.asarray(ids, np.int32), int32)
        depth = self.max_tokens if self.pad_to_max_tokens else self.vocabulary_size()
        a = np.asarray(ids, np.int64)
        shape = a.shape
        if a.ndim == 0:
            a = a[None]
        if self.output_mode == "one_hot" and a.shape[-1] != 1:
            a = a[..., None]
        if a.ndim > 2:
            raise ValueError("When output_mode is not `'int'`, maximum supported output rank "
                             "is 2. Received output_mode %s and input shape %s, which would "
                             "result in output rank %d." % (self.output_mode, shape, a.ndim))
        rows = a if a.ndim == 2 else a[None]
        out = np.zeros((rows.shape[0], depth), np.float32)
        for r, row in enumerate(rows):
            np.add.at(out[r], row, 1.0)
        if self.output_mode != "count":
            out = np.minimum(out, 1.0)
        return self._tensor(out if a.ndim == 2 else out[0], float32)

    def _inverse(self, ids):
        vocab = self.get_vocabulary()
        if isinstance(ids, list):
            return [self._inverse(i) for i in ids]
        i = int(ids)
        return vocab[i] if 0 <= i < len(vocab) else self.oov_token

    def __call__(self, inputs, training=None):
        data = inputs.numpy() if hasattr(inputs, "numpy") else inputs
        data = _nested(data)
        if self.invert:
            return np.asarray(self._inverse(data if isinstance(data, list) else data),
                              dtype=self._np_key)
        return self._encode(self._ids(data))

    def compute_output_shape(self, input_shape):
        shape = tuple(input_shape)
        if self.output_mode == "int":
            return shape
        depth = self.max_tokens if self.pad_to_max_tokens else self.vocabulary_size()
        return shape[:-1] + (depth,) if len(shape) > 1 else (depth,)

    def get_config(self):
        return {"name": self.name, "trainable": self.trainable, "invert": self.invert,
                "max_tokens": self.max_tokens, "num_oov_indices": self.num_oov_indices,
                "oov_token": self.oov_token, "mask_token": self.mask_token,
                "output_mode": self.output_mode, "sparse": False,
                "pad_to_max_tokens": self.pad_to_max_tokens,
                "vocabulary": self.get_vocabulary() if self._given else None}


class StringLookup(_IndexLookup):
    """Keras's StringLookup: strings to ids (see the module)."""

    _np_key = str

    def __init__(self, max_tokens=None, num_oov_indices=1, mask_token=None, oov_token="[UNK]",
                 vocabulary=None, idf_weights=None, encoding="utf-8", invert=False,
                 output_mode="int", sparse=False, pad_to_max_tokens=False, name=None,
                 trainable=True):
        if idf_weights is not None:
            raise ValueError("vdev's StringLookup has no idf weights ('tf_idf')")
        self.encoding = encoding
        super().__init__(max_tokens, num_oov_indices, mask_token, oov_token, vocabulary, invert,
                         output_mode, sparse, pad_to_max_tokens, name, trainable)

    def _key(self, token):
        if isinstance(token, bytes):
            return token.decode(self.encoding)
        if not isinstance(token, str):
            raise ValueError("vdev's StringLookup looks up strings, not %r" % (token,))
        return token

    def get_config(self):
        return dict(super().get_config(), encoding=self.encoding)


class IntegerLookup(_IndexLookup):
    """Keras's IntegerLookup: integers to ids (its OOV token -1, no mask
    token by default)."""

    _np_key = np.int64

    def __init__(self, max_tokens=None, num_oov_indices=1, mask_token=None, oov_token=-1,
                 vocabulary=None, vocabulary_dtype="int64", idf_weights=None, invert=False,
                 output_mode="int", sparse=False, pad_to_max_tokens=False, name=None,
                 trainable=True):
        if idf_weights is not None:
            raise ValueError("vdev's IntegerLookup has no idf weights ('tf_idf')")
        if max_tokens is not None and max_tokens <= 1:
            raise ValueError("If `max_tokens` is set for `IntegerLookup`, it must be greater "
                             "than 1. Received: max_tokens=%s." % (max_tokens,))
        if num_oov_indices < 0:
            raise ValueError("The value of `num_oov_indices` argument for `IntegerLookup` must "
                             ">= 0. Received num_oov_indices=%s." % (num_oov_indices,))
        self.vocabulary_dtype = vocabulary_dtype
        super().__init__(max_tokens, num_oov_indices, mask_token, oov_token, vocabulary, invert,
                         output_mode, sparse, pad_to_max_tokens, name, trainable)

    def _key(self, token):
        if isinstance(token, (bool, np.bool_)) or not isinstance(token, (numbers.Integral,
                                                                       np.integer)):
            raise ValueError("vdev's IntegerLookup looks up integers, not %r" % (token,))
        return int(token)

    def get_config(self):
        return dict(super().get_config(), vocabulary_dtype=self.vocabulary_dtype)


def _check_choice(value, allowed, arg):
    """Keras's validate_string_arg (None and callables allowed)."""
    if value is None or callable(value) or value in allowed:
        return
    raise ValueError("The `%s` argument of layer TextVectorization received an invalid value "
                     "`%s`. Allowed values are: `None`, a `Callable`, or one of the following "
                     "values: %s." % (arg, value, allowed))


class TextVectorization(_base()):
    """Keras's TextVectorization: texts to token ids (see the module)."""

    def __init__(self, max_tokens=None, standardize="lower_and_strip_punctuation",
                 split="whitespace", ngrams=None, output_mode="int", output_sequence_length=None,
                 pad_to_max_tokens=False, vocabulary=None, idf_weights=None, sparse=False,
                 ragged=False, encoding="utf-8", name=None, trainable=True):
        _check_choice(standardize, ("lower_and_strip_punctuation", "lower", "strip_punctuation"),
                      "standardize")
        _check_choice(split, ("whitespace", "character"), "split")
        if output_mode == "binary":  # Keras's older names
            output_mode = "multi_hot"
        if output_mode == "tf-idf":
            output_mode = "tf_idf"
        if output_mode not in ("int", "count", "multi_hot", "tf_idf"):
            raise ValueError("The `output_mode` argument of layer TextVectorization received an "
                             "invalid value `%s`. Allowed values are: `None`, or one of the "
                             "following values: ('int', 'count', 'multi_hot', 'tf_idf')."
                             % (output_mode,))
        if not (ngrams is None or isinstance(ngrams, int) or isinstance(ngrams, tuple)
                and all(isinstance(n, int) for n in ngrams)):
            raise ValueError("`ngrams` must be None, an integer, or a tuple of integers. "
                             "Received: ngrams=%s" % (ngrams,))
        if output_mode == "int" and not (output_sequence_length is None
                                         or isinstance(output_sequence_length, int)):
            raise ValueError("`output_sequence_length` must be either None or an integer when "
                             "`output_mode` is 'int'. Received: output_sequence_length=%s"
                             % (output_sequence_length,))
        if output_mode != "int" and output_sequence_length is not None:
            raise ValueError("`output_sequence_length` must not be set if `output_mode` is not "
                             "'int'. Received output_sequence_length=%s."
                             % (output_sequence_length,))
        if ragged:
            raise ValueError("vdev's TextVectorization takes ragged=False only: vdev has no "
                             "ragged tensors (the ids are padded with 0)")
        if max_tokens is not None and max_tokens < 1:
            raise ValueError("`max_tokens` must be >= 1. Received: max_tokens=%s." % (max_tokens,))
        super().__init__(name, trainable)
        self._standardize, self._split = standardize, split
        self._ngrams_arg = ngrams
        self._ngrams = tuple(range(1, ngrams + 1)) if isinstance(ngrams, int) else ngrams
        self._output_mode, self._output_sequence_length = output_mode, output_sequence_length
        self._encoding = encoding
        self._lookup_layer = StringLookup(
            max_tokens=max_tokens, vocabulary=vocabulary, idf_weights=idf_weights,
            pad_to_max_tokens=pad_to_max_tokens, mask_token="", output_mode=output_mode,
            sparse=sparse, encoding=encoding)

    # ---- the texts' tokens ----
    def _texts(self, data):
        """The input as a list of strings (a [batch] or [batch, 1] array, or
        one string), and whether it was one string."""
        if isinstance(data, (str, bytes)):
            return [data], True
        a = np.asarray(data, dtype=object)
        if a.ndim > 1:
            if a.shape[-1] != 1:
                raise ValueError("When using `TextVectorization` to tokenize strings, the "
                                 "innermost dimension of the input array must be 1, got shape "
                                 "%s" % (a.shape,))
            a = a[..., 0]
        return list(a.reshape(-1)), False

    def _tokens(self, text):
        """One text standardized, split and made into ngrams, as Keras's
        _preprocess (tf.strings.lower: ASCII letters)."""
        if isinstance(text, bytes):
            text = text.decode(self._encoding)
        s = self._standardize
        if s in ("lower", "lower_and_strip_punctuation"):
            text = "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text)
        if s in ("strip_punctuation", "lower_and_strip_punctuation"):
            text = _PUNCTUATION.sub("", text)
        if callable(s):
            text = s(text)
        if self._split is None:
            tokens = [text]
        elif self._split == "whitespace":
            tokens = [t for t in _WHITESPACE.split(text) if t]
        elif self._split == "character":
            tokens = list(text)
        else:
            tokens = list(self._split(text))
        if self._ngrams is not None:
            grams = []
            for n in self._ngrams:
                grams += [" ".join(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]
            tokens = grams
        return tokens

    def adapt(self, data, batch_size=None, steps=None):
        """Keras's: the vocabulary of the texts' tokens."""
        texts, _ = self._texts(data)
        self._lookup_layer.adapt([self._tokens(t) for t in texts])

    def get_vocabulary(self, include_special_tokens=True):
        return self._lookup_layer.get_vocabulary(include_special_tokens)

    def vocabulary_size(self):
        return self._lookup_layer.vocabulary_size()

    def set_vocabulary(self, vocabulary, idf_weights=None):
        self._lookup_layer.set_vocabulary(vocabulary, idf_weights)

    def compute_output_shape(self, input_shape):
        if self._output_mode == "int":
            return (tuple(input_shape)[0], self._output_sequence_length)
        return self._lookup_layer.compute_output_shape((tuple(input_shape)[0], None))

    def get_config(self):
        lookup = self._lookup_layer
        return {"name": self.name, "trainable": self.trainable,
                "max_tokens": lookup.max_tokens, "standardize": self._standardize,
                "split": self._split, "ngrams": self._ngrams_arg,
                "output_mode": self._output_mode,
                "output_sequence_length": self._output_sequence_length,
                "pad_to_max_tokens": lookup.pad_to_max_tokens, "sparse": False, "ragged": False,
                "vocabulary": lookup.get_vocabulary() if lookup._given else None,
                "idf_weights": None, "encoding": self._encoding}

    def __call__(self, inputs, training=None):
        data = inputs.numpy() if hasattr(inputs, "numpy") else inputs
        texts, single = self._texts(data)
        rows = [self._lookup_layer._ids(self._tokens(t)) for t in texts]
        lookup = self._lookup_layer
        if self._output_mode != "int":
            depth = lookup.max_tokens if lookup.pad_to_max_tokens else lookup.vocabulary_size()
            out = np.zeros((len(rows), depth), np.float32)
            for r, row in enumerate(rows):
                np.add.at(out[r], np.asarray(row, np.int64), 1.0)
            if self._output_mode == "multi_hot":
                out = np.minimum(out, 1.0)
            return lookup._tensor(out[0] if single else out, float32)
        length = self._output_sequence_length
        if length is None:
            length = max((len(r) for r in rows), default=0)
        ids = np.zeros((len(rows), length), np.int32)
        for r, row in enumerate(rows):
            row = row[:length]
            ids[r, :len(row)] = row
        return lookup._tensor(ids[0] if single else ids, int32)
