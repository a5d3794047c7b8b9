"""``tf.nn``'s convolution and pooling front ends built from the conv and pool ops: the
rank-generic ``convolution``/``conv_transpose``/``pool``/``max_pool_v2``/``avg_pool_v2``, the
1-D forms (``conv1d_transpose``, ``max_pool1d``, ``avg_pool1d``: the 2-D op over a height-1
image, as TF computes them), atrous (dilated) and depthwise/separable convolutions.

Where TF routes a dilation through ``space_to_batch`` around an undilated op, these pass the
dilation to the op itself (``Conv2D``, ``Conv2DBackpropInput``, ``DepthwiseConv2dNative``
take it): the same numbers, fewer ops. Pure compositions: gradients come from the ops.
"""

from __future__ import annotations

import numbers

from dflab.framework import ops as _ops
from dflab.ops import array_ops, conv_nd_ops, conv_ops, math_ops, slicing_ops
from dflab.ops.nn_impl import conv1d


def _tensors(*values):
    return [v for v in values if _ops.is_tensor_like(v)]


def _as_list(value, n, name):
    """An int or a list of 1 or n ints -> a list of n ints (one per spatial dimension)."""
    if value is None:
        value = 1
    if isinstance(value, numbers.Integral):
        value = [value]
    value = [int(v) for v in value]
    if len(value) == 1:
        value = value * n
    if len(value) != n:
        raise ValueError(f"{name} should be of length 1 or {n} but was {len(value)}")
    return value


_FORMATS_BY_DIMS = {1: ("NWC", "NCW"), 2: ("NHWC", "NCHW"), 3: ("NDHWC", "NCDHW")}


def _channels_first(data_format, n) -> bool:
    if data_format is None:
        return False
    if isinstance(data_format, bytes):
        data_format = data_format.decode()
    if data_format not in _FORMATS_BY_DIMS[n] and not (
            n == 1 and data_format in ("NHWC", "NCHW")):
        raise ValueError(f"data_format must be one of {list(_FORMATS_BY_DIMS[n])} for "
                         f"{n} spatial dimensions, got {data_format!r}")
    return data_format.startswith("NC")


def _spatial_dims(rank, where) -> int:
    if rank is None:
        raise ValueError(f"{where}: the rank of the input must be known")
    n = rank - 2
    if n not in (1, 2, 3):
        raise ValueError(f"{where}: input must have 3, 4 or 5 dimensions (1 to 3 spatial ones),"
                         f" got rank {rank}")
    return n


# --- convolution ------------------------------------------------------------------------------
def convolution(input, filter=None, padding=None, strides=None,  # noqa: A002
                dilation_rate=None, name=None, data_format=None, filters=None,
                dilations=None):
    """N-D convolution (N = 1, 2 or 3, from the filter's rank): ``conv1d``, ``conv2d`` or
    ``conv3d`` with the given strides and dilation rate."""
    filter = filters if filter is None else filter  # noqa: A001
    dilation_rate = dilations if dilation_rate is None else dilation_rate
    with _ops.name_scope(name, "convolution", _tensors(input, filter)) as scope:
        input = _ops.convert_to_tensor(input, name="input")  # noqa: A001
        filter = _ops.convert_to_tensor(filter, name="filter")  # noqa: A001
        rank = filter.shape.ndims if filter.shape.ndims is not None else input.shape.ndims
        n = _spatial_dims(rank, "convolution")
        first = _channels_first(data_format, n)
        st = _as_list(strides, n, "strides")
        dil = _as_list(dilation_rate, n, "dilation_rate")
        if any(s > 1 for s in st) and any(d > 1 for d in dil):
            raise ValueError("strides > 1 not supported in conjunction with dilation_rate > 1")
        if n == 1:
            return conv1d(input, filter, st[0], padding, data_format="NCW" if first else "NWC",
                          dilations=dil[0], name=scope)
        fmt = _FORMATS_BY_DIMS[n][1 if first else 0]
        full_st = [1, 1, *st] if first else [1, *st, 1]
        full_dil = [1, 1, *dil] if first else [1, *dil, 1]
        if n == 2:
            return conv_ops.conv2d(input, filter, full_st, padding, data_format=fmt,
                                   dilations=full_dil, name=scope)
        return conv_nd_ops.conv3d(input, filter, full_st, padding, data_format=fmt,
                                  dilations=full_dil, name=scope)


def conv1d_transpose(input, filters, output_shape, strides, padding="SAME",  # noqa: A002
                     data_format="NWC", dilations=None, name=None):
    """The transpose of ``conv1d``: ``filters`` is [width, out_channels, in_channels]."""
    if data_format in (None, "NWC"):
        fmt, spatial = "NHWC", 1
    elif data_format == "NCW":
        fmt, spatial = "NCHW", 2
    else:
        raise ValueError(f"`data_format` must be 'NWC' or 'NCW'. Received: "
                         f"data_format={data_format}")
    with _ops.name_scope(name, "conv1d_transpose", _tensors(input, filters, output_shape)) \
            as scope:
        st = _one_spatial(strides, spatial, "strides")
        dil = _one_spatial(dilations, spatial, "dilations")
        full = [1, 1, 1, st] if fmt == "NCHW" else [1, 1, st, 1]
        full_dil = [1, 1, 1, dil] if fmt == "NCHW" else [1, 1, dil, 1]
        x = array_ops.expand_dims(input, spatial)
        f = array_ops.expand_dims(filters, 0)
        if _ops.is_tensor_like(output_shape):
            shape = array_ops.concat([output_shape[:spatial], [1], output_shape[spatial:]], 0)
        else:
            shape = list(output_shape)
            if len(shape) != 3:
                raise ValueError(f"output_shape must have 3 elements, got {len(shape)}")
            shape = shape[:spatial] + [1] + shape[spatial:]
        y = conv_ops.conv2d_backprop_input(shape, f, x, strides=full, padding=padding,
                                           data_format=fmt, dilations=full_dil)
        return array_ops.squeeze(y, [spatial], name=scope)


def _one_spatial(value, spatial, name):
    """A 1-D op's stride or dilation: an int, or a list of 1 or 3 (the full NWC/NCW list, whose
    spatial entry is at ``spatial``)."""
    if isinstance(value, (list, tuple)) and len(value) == 3:
        return int(value[spatial])
    return _as_list(value, 1, name)[0]


def conv_transpose(input, filters, output_shape, strides, padding="SAME",  # noqa: A002
                   data_format=None, dilations=None, name=None):
    """The transpose of ``convolution`` (1, 2 or 3 spatial dimensions, from
    ``output_shape``'s length)."""
    with _ops.name_scope(name, "conv_transpose", _tensors(input, filters, output_shape)) \
            as scope:
        if _ops.is_tensor_like(output_shape):
            n = _ops.convert_to_tensor(output_shape).shape.num_elements()
            n = None if n is None else n - 2
        else:
            n = len(output_shape) - 2
        if n not in (1, 2, 3):
            raise ValueError(f"output_shape must be of length 3, 4 or 5 but was {n}")
        first = _channels_first(data_format, n)
        fmt = _FORMATS_BY_DIMS[n][1 if first else 0]
        if n == 1:
            return conv1d_transpose(input, filters, output_shape, strides, padding, fmt,
                                    dilations, name=scope)
        st = _expand(strides, n, first, "strides")
        dil = _expand(dilations, n, first, "dilations")
        if n == 2:
            return conv_ops.conv2d_transpose(input, filters, output_shape, st, padding, fmt,
                                             name=scope, dilations=dil)
        return conv_nd_ops.conv3d_transpose(input, filters, output_shape, st, padding, fmt,
                                            name=scope, dilations=dil)


def _expand(value, n, first, name):
    """An int or a list of 1, n or n + 2 ints -> the full n + 2 list."""
    if isinstance(value, (list, tuple)) and len(value) == n + 2:
        return [int(v) for v in value]
    sp = _as_list(value, n, name)
    return [1, 1, *sp] if first else [1, *sp, 1]


def atrous_conv2d(value, filters, rate, padding, name=None):
    """2-D convolution with holes: ``conv2d`` with dilation ``rate``, stride 1."""
    return convolution(value, filters, padding, dilation_rate=[rate, rate], name=name)


def atrous_conv2d_transpose(value, filters, output_shape, rate, padding, name=None):
    """The transpose of ``atrous_conv2d``: ``filters`` is [h, w, out_channels, in_channels]."""
    if rate < 1:
        raise ValueError(f"rate {rate} cannot be less than one")
    with _ops.name_scope(name, "atrous_conv2d_transpose",
                         _tensors(value, filters, output_shape)) as scope:
        return conv_ops.conv2d_backprop_input(output_shape, filters, value, [1, 1, 1, 1],
                                              padding, dilations=[1, rate, rate, 1],
                                              name=scope)


def depthwise_conv2d(input, filter, strides, padding, rate=None, name=None,  # noqa: A002
                     data_format=None, dilations=None):
    """Depthwise 2-D convolution (``depthwise_conv2d_native``), optionally dilated by
    ``rate`` (then every stride must be 1)."""
    rate = dilations if rate is None else rate
    with _ops.name_scope(name, "depthwise", _tensors(input, filter)) as scope:
        fmt = data_format or "NHWC"
        dil = _depthwise_rate(rate, strides, fmt)
        return conv_nd_ops.depthwise_conv2d_native(input, filter, strides, padding, fmt,
                                                   dilations=dil, name=scope)


def _depthwise_rate(rate, strides, fmt):
    r = _as_list(rate, 2, "rate")
    if any(v < 1 for v in r):
        raise ValueError(f"rate must be positive, got {r}")
    full = conv_nd_ops.get_sequence(strides, "strides", fmt, 4)
    _, st, _ = conv_nd_ops.split_dims(full, fmt)
    if any(v > 1 for v in r) and any(s > 1 for s in st):
        raise ValueError("strides > 1 not supported in conjunction with rate > 1")
    return conv_nd_ops.join_dims(1, r, 1, fmt)


def separable_conv2d(input, depthwise_filter, pointwise_filter, strides,  # noqa: A002
                     padding, rate=None, name=None, data_format=None, dilations=None):
    """A depthwise convolution (``depthwise_filter`` [h, w, in, multiplier]) followed by a
    1x1 convolution mixing channels (``pointwise_filter`` [1, 1, in * multiplier, out])."""
    rate = dilations if rate is None else rate
    with _ops.name_scope(name, "separable_conv2d",
                         _tensors(input, depthwise_filter, pointwise_filter)) as scope:
        input = _ops.convert_to_tensor(input, name="tensor_in")  # noqa: A001
        depthwise_filter = _ops.convert_to_tensor(depthwise_filter, name="depthwise_filter")
        pointwise_filter = _ops.convert_to_tensor(pointwise_filter, name="pointwise_filter")
        dims = pointwise_filter.shape.with_rank(4).as_list()
        if dims[0] not in (None, 1) or dims[1] not in (None, 1):
            raise ValueError(f"pointwise_filter must be [1, 1, in, out], got {dims}")
        fmt = data_format or "NHWC"
        dil = _depthwise_rate(rate or 1, strides, fmt)
        depthwise = conv_nd_ops.depthwise_conv2d_native(input, depthwise_filter, strides,
                                                        padding, fmt, dilations=dil,
                                                        name="depthwise")
        return conv_ops.conv2d(depthwise, pointwise_filter, [1, 1, 1, 1], padding="VALID",
                               data_format=fmt, name=scope)


# --- pooling ----------------------------------------------------------------------------------
def _pool1d(op, op_name, input, ksize, strides, padding, data_format, name):  # noqa: A002
    if data_format in (None, "NWC", "NHWC"):
        fmt, axis = "NHWC", 1
    elif data_format in ("NCW", "NCHW"):
        fmt, axis = "NCHW", 2
    else:
        raise ValueError(f"data_format must be 'NWC' or 'NCW', got {data_format!r}")
    with _ops.name_scope(name, op_name, _tensors(input)) as scope:
        k = _pool1d_seq(ksize, "ksize", fmt)
        s = _pool1d_seq(strides, "strides", fmt)
        x = array_ops.expand_dims(input, axis)
        y = op(x, k, s, padding, data_format=fmt)
        return array_ops.squeeze(y, [axis], name=scope)


def _pool1d_seq(value, name, fmt):
    if isinstance(value, (list, tuple)) and len(value) == 3:
        value = value[1] if fmt == "NHWC" else value[2]
    v = _as_list(value, 1, name)[0]
    return [1, 1, v, 1] if fmt == "NHWC" else [1, 1, 1, v]


def max_pool1d(input, ksize, strides, padding, data_format="NWC", name=None):  # noqa: A002
    """Maximum over each window of a 3-D [batch, width, channels] tensor."""
    return _pool1d(conv_ops.max_pool, "MaxPool1d", input, ksize, strides, padding,
                   data_format, name)


def avg_pool1d(input, ksize, strides, padding, data_format="NWC", name=None):  # noqa: A002
    """Mean over each window of a 3-D [batch, width, channels] tensor."""
    return _pool1d(conv_ops.avg_pool, "AvgPool1D", input, ksize, strides, padding,
                   data_format, name)


def _pool_nd(kind, input, ksize, strides, padding, data_format, name):  # noqa: A002
    input = _ops.convert_to_tensor(input, name="input")  # noqa: A001
    n = _spatial_dims(input.shape.ndims, f"{kind}_pool")
    first = _channels_first(data_format, n)
    fmt = _FORMATS_BY_DIMS[n][1 if first else 0]
    if n == 1:
        op = max_pool1d if kind == "max" else avg_pool1d
        return op(input, ksize, strides, padding, fmt, name=name)
    if n == 2:
        op = conv_ops.max_pool if kind == "max" else conv_ops.avg_pool
        return op(input, ksize, strides, padding, fmt, name=name)
    op = conv_nd_ops.max_pool3d if kind == "max" else conv_nd_ops.avg_pool3d
    return op(input, ksize, strides, padding, fmt, name=name)


def max_pool_v2(input, ksize, strides, padding, data_format=None, name=None):  # noqa: A002
    """Max pooling over 1, 2 or 3 spatial dimensions (from ``input``'s rank)."""
    return _pool_nd("max", input, ksize, strides, padding, data_format, name)


def avg_pool_v2(input, ksize, strides, padding, data_format=None, name=None):  # noqa: A002
    """Average pooling over 1, 2 or 3 spatial dimensions (from ``input``'s rank)."""
    return _pool_nd("avg", input, ksize, strides, padding, data_format, name)


def pool(input, window_shape, pooling_type, padding, dilation_rate=None,  # noqa: A002
         strides=None, name=None, data_format=None, dilations=None):
    """N-D pooling (``pooling_type`` "MAX" or "AVG") over ``len(window_shape)`` spatial
    dimensions, optionally dilated (VALID padding and unit strides only, as TF)."""
    dilation_rate = dilations if dilation_rate is None else dilation_rate
    if isinstance(pooling_type, bytes):
        pooling_type = pooling_type.decode()
    if pooling_type not in ("MAX", "AVG"):
        raise ValueError(f"Invalid pooling type: {pooling_type!r}")
    with _ops.name_scope(name, f"{pooling_type.lower()}_pool", _tensors(input)) as scope:
        input = _ops.convert_to_tensor(input, name="input")  # noqa: A001
        window = [int(w) for w in window_shape]
        n = len(window)
        if n not in (1, 2, 3):
            raise ValueError(f"It is required that 1 <= num_spatial_dims <= 3, got {n}")
        rank = input.shape.ndims
        if rank is not None and rank != n + 2:
            raise ValueError(f"input must have rank {n + 2}, got shape {input.shape}")
        first = _channels_first(data_format, n)
        st = _as_list(strides, n, "strides")
        dil = _as_list(dilation_rate, n, "dilation_rate")
        padding = conv_ops._check_padding(padding)
        if any(s > 1 for s in st) and any(d > 1 for d in dil):
            raise ValueError("strides > 1 not supported in conjunction with dilation_rate > 1")
        if any(d > 1 for d in dil):
            if padding == "SAME":
                raise ValueError("pooling with 'SAME' padding is not implemented for "
                                 f"`dilation_rate` > 1. Received: padding={padding} and "
                                 f"dilation_rate={dil}")
            return _dilated_pool(input, window, dil, pooling_type, first, scope)
        fmt = _FORMATS_BY_DIMS[n][1 if first else 0]
        kind = "max" if pooling_type == "MAX" else "avg"
        return _pool_nd(kind, input, window, st, padding, fmt, scope)


def _dilated_pool(x, window, dil, pooling_type, first, name):
    """VALID, stride-1 dilated pooling as a fold over the window's taps, each a slice."""
    shape = array_ops.shape(x)
    axes = list(range(2, 2 + len(window))) if first else list(range(1, 1 + len(window)))
    taps = [[]]
    for k in window:
        taps = [t + [i] for t in taps for i in range(k)]
    acc = None
    for tap in taps:
        begin = [0] * (len(window) + 2)
        size = [-1] * (len(window) + 2)
        for ax, i, k, d in zip(axes, tap, window, dil):
            begin[ax] = i * d
            size[ax] = shape[ax] - (k - 1) * d
        part = slicing_ops.slice(x, begin, array_ops.stack_ints(size))
        if acc is None:
            acc = part
        elif pooling_type == "MAX":
            acc = math_ops.maximum(acc, part)
        else:
            acc = math_ops.add(acc, part)
    if pooling_type == "AVG":
        count = 1
        for k in window:
            count *= k
        acc = math_ops.divide(acc, _ops.convert_to_tensor(count, dtype=acc.dtype.base_dtype))
    return array_ops.identity(acc, name=name)


__all__: list[str] = []
