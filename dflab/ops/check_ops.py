"""TF1's ``tf.assert_*`` checks (``check_ops``): ops that fail the step with
``InvalidArgumentError`` when a condition on tensors does not hold.

Each builds ``Assert(condition, data)`` where ``data`` is TF's message: the user's ``message``,
"Condition x < y did not hold element-wise:", and the tensors' names and values. Checks that
can be decided while the graph is built are decided then, as TF does: values of constants
(``InvalidArgumentError`` at once when they fail), static ranks (``ValueError``) and dtypes
(``TypeError``). Use the returned op as a control dependency (``with
tf.control_dependencies([tf.assert_positive(x)]): ...``) or fetch it.

Executing eagerly there is no op to return: a check that holds returns None and one that
fails raises ``InvalidArgumentError`` at once with TF's eager message (the first differing
entries and their indices for ``x < y`` and the like; the data as lists of values
otherwise). Eager tensors have no names; messages name them by shape and dtype, or not at
all, where TF's do.
"""

from __future__ import annotations

import collections

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import errors
from dflab.framework import ops as _ops
from dflab.framework import sparse_tensor as _sparse
from dflab.framework.constant_op import constant_value
from dflab.ops import array_ops, control_flow_ops, math_ops


def _static_check(condition, data) -> None:
    """Fail now when ``condition`` (a NumPy bool, or None when unknown) is false."""
    if condition is None or bool(condition):
        return
    text = []
    for d in data:
        v = constant_value(d) if isinstance(d, _ops.Tensor) else d
        text.append(str(v) if v is not None else str(d))
    raise errors.InvalidArgumentError(None, None, "\n".join(text))


# --- eager checks: TF's ``_binary_assert`` and ``Assert`` run at once --------------------------
def _eager_name(x) -> str:
    """How TF's eager messages name a tensor: by its shape and dtype (it has no name)."""
    return f"shape={x.shape} dtype={x.dtype.name}"


def _eager_summarize(summarize):
    """TF's eager summary length: 3 entries by default, all of them when negative."""
    if summarize is None:
        return 3
    return 10**9 if summarize < 0 else summarize


def _pretty(item, summarize) -> str:
    """One line of an eager check's message: a tensor as the list of its first
    ``summarize`` entries (``'...'`` when there are more), anything else as ``str``."""
    if not isinstance(item, _ops.Tensor):
        return str(item)
    arr = item.numpy()
    if np.isscalar(arr):
        return str(arr)
    flat = arr.reshape((-1,))
    shown = [str(v) for v in flat[:summarize]]
    if len(shown) < flat.size:
        shown.append("...")
    return str(shown)


def _differences(symbol, x, y, test, summarize) -> list:
    """TF's default data of a failed eager ``x <op> y``: the first entries that differ (when
    ``x`` and ``y`` have one non-scalar shape) and the first entries of each."""
    data = [f"Condition x {symbol} y did not hold."]
    if summarize <= 0:
        return data
    if x.shape == y.shape and x.shape.as_list():
        failed = np.logical_not(test.numpy())
        indices = np.argwhere(failed)
        count = min(summarize, indices.shape[0])
        data += [f"Indices of first {count} different values:", indices[:count],
                 "Corresponding x values:", x.numpy()[failed].reshape((-1,))[:count],
                 "Corresponding y values:", y.numpy()[failed].reshape((-1,))[:count]]
    xs, ys = np.reshape(x.numpy(), (-1,)), np.reshape(y.numpy(), (-1,))
    nx, ny = min(xs.size, summarize), min(ys.size, summarize)
    data += [f"First {nx} elements of x:", xs[:nx], f"First {ny} elements of y:", ys[:ny]]
    return data


def _eager_binary(symbol, tf_fn, x, y, data, summarize, message):
    """``x <op> y`` checked at once: None when it holds, TF's ``InvalidArgumentError``."""
    test = tf_fn(x, y)
    if bool(math_ops.reduce_all(test)):
        return None
    summarize = _eager_summarize(summarize)
    if data is None:
        data = _differences(symbol, x, y, test, summarize)
    if message is not None:
        data = [message, *data]
    raise errors.InvalidArgumentError(None, None, "\n".join(_pretty(d, summarize)
                                                            for d in data))


def _summarize_value(t, summarize) -> str:
    """TF's ``_summarize_eager``: a tensor's first entries joined by commas."""
    if t.shape.ndims:
        flat = np.reshape(t.numpy(), (-1,))
        shown = [str(v) for v in flat[:summarize]]
        if len(shown) < flat.size:
            shown.append("...")
    else:
        shown = [str(t.numpy())] if summarize else []
    return ", ".join(shown)


def _assert(condition, data, summarize):
    """``tf.Assert`` as the checks use it; executing eagerly, TF's eager ``Assert``: None, or
    ``InvalidArgumentError`` showing the condition and the summarized data."""
    if not _ops.executing_eagerly():
        return control_flow_ops.Assert(condition, data, summarize=summarize)
    if bool(condition):
        return None
    summarize = _eager_summarize(summarize)
    values = [_ops.convert_to_tensor(d) for d in data]
    raise errors.InvalidArgumentError(
        None, None, f"Expected '{condition!s}' to be true. Summarized data: "
        + "\n".join(_summarize_value(v, summarize) for v in values))


def _static_ok(name):
    """What a check decided while building returns: a no-op, or None executing eagerly."""
    if _ops.executing_eagerly():
        return None
    return control_flow_ops.no_op(name=name)


def _binary(name, default_name, symbol, tf_fn, np_fn):
    def check(x, y, data=None, summarize=None, message=None, name=None):
        with _ops.name_scope(name, default_name, [x, y]):
            x = _ops.convert_to_tensor(x, name="x")
            y = _ops.convert_to_tensor(y, name="y", dtype=x.dtype.base_dtype)
            if _ops.executing_eagerly():
                return _eager_binary(symbol, tf_fn, x, y, data, summarize, message)
            if data is None:
                data = [message or "", f"Condition x {symbol} y did not hold element-wise:",
                        f"x ({x.name}) = ", x, f"y ({y.name}) = ", y]
            xs, ys = constant_value(x), constant_value(y)
            if xs is not None and ys is not None:
                _static_check(np.all(np_fn(xs, ys)), data)
            condition = math_ops.reduce_all(tf_fn(x, y))
            return control_flow_ops.Assert(condition, data, summarize=summarize)

    check.__name__ = name
    check.__doc__ = f"Assert that ``x {symbol} y`` holds element-wise (with broadcasting)."
    return check


assert_equal = _binary("assert_equal", "assert_equal", "==", math_ops.equal, np.equal)
assert_none_equal = _binary("assert_none_equal", "assert_none_equal", "!=",
                            math_ops.not_equal, np.not_equal)
assert_less = _binary("assert_less", "assert_less", "<", math_ops.less, np.less)
assert_less_equal = _binary("assert_less_equal", "assert_less_equal", "<=",
                            math_ops.less_equal, np.less_equal)
assert_greater = _binary("assert_greater", "assert_greater", ">", math_ops.greater, np.greater)
assert_greater_equal = _binary("assert_greater_equal", "assert_greater_equal", ">=",
                               math_ops.greater_equal, np.greater_equal)


def _sign(name, default_name, wording, compare):
    def check(x, data=None, summarize=None, message=None, name=None):
        with _ops.name_scope(name, default_name, [x]):
            x = _ops.convert_to_tensor(x, name="x")
            if data is None and _ops.executing_eagerly():
                # TF's eager message (whose ``<= 0`` wording runs into the next line).
                head = f"Condition x {wording} did not hold element-wise:"
                shown = f"x ({_eager_name(x)}) = "
                data = ([f"{message}.  " if message else "", head + shown, x]
                        if wording == "<= 0" else
                        [f"{message}.  " if message else "", head, shown, x])
            elif data is None:
                data = [message or "", f"Condition x {wording} did not hold element-wise:",
                        f"x ({x.name}) = ", x]
            zero = array_ops.zeros([], dtype=x.dtype.base_dtype)
            return compare(x, zero, data=data, summarize=summarize)

    check.__name__ = name
    check.__doc__ = f"Assert that every entry of ``x`` is {wording.split(' ', 1)[1]}."
    return check


assert_positive = _sign("assert_positive", "assert_positive", "> 0", assert_greater)
assert_negative = _sign("assert_negative", "assert_negative", "< 0", assert_less)
assert_non_negative = _sign("assert_non_negative", "assert_non_negative", ">= 0",
                            assert_greater_equal)
assert_non_positive = _sign("assert_non_positive", "assert_non_positive", "<= 0",
                            assert_less_equal)


def assert_near(x, y, rtol=None, atol=None, data=None, summarize=None, message=None,
                name=None):
    """Assert ``|x - y| <= atol + rtol * |y|`` element-wise; tolerances default to 10 eps of
    the dtype, as in TF."""
    with _ops.name_scope(name, "assert_near", [x, y, rtol, atol]):
        x = _ops.convert_to_tensor(x, name="x")
        y = _ops.convert_to_tensor(y, name="y", dtype=x.dtype.base_dtype)
        dt = x.dtype.base_dtype
        eps = np.finfo(dt._np).eps if dt.is_floating else 0
        rtol = _ops.convert_to_tensor(10 * eps if rtol is None else rtol, name="rtol", dtype=dt)
        atol = _ops.convert_to_tensor(10 * eps if atol is None else atol, name="atol", dtype=dt)
        if data is None and _ops.executing_eagerly():
            data = [f"{message}.  " if message else "",
                    f"x and y not equal to tolerance rtol = {rtol!s}, atol = {atol!s}",
                    f"x ({_eager_name(x)}) = ", x, f"y ({_eager_name(y)}) = ", y]
        elif data is None:
            data = [message or "", "x and y not equal to tolerance rtol = ", rtol,
                    ", atol = ", atol, f"x ({x.name}) = ", x, f"y ({y.name}) = ", y]
        tol = atol + rtol * math_ops.abs(y)
        diff = math_ops.abs(x - y)
        condition = math_ops.reduce_all(math_ops.less_equal(diff, tol))
        return _assert(condition, data, summarize)


def _rank_check(x, rank, data, summarize, message, name, default_name, at_least):
    relation = "at least " if at_least else ""
    with _ops.name_scope(name, default_name, [x, rank]):
        x = _ops.convert_to_tensor(x, name="x")
        rank = _ops.convert_to_tensor(rank, name="rank", dtype=_dt.int32)
        static_rank = constant_value(rank)
        if rank.shape.ndims not in (None, 0):
            raise ValueError(f"Rank must be a scalar, got shape {rank.shape}")
        prefix = f"{message}.  " if message else ""
        shown = _rank_name(x)
        if static_rank is not None and x.shape.ndims is not None:
            have, want = x.shape.ndims, int(static_rank)
            if have < want or (not at_least and have != want):
                raise ValueError(f"{prefix}Tensor {shown} must have rank {relation}{want}.  "
                                 f"Received rank {have}, shape {x.shape}")
            return _static_ok("static_checks_determined_all_ok")
        if data is None:
            data = [prefix, f"Tensor {shown} must have rank {relation}".rstrip(), rank,
                    "Received shape: ", array_ops.shape(x)]
        compare = math_ops.greater_equal if at_least else math_ops.equal
        return _assert(compare(array_ops.rank(x), rank), data, summarize)


def _rank_name(x) -> str:
    """A tensor as TF's rank messages name it: by its name, by nothing when eager."""
    return "" if _ops.executing_eagerly() else x.name


def assert_rank(x, rank, data=None, summarize=None, message=None, name=None):
    """Assert that ``x`` has rank ``rank`` (a ``ValueError`` now when both are known)."""
    return _rank_check(x, rank, data, summarize, message, name, "assert_rank", False)


def assert_rank_at_least(x, rank, data=None, summarize=None, message=None, name=None):
    """Assert that ``x`` has rank ``rank`` or more."""
    return _rank_check(x, rank, data, summarize, message, name, "assert_rank_at_least", True)


def assert_type(tensor, tf_type, message=None, name=None):
    """Raise ``TypeError`` now unless ``tensor`` has dtype ``tf_type``; returns a no-op."""
    tensor = _ops.convert_to_tensor(tensor)
    want = _dt.as_dtype(tf_type).base_dtype
    if tensor.dtype.base_dtype is not want:
        if _ops.executing_eagerly():
            raise TypeError(f"{f'{message}.  ' if message else ''}tensor must be of type "
                            f"{want!r}; got {tensor.dtype!r}")
        raise TypeError(f"{message + ' ' if message else ''}{tensor.name} must be of type "
                        f"{want.name}; got {tensor.dtype.base_dtype.name}")
    return _static_ok(name or "statically_determined_correct_type")


def assert_integer(x, message=None, name=None):
    """Raise ``TypeError`` now unless ``x`` has an integer dtype; returns a no-op."""
    x = _ops.convert_to_tensor(x)
    if not x.dtype.base_dtype.is_integer:
        if _ops.executing_eagerly():
            raise TypeError(f'{f"{message}.  " if message else ""}Expected "x" to be integer '
                            f"type.  Found: tensor of dtype {x.dtype}")
        raise TypeError(f"{message + ' ' if message else ''}Expected integer type for "
                        f"{x.name}, got {x.dtype.base_dtype.name}")
    return _static_ok(name or "statically_determined_was_integer")


def assert_scalar(tensor, name=None, message=None):
    """``tensor`` itself, after a ``ValueError`` when its rank is known and not 0."""
    with _ops.name_scope(name, "assert_scalar", [tensor]):
        tensor = _ops.convert_to_tensor(tensor, name="tensor")
        ndims = tensor.shape.ndims
        if ndims is None:
            raise ValueError(f"{message + ' ' if message else ''}Expected scalar shape for "
                             f"{tensor.name}, saw unknown shape.")
        if ndims != 0 and _ops.executing_eagerly():
            raise ValueError(f"{f'{message}.  ' if message else ''}Expected scalar shape, saw "
                             f"shape: {tensor.shape}.")
        if ndims != 0:
            raise ValueError(f"{message + ' ' if message else ''}Expected scalar shape for "
                             f"{tensor.name}, saw shape: {tensor.shape}.")
        return tensor


def assert_rank_in(x, ranks, data=None, summarize=None, message=None, name=None):
    """Assert that the rank of ``x`` is one of ``ranks`` (int32 scalars): a ``ValueError``
    now when the rank and every one of ``ranks`` are known, an ``Assert`` otherwise."""
    with _ops.name_scope(name, "assert_rank_in", (x,) + tuple(ranks) + tuple(data or [])):
        x = _ops.convert_to_tensor(x, name="x")
        ranks = tuple(_ops.convert_to_tensor(r, name="rank") for r in ranks)
        prefix = f"{message}.  " if message else ""
        if data is None:
            data = [prefix, f"Tensor {_rank_name(x)} must have rank in", *ranks,
                    "Received shape: ", array_ops.shape(x)]
        for r in ranks:
            assert_type(r, _dt.int32)
        known = [constant_value(r) for r in ranks]
        if all(k is not None for k in known):
            if any(np.ndim(k) != 0 for k in known):
                raise ValueError("Rank must be a scalar.")
            if x.shape.ndims is not None:
                wanted = tuple(int(k) for k in known)
                if x.shape.ndims not in wanted:
                    raise ValueError(f"{prefix}Tensor {_rank_name(x)} must have rank in "
                                     f"{wanted}.  Received rank {x.shape.ndims}, shape "
                                     f"{x.shape}")
                return _static_ok("static_checks_determined_all_ok")
        rank = array_ops.rank(x)
        condition = math_ops.reduce_any(array_ops.stack([math_ops.equal(rank, r)
                                                         for r in ranks]))
        for r, k in zip(ranks, known):
            if k is None:  # assert_rank(x, [n]) where assert_rank(x, n) was meant
                check = assert_rank(r, 0, data=["Rank must be a scalar. Received rank: ", r])
                condition = control_flow_ops.with_dependencies([check], condition)
        return _assert(condition, data, summarize)


def _same_base_type(items, expected=None):
    """The one base dtype of ``items`` (Nones ignored), which must be ``expected`` if given."""
    first = None
    for item in items:
        if item is None:
            continue
        got = item.dtype.base_dtype
        if expected is None:
            expected, first = got, _item_text(item)
        elif got != expected:
            where = f" as {first}" if first else ""
            raise ValueError(f"{_item_text(item)}, type={got}, must be of the same type "
                             f"({expected}){where}.")
    return expected


def _item_text(item) -> str:
    """A tensor's name, or its text when it has none (an eager tensor), as TF's message."""
    return str(item) if getattr(item, "is_eager", False) else item.name


def assert_same_float_dtype(tensors=None, dtype=None):
    """The float dtype that ``tensors`` (and ``dtype`` if given) all have; float32 when
    neither is given. ``ValueError`` on a mismatch or a dtype that is not floating."""
    if tensors:
        dtype = _same_base_type(tensors, dtype)
    if not dtype:
        return _dt.float32
    if not dtype.is_floating:
        raise ValueError(f"Expected floating point type, got {dtype}.")
    return dtype


def assert_proper_iterable(values):
    """``TypeError`` unless ``values`` is an iterable of values (a list, tuple, set,
    generator...), not a tensor, array or string, whose iteration would be unintended."""
    if isinstance(values, (_ops.Tensor, np.ndarray, bytes, str)):
        raise TypeError(f'Expected argument "values" to be a "proper" iterable.  Found: '
                        f"{type(values)}")
    if not hasattr(values, "__iter__"):
        raise TypeError(f'Expected argument "values" to be iterable.  Found: {type(values)}')


def is_numeric_tensor(tensor):
    """True for a tensor of a number type (integers, floats, complex), not bool or string."""
    if not isinstance(tensor, _ops.Tensor):
        return False
    dt = tensor.dtype.base_dtype
    return dt.is_integer or dt.is_floating or dt.is_complex


__all__ = ["assert_equal", "assert_none_equal", "assert_less", "assert_less_equal",
           "assert_greater", "assert_greater_equal", "assert_positive", "assert_negative",
           "assert_non_negative", "assert_non_positive", "assert_near", "assert_rank",
           "assert_rank_at_least", "assert_type", "assert_integer", "assert_scalar",
           "assert_rank_in", "assert_same_float_dtype", "assert_proper_iterable",
           "is_numeric_tensor"]


# --- assert_shapes ----------------------------------------------------------------------------
_ShapeSpec = collections.namedtuple("_ShapeSpec", ["x", "leading_any", "sizes", "symbols"])


def _shape_name(x) -> str:
    """How TF's messages name a tensor (a SparseTensor by its shape and dtype)."""
    if isinstance(x, _sparse.SparseTensor) or _ops.executing_eagerly():
        return f"shape={x.shape} dtype={x.dtype.name}"
    return x.name


def _dynamic_shape(x):
    if isinstance(x, _sparse.SparseTensor):
        return math_ops.cast(x.dense_shape, _dt.int32)
    return array_ops.shape(x)


def _dimension_sizes(x):
    """The sizes of ``x``'s dimensions: ints where known statically, tensors otherwise (a
    scalar counts as one dimension of size 1, as in TF)."""
    ndims = x.shape.ndims
    if ndims == 0:
        return (1,)
    dynamic = _dynamic_shape(x)
    if ndims is not None:
        return [int(d) if d is not None else dynamic[i] for i, d in enumerate(x.shape.as_list())]
    is_scalar = math_ops.equal(array_ops.size(dynamic), 0)
    return control_flow_ops.cond(is_scalar, lambda: array_ops.constant([1]), lambda: dynamic)


def _known_size(size) -> bool:
    """Whether a size symbol or a dimension is a number (not a name, a wildcard or a tensor)."""
    if size is None or isinstance(size, _ops.Tensor):
        return False
    try:
        int(size)
    except (ValueError, TypeError):
        return False
    return True


def _parse_shape_spec(x, shape, prefix) -> _ShapeSpec:
    if not (hasattr(shape, "__iter__") or hasattr(shape, "__getitem__")):
        raise ValueError(f"{prefix}Tensor {_shape_name(x)}.  Specified shape must be an "
                         f"iterable.  An iterable has the attribute `__iter__` or "
                         f"`__getitem__`.  Received specified shape: {shape}")
    symbols = tuple(shape)
    leading_any = False
    for i, symbol in enumerate(symbols):
        if symbol is Ellipsis or (isinstance(symbol, str) and symbol == "*"):
            if i != 0:
                raise ValueError(f"{prefix}Tensor {_shape_name(x)} specified shape index {i}.  "
                                 f"Symbol `...` or `*` for a variable number of unspecified "
                                 f"dimensions is only allowed as the first entry")
            leading_any = True
    symbols = symbols[1:] if leading_any else symbols
    return _ShapeSpec(x, leading_any, _dimension_sizes(x), symbols or (1,))


def _sparse_rank_check(x, rank, at_least, ranks, data, summarize, prefix, name):
    """TF's rank checks of a SparseTensor (named by nothing in the message, as TF's): the
    static rank where known, else the length of ``dense_shape``."""
    wanted = ranks if ranks else (rank,)
    relation = "in" if ranks else ("at least" if at_least else "")
    default_name = "assert_rank" + ("_in" if ranks else "_at_least" if at_least else "")
    with _ops.name_scope(name, default_name):
        have = x.shape.ndims
        if have is not None:
            ok = have >= rank if at_least else have in wanted
            if not ok:
                shown = f"{wanted}" if ranks else f"{rank}"
                words = f"{relation} {shown}" if relation else shown
                raise ValueError(f"{prefix}Tensor  must have rank {words}.  Received rank "
                                 f"{have}, shape {x.shape}")
            return control_flow_ops.no_op(name="static_checks_determined_all_ok")
        actual = array_ops.size(x.dense_shape)
        condition = (math_ops.greater_equal(actual, rank) if at_least else
                     math_ops.reduce_any(array_ops.stack([math_ops.equal(actual, r)
                                                          for r in wanted])))
        if data is None:
            data = [prefix, f"Tensor  must have rank{' ' + relation if relation else ''}",
                    *wanted, "Received shape: ", _dynamic_shape(x)]
        return control_flow_ops.Assert(condition, data, summarize=summarize)


def _rank_assertion(spec, data, summarize, message, name):
    """The rank check of one tensor's spec, or None when any rank will do."""
    rank = len(spec.symbols)
    x = spec.x
    sparse = isinstance(x, _sparse.SparseTensor)
    prefix = f"{message}.  " if message else ""
    if spec.leading_any:
        if rank in (0, 1):
            return None  # any rank, a scalar being one dimension of size 1
        if sparse:
            return _sparse_rank_check(x, rank, True, None, data, summarize, prefix, name)
        return assert_rank_at_least(x, rank, data=data, summarize=summarize, message=message,
                                    name=name)
    if rank in (0, 1):
        if sparse:
            return _sparse_rank_check(x, None, False, (0, 1), data, summarize, prefix, name)
        return assert_rank_in(x, [0, 1], data=data, summarize=summarize, message=message,
                              name=name)
    if sparse:
        return _sparse_rank_check(x, rank, False, None, data, summarize, prefix, name)
    return assert_rank(x, rank, data=data, summarize=summarize, message=message, name=name)


def assert_shapes(shapes, data=None, summarize=None, message=None, name=None):
    """Check the shapes of several tensors and the relations between their dimensions, as
    TF's ``tf.debugging.assert_shapes``.

    ``shapes`` is a list of ``(tensor, shape)`` pairs (or a dict). Each entry of a shape is a
    size (an int), a name shared across the tensors (``"N"``: the same size wherever it
    appears), or any size (``None`` or ``"."``); a first entry ``"*"`` or ``...`` lets any
    number of leading dimensions come first. A scalar and a shape ``()`` count as one
    dimension of size 1. What the static shapes decide fails now (``ValueError`` with TF's
    message); the rest becomes ``Assert`` ops (``InvalidArgumentError`` at run time). Returns
    one op that runs every check (a no-op when all were decided statically), for
    ``tf.control_dependencies``."""
    if isinstance(shapes, dict):
        shapes = shapes.items()
    prefix = f"{message}.  " if message else ""
    with _ops.name_scope(name, "assert_shapes", [shapes, data]):
        specs = []
        for x, shape in shapes:
            if shape is None:
                continue
            if not isinstance(x, _sparse.SparseTensor):
                x = _ops.convert_to_tensor(x)
            specs.append(_parse_shape_spec(x, shape, prefix))
        rank_checks = [a for a in (_rank_assertion(s, data, summarize, message, name)
                                   for s in specs) if a is not None]
        size_checks = _size_assertions(specs, rank_checks, data, summarize, prefix)
    if _ops.executing_eagerly():
        return None  # every check ran (and held) as it was made
    with _ops.control_dependencies(rank_checks):
        return control_flow_ops.group(size_checks)


def _size_assertions(specs, rank_checks, data, summarize, prefix):
    """The checks of every dimension against its number or the first size its name got."""
    checks, named = [], {}
    for spec in specs:
        for i, symbol in enumerate(spec.symbols):
            if symbol is None or (isinstance(symbol, str) and symbol == "."):
                continue
            dim = i - len(spec.symbols) if spec.leading_any else i
            # Read a dynamic size only after the rank checks, so that a wrong rank fails
            # them rather than the slice.
            with _ops.control_dependencies(rank_checks):
                actual = spec.sizes[dim]
            if _known_size(symbol):
                wanted, how = int(symbol), "Specified explicitly"
            elif symbol in named:
                wanted, by, at = named[symbol]
                how = f"Specified by tensor {_shape_name(by)} dimension {at}"
            else:
                named[symbol] = (actual, spec.x, dim)
                continue
            if _known_size(actual) and _known_size(wanted):
                if int(actual) != int(wanted):
                    raise ValueError(f"{prefix}{how}.  Tensor {_shape_name(spec.x)} dimension "
                                     f"{dim} must have size {int(wanted)}.  Received size "
                                     f"{int(actual)}, shape {spec.x.shape}")
                continue
            condition = math_ops.equal(_ops.convert_to_tensor(actual),
                                       _ops.convert_to_tensor(wanted))
            shown = data
            if data is None:
                shown = [prefix, how, f"Tensor {_shape_name(spec.x)} dimension", dim,
                         "must have size", wanted, "Received shape: ", _dynamic_shape(spec.x)]
            checks.append(_assert(condition, shown, summarize))
    return checks
