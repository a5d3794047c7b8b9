"""Session handles (TF1's ``tf.get_session_handle`` and friends): a tensor kept in the session
between runs, named by a string handle.

``GetSessionHandle`` stores its input's value in the session's tensor store on its device (see
``dflab.kernels.session_kernels``) and outputs a handle ``"<op name>;<id>;<device>"``;
fetching it gives a ``TensorHandle``. ``get_session_tensor`` builds a string placeholder on the
handle's device and a ``GetSessionTensor`` op reading the stored value of whatever handle is fed
to it; ``delete_session_tensor`` builds the same placeholder and a ``DeleteSessionTensor`` op
dropping it. An unknown or deleted handle is an ``InvalidArgumentError``, as in TF.
"""

from __future__ import annotations

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.device_spec import DeviceSpec
from dflab.framework.registry import NotDifferentiable, register_op
from dflab.framework.tensor_shape import TensorShape, unknown_shape
from dflab.ops import array_ops

register_op("GetSessionHandle", lambda op: [(_dt.string, TensorShape([]))], stateful=True)
register_op("GetSessionTensor", lambda op: [(op.get_attr("dtype"), unknown_shape())],
            stateful=True)
register_op("DeleteSessionTensor", lambda op: [], stateful=True)
for _t in ("GetSessionHandle", "GetSessionTensor", "DeleteSessionTensor"):
    NotDifferentiable(_t)


class TensorHandle:
    """What fetching a ``get_session_handle`` tensor gives: the handle of a tensor kept in
    ``session``. ``eval()`` reads it back, ``delete()`` drops it; feed ``handle`` (or the
    handle itself) to a ``get_session_tensor`` placeholder to use it in a later run."""

    def __init__(self, handle, dtype, session):
        self._handle = handle.decode() if isinstance(handle, bytes) else str(handle)
        self._resource_handle = None
        self._dtype = _dt.as_dtype(dtype)
        self._session = session

    def __str__(self):
        return self._handle

    def __repr__(self):
        return f"<TensorHandle {self._handle!r} dtype={self._dtype.name}>"

    @property
    def handle(self) -> str:
        """The handle string."""
        return self._handle

    def get_raw_handle(self) -> str:
        return self._handle

    def to_numpy_array(self):
        """What a feed of this handle sends: its string."""
        return self._handle

    @property
    def dtype(self):
        return self._dtype

    def eval(self):
        """The kept tensor's value (runs a ``GetSessionTensor`` in the handle's session)."""
        holder, reader = _handle_op(self._session.graph, "reader", self._handle, self._dtype)
        return self._session.run(reader, feed_dict={holder: self._handle})

    def delete(self) -> None:
        """Drop the kept tensor from the session."""
        holder, deleter = _handle_op(self._session.graph, "deleter", self._handle)
        self._session.run(deleter, feed_dict={holder: self._handle})

    @staticmethod
    def _get_device_name(handle) -> str:
        """The device a handle's tensor lives on (the handle's last field)."""
        text = handle.decode() if isinstance(handle, bytes) else str(handle)
        return DeviceSpec.from_string(text.split(";")[-1]).to_string()


def _handle_op(graph, kind: str, handle: str, dtype=None):
    """(placeholder, op) reading or deleting handles on ``handle``'s device, built once per
    graph, device and dtype (``eval``/``delete`` called in a loop add no ops)."""
    device = TensorHandle._get_device_name(handle)
    cache = graph.__dict__.setdefault("_session_handle_ops", {})
    key = (kind, device, dtype)
    if key not in cache:
        with graph.as_default():
            if kind == "reader":
                cache[key] = get_session_tensor(handle, dtype)
            else:
                cache[key] = delete_session_tensor(handle)
    return cache[key]


def get_session_handle(data, name=None):
    """A string tensor: the handle of ``data``'s value, kept in the session after the run
    (fetching it gives a ``TensorHandle``)."""
    if not isinstance(data, _ops.Tensor):
        raise TypeError("`data` must be of type Tensor.")
    with _ops.colocate_with(data.op):
        return _ops.apply_op("GetSessionHandle", [data], {"T": data.dtype.base_dtype},
                             name or "GetSessionHandle").outputs[0]


def get_session_tensor(handle, dtype, name=None):
    """(placeholder, tensor): feed a handle string to the placeholder and the tensor is the
    value kept under it, of ``dtype``; both live on the handle's device."""
    with _ops.device(TensorHandle._get_device_name(handle)):
        holder = array_ops.placeholder(_dt.string)
        tensor = _ops.apply_op("GetSessionTensor", [holder], {"dtype": _dt.as_dtype(dtype)},
                               name or "GetSessionTensor").outputs[0]
    return holder, tensor


def delete_session_tensor(handle, name=None):
    """(placeholder, op): running the op drops the tensor whose handle is fed."""
    with _ops.device(TensorHandle._get_device_name(handle)):
        holder = array_ops.placeholder(_dt.string)
        deleter = _ops.apply_op("DeleteSessionTensor", [holder], {},
                                name or "DeleteSessionTensor")
    return holder, deleter


def handle_fetches(tensors) -> tuple:
    """Positions and dtypes of the ``GetSessionHandle`` outputs among fetched ``tensors``: the
    values a session returns as ``TensorHandle``s."""
    return tuple((k, t.op.inputs[0].dtype.base_dtype) for k, t in enumerate(tensors)
                 if t.op.type == "GetSessionHandle")


__all__ = ["get_session_handle", "get_session_tensor", "delete_session_tensor"]
