"""Kernels of ``dflab.ops.string_sequence_ops``: ``StringNGrams`` and ``UnicodeEncode`` on
rows given as flat values plus row splits, on the host (TF's CPU kernels, whose rules
they follow: n-gram padding and short-sequence handling, invalid code points)."""

from __future__ import annotations

import numpy as np

from dflab.framework import errors
from dflab.kernels.context import host
from dflab.kernels.registry import kernel
from dflab.kernels.string_kernels import _CODECS, _b


def _rows(splits, n_values, node):
    s = np.asarray(host(splits)).astype(np.int64)
    if s.size == 0 or s[0] != 0 or s[-1] != n_values or np.any(np.diff(s) < 0):
        raise errors.InvalidArgumentError(None, node, f"Invalid splits {s.tolist()} for "
                                                      f"{n_values} values")
    return s


def _valid_code_point(c: int) -> bool:
    return 0 <= c <= 0x10FFFF and not 0xD800 <= c <= 0xDFFF


@kernel("UnicodeEncode", host_only=True)
def _unicode_encode(node, ctx):
    codec = _CODECS[node.attr["output_encoding"]]
    mode = node.attr["errors"]
    replacement = int(node.attr["replacement_char"])
    if not _valid_code_point(replacement):
        replacement = 0xFFFD  # ICU substitutes U+FFFD for an invalid substitute too

    def encode_row(values) -> bytes:
        chars = []
        for c in values.tolist():
            if _valid_code_point(c):
                chars.append(chr(c))
            elif mode == "strict":
                raise errors.InvalidArgumentError(
                    None, node, f"Invalid code point {c} in input to UnicodeEncode")
            elif mode == "replace":
                chars.append(chr(replacement))
        return "".join(chars).encode(codec)

    def run(values, splits):
        v = np.asarray(host(values)).astype(np.int64)
        s = _rows(splits, v.size, node)
        out = np.empty(s.size - 1, dtype=object)
        for i in range(s.size - 1):
            out[i] = encode_row(v[s[i]:s[i + 1]])
        return out

    return run


class _NGrams:
    """TF's ``StringNGramsOp``: per row, the n-grams of each width in turn."""

    def __init__(self, attr):
        self.sep = _b(attr["separator"])
        self.widths = [int(w) for w in attr["ngram_widths"]]
        self.left, self.right = _b(attr["left_pad"]), _b(attr["right_pad"])
        self.pad_width = int(attr["pad_width"])
        self.preserve_short = bool(attr["preserve_short_sequences"])

    def pad_for(self, width: int) -> int:
        # Never wider than width - 1: a row is padded so every n-gram holds a token.
        return min(width - 1 if self.pad_width < 0 else self.pad_width, width - 1)

    def count(self, length: int, width: int) -> int:
        return max(0, length + 2 * self.pad_for(width) - width + 1)

    def make(self, data, num: int, width: int) -> list:
        out = []
        pad = self.pad_for(width)
        for k in range(num):
            left = max(0, pad - k)
            right = max(0, pad - (num - (k + 1)))
            tokens = width - (left + right)
            start = 0 if left > 0 else k - pad
            parts = [self.left] * left + list(data[start:start + max(tokens, 0)]) + \
                [self.right] * right
            out.append(self.sep.join(parts))
        return out

    def row(self, data) -> list:
        out = []
        for width in self.widths:
            out += self.make(data, self.count(len(data), width), width)
        if self.preserve_short and not out and len(data):
            out = self.make(data, 1, len(data) + 2 * self.pad_width)
        return out


@kernel("StringNGrams", host_only=True)
def _string_ngrams(node, ctx):
    grams = _NGrams(node.attr)

    def run(data, splits):
        d = [_b(v) for v in np.asarray(host(data), dtype=object).reshape(-1)]
        s = _rows(splits, len(d), node)
        if not d:  # TF's kernel makes nothing, padding included, when there is no data
            return np.empty(0, dtype=object), np.zeros(s.size, dtype=s.dtype)
        values, out_splits = [], [0]
        for i in range(s.size - 1):
            values += grams.row(d[s[i]:s[i + 1]])
            out_splits.append(len(values))
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out, np.asarray(out_splits, dtype=s.dtype)

    return run
