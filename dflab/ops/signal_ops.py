"""``tf.signal`` beyond the FFTs: ``fftshift``/``ifftshift``, the ``hann``/``hamming``
windows, ``frame`` and ``overlap_and_add``, the DCTs (types I-IV, ``dct``/``idct``, also in
``tf.spectral``), the short-time Fourier transform (``stft``, ``inverse_stft``,
``inverse_stft_window_fn``), the Vorbis and Kaiser windows, mel weight matrices and MFCCs.

TF builds all of these in Python from other ops, and so does this module, with TF's
arithmetic (so results and gradients agree); ``frame`` gathers the frames' samples by index
and ``overlap_and_add`` sums them back by segment, which is the same linear map as TF's
reshapes. Nothing here registers an op.
"""

from __future__ import annotations

import math

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant, constant_value
from dflab.ops import array_ops, nn_ops
from dflab.ops import math_ops as _m
from dflab.ops.fft_ops import irfft, rfft
from dflab.ops.sort_ops import _static_axis, roll
from dflab.ops.special_math_ops import bessel_i0e
from dflab.ops.special_math_ops import complex as _complex
from dflab.ops.special_math_ops import real as _real


# --- shifts -------------------------------------------------------------------------------------
def _shift(x, axes, sign, name, default_name):
    with _ops.name_scope(name, default_name):
        x = _ops.convert_to_tensor(x)
        if axes is None:
            axes = list(range(x.shape.ndims))
            shift = _m.floordiv(array_ops.shape(x), 2)
        elif isinstance(axes, int):
            shift = _m.floordiv(array_ops.shape(x)[axes], 2)
        else:
            rank = x.shape.ndims
            axes = [int(a) % rank for a in axes]
            shift = _m.floordiv(array_ops.gather(array_ops.shape(x), axes), 2)
        return roll(x, _m.negative(shift) if sign < 0 else shift, axes)


def fftshift(x, axes=None, name=None):
    """Move the zero-frequency entry to the centre of ``axes`` (default: all)."""
    return _shift(x, axes, 1, name, "fftshift")


def ifftshift(x, axes=None, name=None):
    """The inverse of ``fftshift``."""
    return _shift(x, axes, -1, name, "ifftshift")


# --- windows ------------------------------------------------------------------------------------
def _raised_cosine_window(name, default_name, window_length, periodic, dtype, a, b):
    dtype = _dt.as_dtype(dtype)
    if not dtype.is_floating:
        raise ValueError(f"dtype must be a floating point type. Found {dtype}")
    with _ops.name_scope(name, default_name, [window_length, periodic]):
        window_length = _ops.convert_to_tensor(window_length, dtype=_dt.int32,
                                               name="window_length")
        window_length.shape.assert_has_rank(0)
        static = constant_value(window_length)
        if static is not None and int(static) == 1:
            return array_ops.ones([1], dtype=dtype)
        periodic = _m.cast(_ops.convert_to_tensor(periodic, dtype=_dt.bool, name="periodic"),
                           _dt.int32)
        periodic.shape.assert_has_rank(0)
        even = 1 - _m.floormod(window_length, 2)
        n = _m.cast(window_length + periodic * even - 1, dtype)
        count = _m.cast(_m.range(window_length), dtype)
        cos_arg = _m.truediv(_m.multiply(constant(2 * np.pi, dtype=dtype), count), n)
        window = _m.subtract(constant(a, dtype=dtype),
                             _m.multiply(constant(b, dtype=dtype), _m.cos(cos_arg)))
        if static is not None:
            return window
        # A length-1 window is [1] (its formula divides by zero).
        return array_ops.where_v2(_m.equal(window_length, 1),
                                  array_ops.ones_like(window), window)


def hann_window(window_length, periodic=True, dtype=_dt.float32, name=None):
    """A Hann window of ``window_length`` samples (``periodic``: for spectral analysis)."""
    return _raised_cosine_window(name, "hann_window", window_length, periodic, dtype, 0.5, 0.5)


def hamming_window(window_length, periodic=True, dtype=_dt.float32, name=None):
    """A Hamming window of ``window_length`` samples."""
    return _raised_cosine_window(name, "hamming_window", window_length, periodic, dtype,
                                 0.54, 0.46)


# --- frames -------------------------------------------------------------------------------------
def _static_int(t):
    value = constant_value(t)
    return None if value is None else int(value)


def frame(signal, frame_length, frame_step, pad_end=False, pad_value=0, axis=-1,
          name=None):
    """Frames of ``frame_length`` samples every ``frame_step`` along ``axis``: the axis
    becomes ``[frames, frame_length]``; ``pad_end`` pads the end with ``pad_value`` so
    that every sample is in a frame."""
    with _ops.name_scope(name, "frame", [signal, frame_length, frame_step, pad_value]):
        signal = _ops.convert_to_tensor(signal, name="signal")
        frame_length = _ops.convert_to_tensor(frame_length, name="frame_length")
        frame_step = _ops.convert_to_tensor(frame_step, name="frame_step")
        signal.shape.with_rank_at_least(1)
        frame_length.shape.assert_has_rank(0)
        frame_step.shape.assert_has_rank(0)
        rank = signal.shape.ndims
        if rank is None:
            raise ValueError("frame: the rank of signal must be known")
        axis = _static_axis(axis) % rank
        it = frame_length.dtype.base_dtype
        fl, fs = _static_int(frame_length), _static_int(frame_step)
        n = signal.shape.as_list()[axis]
        length = n if n is not None else _m.cast(array_ops.shape(signal)[axis], it)
        if pad_end:
            if fs is not None and n is not None:
                num_frames = -(-n // fs)
            else:
                num_frames = _m.negative(_m.floordiv(_m.negative(length), frame_step))
            if fl is not None and fs is not None and n is not None:
                pad = max(0, fl + fs * (num_frames - 1) - n)
            else:
                pad = _m.maximum(0, _m.subtract(
                    frame_length + frame_step * (num_frames - 1), length))
            if isinstance(pad, int):
                paddings = [[0, 0]] * axis + [[0, pad]] + [[0, 0]] * (rank - axis - 1)
            else:
                row = array_ops.reshape(array_ops.stack([0, _m.cast(pad, _dt.int32)]), [1, 2])
                paddings = array_ops.concat(
                    [array_ops.zeros([axis, 2], _dt.int32), row,
                     array_ops.zeros([rank - axis - 1, 2], _dt.int32)], 0)
            pad_value = _ops.convert_to_tensor(pad_value, signal.dtype.base_dtype)
            signal = array_ops.pad(signal, paddings, constant_values=pad_value)
        elif fl is not None and fs is not None and n is not None:
            num_frames = max(0, 1 + (n - fl) // fs)
        else:
            num_frames = _m.maximum(constant(0, dtype=it),
                                    1 + _m.floordiv(_m.subtract(length, frame_length),
                                                    frame_step))
        if isinstance(num_frames, int) and fl is not None and fs is not None:
            index = (np.arange(num_frames)[:, None] * fs + np.arange(fl)[None, :])
            index = constant(index.astype(np.int32).reshape(num_frames, fl))
        else:
            index = _m.add(array_ops.expand_dims(_m.range(num_frames, dtype=it) * frame_step,
                                                 1),
                           array_ops.expand_dims(_m.range(frame_length, dtype=it), 0))
        return array_ops.gather(signal, index, axis=axis)


def overlap_and_add(signal, frame_step, name=None):
    """The sum of ``signal``'s frames (its last two dimensions, ``[frames,
    frame_length]``) laid ``frame_step`` apart: ``[..., frame_length + frame_step *
    (frames - 1)]``."""
    with _ops.name_scope(name, "overlap_and_add", [signal, frame_step]):
        signal = _ops.convert_to_tensor(signal, name="signal")
        signal.shape.with_rank_at_least(2)
        frame_step = _ops.convert_to_tensor(frame_step, name="frame_step")
        frame_step.shape.assert_has_rank(0)
        if not frame_step.dtype.base_dtype.is_integer:
            raise ValueError(f"frame_step must be an integer. Got {frame_step.dtype}")
        rank = signal.shape.ndims
        frames, fl = signal.shape.as_list()[-2:]
        fs = _static_int(frame_step)
        if None not in (frames, fl, fs):
            positions = constant((np.arange(frames)[:, None] * fs +
                                  np.arange(fl)[None, :]).astype(np.int32))
            out_len = fl + fs * (frames - 1)
        else:
            shape = array_ops.shape(signal)
            frames, fl = shape[-2], shape[-1]
            step = _m.cast(frame_step, _dt.int32)
            positions = _m.add(array_ops.expand_dims(_m.range(frames) * step, 1),
                               array_ops.expand_dims(_m.range(fl), 0))
            out_len = fl + step * (frames - 1)
        perm = [rank - 2, rank - 1] + list(range(rank - 2))
        summed = _m.unsorted_segment_sum(array_ops.transpose(signal, perm), positions,
                                         out_len)
        return array_ops.transpose(summed, list(range(1, rank - 1)) + [0])


# --- DCTs ---------------------------------------------------------------------------------------
def _validate_dct_arguments(x, dct_type, n, axis, norm):
    if axis != -1:
        raise NotImplementedError(f"axis must be -1. Got: {axis}")
    if n is not None and n < 1:
        raise ValueError("n should be a positive integer or None")
    if dct_type not in (1, 2, 3, 4):
        raise ValueError("Types I, II, III and IV (I)DCT are supported.")
    if dct_type == 1:
        if norm == "ortho":
            raise ValueError("Normalization is not supported for the Type-I DCT.")
        last = x.shape.as_list()[-1] if x.shape.ndims else None
        if last is not None and last < 2:
            raise ValueError("Type-I DCT requires the dimension to be greater than one.")
    if norm not in (None, "ortho"):
        raise ValueError(f"Unknown normalization. Expected None or 'ortho', got: {norm}")


def _last_dim(x):
    d = x.shape.as_list()[-1] if x.shape.ndims else None
    return d if d is not None else array_ops.shape(x)[-1]


def _first_and_rest(first, rest, length):
    """``[first, rest, rest, ...]`` of ``length`` (TF's pad of a one-entry vector)."""
    return array_ops.pad(array_ops.expand_dims(first, 0), [[0, length - 1]],
                         constant_values=rest)


def _dct(x, dct_type, n, norm):
    x = _ops.convert_to_tensor(x)
    dt = x.dtype.base_dtype
    zero = constant(0.0, dtype=dt)
    if n is not None:
        seq_len = x.shape.as_list()[-1]
        if seq_len is not None and n <= seq_len:
            x = x[..., 0:n]
        else:
            x = array_ops.pad(x, [[0, 0]] * (x.shape.ndims - 1) + [[0, n - seq_len]])
    dim = _last_dim(x)
    dim_f = _m.cast(dim, dt)
    if dct_type == 1:
        return _real(rfft(array_ops.concat([x, x[..., -2:0:-1]], axis=-1)))
    if dct_type == 2:
        scale = 2.0 * _m.exp(_complex(zero, -_m.range(dim_f) * math.pi * 0.5 / dim_f))
        out = _real(rfft(x, fft_length=[2 * dim])[..., :dim] * scale)
        if norm == "ortho":
            n1 = 0.5 * _m.rsqrt(dim_f)
            out *= _first_and_rest(n1, n1 * math.sqrt(2.0), dim)
        return out
    if dct_type == 3:
        if norm == "ortho":
            n1 = _m.sqrt(dim_f)
            x *= _first_and_rest(n1, n1 * math.sqrt(0.5), dim)
        else:
            x *= dim_f
        scale = 2.0 * _m.exp(_complex(zero, _m.range(dim_f) * math.pi * 0.5 / dim_f))
        return _real(irfft(scale * _complex(x, zero), fft_length=[2 * dim]))[..., :dim]
    out = _dct(x, 2, 2 * dim, None)[..., 1::2]  # type IV from a zero-padded type II
    if norm == "ortho":
        out *= math.sqrt(0.5) * _m.rsqrt(dim_f)
    return out


def dct(input, type=2, n=None, axis=-1, norm=None, name=None):  # noqa: A002 - TF's names
    """The discrete cosine transform (types I-IV) of ``input``'s last axis, padded or cut
    to ``n``; ``norm="ortho"`` makes it orthonormal."""
    x = _ops.convert_to_tensor(input)
    _validate_dct_arguments(x, type, n, axis, norm)
    with _ops.name_scope(name, "dct", [x]):
        return _dct(x, type, n, norm)


def idct(input, type=2, n=None, axis=-1, norm=None, name=None):  # noqa: A002 - TF's names
    """The inverse DCT: type III for type II and the reverse; I and IV are their own (up to
    a factor ``2 * n`` without ``norm="ortho"``)."""
    x = _ops.convert_to_tensor(input)
    _validate_dct_arguments(x, type, n, axis, norm)
    with _ops.name_scope(name, "dct", [x]):
        return _dct(x, {1: 1, 2: 3, 3: 2, 4: 4}[type], n, norm)


# --- STFT ---------------------------------------------------------------------------------------
def _enclosing_power_of_two(value):
    static = constant_value(value)
    if static is not None:
        return constant(int(2 ** np.ceil(np.log(static) / np.log(2.0))),
                        dtype=value.dtype.base_dtype)
    return _m.cast(_m.pow(2.0, _m.ceil(_m.log(_m.cast(value, _dt.float32)) / math.log(2.0))),
                   value.dtype.base_dtype)


def _frame_scalars(frame_length, frame_step):
    """``frame_length`` and ``frame_step`` as tensors, checked to be scalars."""
    frame_length = _ops.convert_to_tensor(frame_length, name="frame_length")
    frame_length.shape.assert_has_rank(0)
    frame_step = _ops.convert_to_tensor(frame_step, name="frame_step")
    frame_step.shape.assert_has_rank(0)
    return frame_length, frame_step


def stft(signals, frame_length, frame_step, fft_length=None, window_fn=hann_window,
         pad_end=False, name=None):
    """The short-time Fourier transform: ``rfft`` of each windowed frame,
    ``[..., frames, fft_length // 2 + 1]``."""
    with _ops.name_scope(name, "stft", [signals, frame_length, frame_step]):
        signals = _ops.convert_to_tensor(signals, name="signals")
        signals.shape.with_rank_at_least(1)
        frame_length, frame_step = _frame_scalars(frame_length, frame_step)
        if fft_length is None:
            fft_length = _enclosing_power_of_two(frame_length)
        else:
            fft_length = _ops.convert_to_tensor(fft_length, name="fft_length")
        framed = frame(signals, frame_length, frame_step, pad_end=pad_end)
        if window_fn is not None:
            framed *= window_fn(frame_length, dtype=framed.dtype.base_dtype)
        return rfft(framed, array_ops.reshape(fft_length, [1]))


def inverse_stft_window_fn(frame_step, forward_window_fn=hann_window, name=None):
    """A window for ``inverse_stft`` that undoes ``forward_window_fn``'s weighting over
    frames ``frame_step`` apart."""

    def inverse_window(frame_length, dtype):
        with _ops.name_scope(name, "inverse_stft_window_fn", [forward_window_fn]):
            step = _ops.convert_to_tensor(frame_step, name="frame_step")
            step.shape.assert_has_rank(0)
            frame_length_t = _ops.convert_to_tensor(frame_length, name="frame_length")
            frame_length_t.shape.assert_has_rank(0)
            forward = forward_window_fn(frame_length_t, dtype=dtype)
            denom = _m.square(forward)
            overlaps = _m.negative(_m.floordiv(_m.negative(frame_length_t), step))
            denom = array_ops.pad(denom, array_ops.reshape(
                array_ops.stack([0, overlaps * step - frame_length_t]), [1, 2]))
            denom = array_ops.reshape(denom, array_ops.stack([overlaps, step]))
            denom = _m.reduce_sum(denom, 0, keepdims=True)
            denom = array_ops.tile(denom, array_ops.stack([overlaps, 1]))
            denom = array_ops.reshape(denom, array_ops.expand_dims(overlaps * step, 0))
            denom = denom[:frame_length_t]
            return array_ops.where_v2(_m.equal(denom, 0.0), array_ops.zeros_like(forward),
                                      _m.truediv(forward, denom))

    return inverse_window


def inverse_stft(stfts, frame_length, frame_step, fft_length=None, window_fn=hann_window,
                 name=None):
    """Signals from their ``stft``: ``irfft`` of each frame, windowed by ``window_fn``
    (``inverse_stft_window_fn`` for a perfect reconstruction), overlapped and added."""
    with _ops.name_scope(name, "inverse_stft", [stfts]):
        stfts = _ops.convert_to_tensor(stfts, name="stfts")
        stfts.shape.with_rank_at_least(2)
        frame_length, frame_step = _frame_scalars(frame_length, frame_step)
        if fft_length is None:
            fft_length = _enclosing_power_of_two(frame_length)
        else:
            fft_length = _ops.convert_to_tensor(fft_length, name="fft_length")
            fft_length.shape.assert_has_rank(0)
        frames = irfft(stfts, array_ops.reshape(fft_length, [1]))
        fl = _static_int(frame_length)
        have = frames.shape.as_list()[-1] if frames.shape.ndims is not None else None
        if fl is None or have is None:
            frames = frames[..., :frame_length]
            pad = _m.maximum(0, frame_length - array_ops.shape(frames)[-1])
            outer = array_ops.zeros(array_ops.stack([array_ops.rank(frames) - 1, 2]),
                                    dtype=frame_length.dtype.base_dtype)
            frames = array_ops.pad(frames, array_ops.concat(
                [outer, array_ops.reshape(array_ops.stack([0, pad]), [1, 2])], 0))
        elif have > fl:
            frames = frames[..., :fl]
        elif have < fl:
            frames = array_ops.pad(frames, [[0, 0]] * (frames.shape.ndims - 1) +
                                   [[0, fl - have]])
        if window_fn is not None:
            real_dtype = {_dt.complex64: _dt.float32,
                          _dt.complex128: _dt.float64}[stfts.dtype.base_dtype]
            frames *= window_fn(frame_length, dtype=real_dtype)
        return overlap_and_add(frames, frame_step)


# --- more windows, mel spectra, MFCCs ------------------------------------------------------------
def _check_window_params(window_length, dtype):
    dtype = _dt.as_dtype(dtype)
    if not dtype.is_floating:
        raise ValueError(f"dtype must be a floating point type. Found {dtype}")
    window_length = _ops.convert_to_tensor(window_length, dtype=_dt.int32)
    window_length.shape.assert_has_rank(0)
    return window_length, dtype


def vorbis_window(window_length, dtype=_dt.float32, name=None):
    """A Vorbis power-complementary window of ``window_length`` samples."""
    with _ops.name_scope(name, "vorbis_window"):
        window_length, dtype = _check_window_params(window_length, dtype)
        arg = _m.cast(_m.range(window_length), dtype)
        inner = _m.sin(np.pi / _m.cast(window_length, dtype) * (arg + 0.5))
        return _m.sin(np.pi / 2.0 * _m.pow(inner, constant(2.0, dtype=dtype)))


def kaiser_window(window_length, beta=12.0, dtype=_dt.float32, name=None):
    """A Kaiser window of ``window_length`` samples and shape parameter ``beta``."""
    with _ops.name_scope(name, "kaiser_window"):
        window_length, dtype = _check_window_params(window_length, dtype)
        static = constant_value(window_length)
        if static is not None and int(static) == 1:
            return array_ops.ones([1], dtype=dtype)
        half = (_m.cast(window_length, _dt.float32) - 1.0) / 2.0
        arg = _m.cast(_m.range(-half, half + 0.1, dtype=_dt.float32), dtype)
        beta = _m.cast(beta, dtype)
        one = constant(1.0, dtype=dtype)
        half = _m.cast(half, dtype)
        num = beta * _m.sqrt(nn_ops.relu(one - _m.square(arg / half)))
        return _m.exp(num - beta) * (bessel_i0e(num) / bessel_i0e(beta))


def kaiser_bessel_derived_window(window_length, beta=12.0, dtype=_dt.float32, name=None):
    """A Kaiser-Bessel-derived window (for MDCTs) of ``window_length`` samples."""
    with _ops.name_scope(name, "kaiser_bessel_derived_window"):
        window_length, dtype = _check_window_params(window_length, dtype)
        half = window_length // 2
        kaiser = kaiser_window(half + 1, beta, dtype=dtype)
        csum = _m.cumsum(kaiser)
        halfw = _m.sqrt(csum[:-1] / csum[-1])
        return array_ops.concat((halfw, halfw[::-1]), axis=0)


# --- MDCT -------------------------------------------------------------------------------------
def mdct(signals, frame_length, window_fn=vorbis_window, pad_end=False, norm=None, name=None):
    """The modified DCT of frames of ``frame_length`` (a multiple of 4) every half frame,
    windowed by ``window_fn`` (None: a flat 1/sqrt(2))."""
    with _ops.name_scope(name, "mdct", [signals, frame_length]):
        signals = _ops.convert_to_tensor(signals, name="signals")
        signals.shape.with_rank_at_least(1)
        frame_length = _ops.convert_to_tensor(frame_length, name="frame_length")
        frame_length.shape.assert_has_rank(0)
        static = _static_int(frame_length)
        if static is not None:
            if static % 4 != 0:
                raise ValueError("The frame length must be a multiple of 4.")
            frame_step = constant(static // 2, dtype=frame_length.dtype.base_dtype)
        else:
            frame_step = frame_length // 2
        framed = frame(signals, frame_length, frame_step, pad_end=pad_end)
        if window_fn is not None:
            framed *= window_fn(frame_length, dtype=framed.dtype.base_dtype)
        else:
            framed *= 1.0 / np.sqrt(2)
        quarters = array_ops.split(framed, 4, axis=-1)
        first = -array_ops.reverse(quarters[2], [-1]) - quarters[3]
        second = quarters[0] - array_ops.reverse(quarters[1], [-1])
        return dct(array_ops.concat((first, second), axis=-1), type=4, norm=norm)


def inverse_mdct(mdcts, window_fn=vorbis_window, norm=None, name=None):
    """Signals from their ``mdct`` (with a matching window: perfect reconstruction)."""
    with _ops.name_scope(name, "inverse_mdct", [mdcts]):
        mdcts = _ops.convert_to_tensor(mdcts, name="mdcts")
        mdcts.shape.with_rank_at_least(2)
        half_len = mdcts.shape.as_list()[-1]
        if norm is None:
            result = (0.5 / half_len) * dct(mdcts, type=4)
        elif norm == "ortho":
            result = dct(mdcts, type=4, norm="ortho")
        else:
            raise ValueError(f"Unknown normalization. Expected None or 'ortho', got: {norm}")
        halves = array_ops.split(result, 2, axis=-1)
        frames = array_ops.concat((halves[1], -array_ops.reverse(halves[1], [-1]),
                                   -array_ops.reverse(halves[0], [-1]), -halves[0]), axis=-1)
        if window_fn is not None:
            frames *= window_fn(2 * half_len, dtype=mdcts.dtype.base_dtype)
        else:
            frames *= 1.0 / np.sqrt(2)
        return overlap_and_add(frames, half_len)


_MEL_BREAK_FREQUENCY_HERTZ = 700.0
_MEL_HIGH_FREQUENCY_Q = 1127.0


def _hertz_to_mel(frequencies_hertz):
    return _MEL_HIGH_FREQUENCY_Q * _m.log(1.0 + (frequencies_hertz / _MEL_BREAK_FREQUENCY_HERTZ))


def _validate_mel_arguments(num_mel_bins, sample_rate, lower_edge_hertz, upper_edge_hertz,
                            dtype):
    if num_mel_bins <= 0:
        raise ValueError(f"num_mel_bins must be positive. Got: {num_mel_bins}")
    if lower_edge_hertz < 0.0:
        raise ValueError(f"lower_edge_hertz must be non-negative. Got: {lower_edge_hertz}")
    if lower_edge_hertz >= upper_edge_hertz:
        raise ValueError(f"lower_edge_hertz {lower_edge_hertz:.1f} >= upper_edge_hertz "
                         f"{upper_edge_hertz:.1f}")
    if not _ops.is_tensor_like(sample_rate) or isinstance(sample_rate, (int, float)):
        if sample_rate <= 0.0:
            raise ValueError(f"sample_rate must be positive. Got: {sample_rate}")
        if upper_edge_hertz > sample_rate / 2:
            raise ValueError(f"upper_edge_hertz must not be larger than the Nyquist frequency "
                             f"(sample_rate / 2). Got {upper_edge_hertz} for sample_rate: "
                             f"{sample_rate}")
    if not dtype.is_floating:
        raise ValueError(f"dtype must be a floating type. Got: {dtype}")


def linear_to_mel_weight_matrix(num_mel_bins=20, num_spectrogram_bins=129, sample_rate=8000,
                                lower_edge_hertz=125.0, upper_edge_hertz=3800.0,
                                dtype=_dt.float32, name=None):
    """``[num_spectrogram_bins, num_mel_bins]`` weights taking a linear-frequency spectrum to
    mel bands (triangular filters, the HTK mel scale; TF's construction)."""
    dtype = _dt.as_dtype(dtype)
    with _ops.name_scope(name, "linear_to_mel_weight_matrix"):
        if isinstance(sample_rate, _ops.Tensor):
            const = constant_value(sample_rate)
            if const is not None:
                sample_rate = float(const)
        _validate_mel_arguments(num_mel_bins, sample_rate, lower_edge_hertz, upper_edge_hertz,
                                dtype)
        sample_rate = _m.cast(sample_rate, dtype)
        lower = _ops.convert_to_tensor(lower_edge_hertz, dtype=dtype)
        upper = _ops.convert_to_tensor(upper_edge_hertz, dtype=dtype)
        zero = constant(0.0, dtype=dtype)
        linear = _m.linspace(zero, sample_rate / 2.0, num_spectrogram_bins)[1:]
        bins_mel = array_ops.expand_dims(_hertz_to_mel(linear), 1)
        edges = frame(_m.linspace(_hertz_to_mel(lower), _hertz_to_mel(upper),
                                  num_mel_bins + 2), frame_length=3, frame_step=1)
        lower_mel, center_mel, upper_mel = (array_ops.reshape(t, [1, num_mel_bins])
                                            for t in array_ops.split(edges, 3, axis=1))
        lower_slopes = (bins_mel - lower_mel) / (center_mel - lower_mel)
        upper_slopes = (upper_mel - bins_mel) / (upper_mel - center_mel)
        weights = _m.maximum(zero, _m.minimum(lower_slopes, upper_slopes))
        return array_ops.pad(weights, [[1, 0], [0, 0]])


def mfccs_from_log_mel_spectrograms(log_mel_spectrograms, name=None):
    """Mel-frequency cepstral coefficients: the orthonormally scaled DCT-II of log-mel
    spectrograms' last axis."""
    with _ops.name_scope(name, "mfccs_from_log_mel_spectrograms", [log_mel_spectrograms]):
        spectra = _ops.convert_to_tensor(log_mel_spectrograms)
        bins = spectra.shape.as_list()[-1] if spectra.shape.ndims else None
        if bins == 0:
            raise ValueError(f"num_mel_bins must be positive. Got: {spectra}")
        if bins is None:
            bins = array_ops.shape(spectra)[-1]
        dct2 = dct(spectra, type=2)
        return dct2 * _m.rsqrt(_m.cast(bins, dct2.dtype.base_dtype) * 2.0)


__all__: list[str] = []
# Only in tf.signal (and dct/idct in tf.spectral; dflab.namespaces makes them): fftshift,
# ifftshift, hann_window, hamming_window, vorbis_window, kaiser_window,
# kaiser_bessel_derived_window, frame, overlap_and_add, dct, idct, mdct, inverse_mdct, stft,
# inverse_stft, inverse_stft_window_fn, linear_to_mel_weight_matrix,
# mfccs_from_log_mel_spectrograms.
