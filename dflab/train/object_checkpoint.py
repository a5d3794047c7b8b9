"""``tf.train.Checkpoint``: save and restore the variables an object graph reaches.

A checkpoint's root is given objects by keyword (``Checkpoint(model=m, optimizer=opt)``); each
variable found by walking attributes, lists and dicts from there (breadth first: a variable
reached along several paths takes the shortest) is saved under its path in TF's object-based
key form (``model/w/.ATTRIBUTES/VARIABLE_VALUE``; attribute names as they are, ``.`` and
``/`` escaped as ``..`` and ``.S``), an optimizer's slots
under the path of the variable they belong to
(``model/w/.OPTIMIZER_SLOT/optimizer/m/.ATTRIBUTES/VARIABLE_VALUE``), and the checkpoint's own
``save_counter``. Values are written and read by the ``SaveV2``/``RestoreV2`` ops run eagerly,
so the files are dflab's ordinary checkpoints (readable with ``tf.train.load_checkpoint``), and
``save`` keeps the directory's ``checkpoint`` state file as ``Saver`` does.

Beside the values, ``write`` stores TF's object graph (a ``TrackableObjectGraph`` under
``_CHECKPOINTABLE_OBJECT_GRAPH``: each object's children by name, its variable's key, an
optimizer's slots by the node of the variable they belong to), which is what TF's
``Checkpoint.restore`` walks: without it TF matches nothing.

An object with state of its own offers values that read and assign like a variable's
(``_checkpoint_values``: an eager iterator's position, ``ITERATOR_STATE``). Restoring assigns
every variable that exists when ``restore`` is called, then those values; the returned status
says what matched (``assert_consumed``, ``assert_existing_objects_matched``).
"""

from __future__ import annotations

import collections
import os

import numpy as np

from dflab.framework import dtypes as _dt
from dflab.framework import ops as _ops
from dflab.framework.constant_op import constant
from dflab.framework.errors import NotFoundError, UnimplementedError
from dflab.lib import protos
from dflab.ops import io_ops
from dflab.ops import resource_variable_ops as _rv
from dflab.ops import variables as _variables
from dflab.train.checkpoint_utils import (
    NewCheckpointReader,
    get_checkpoint_state,
    update_checkpoint_state,
)

_ATTRIBUTES = "/.ATTRIBUTES/"
_VALUE = ".ATTRIBUTES/VARIABLE_VALUE"
_SLOT = "/.OPTIMIZER_SLOT/"
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"


def _is_optimizer(obj) -> bool:
    return hasattr(obj, "get_slot_names") and hasattr(obj, "_slots")


_LEAVES = (str, bytes, int, float, bool, np.ndarray, _ops.Tensor)


def _children(obj) -> list:
    """``(name, value)`` of what ``obj`` may lead to, in TF's order: a list's items, a dict's
    entries, an object's attributes as assigned (dunder attributes, methods and an
    optimizer's slot tables excluded: slots are saved under their variables)."""
    if isinstance(obj, (list, tuple)):
        return [(str(i), v) for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        return [(str(k), v) for k, v in obj.items()]
    attrs = getattr(obj, "__dict__", None)
    if attrs is None or isinstance(obj, type):
        return []
    optimizer = _is_optimizer(obj)
    return [(k, v) for k, v in attrs.items()
            if not (k.startswith("__") or k.startswith("_dflab_")
                    or callable(v) and not (hasattr(v, "__dict__") and not isinstance(v, type))
                    or optimizer and k in ("_slots", "_non_slot_dict"))]


def _escape(name: str) -> str:
    """A name as one segment of a key (TF's escaping: ``.`` as ``..``, ``/`` as ``.S``)."""
    return name.replace(".", "..").replace("/", ".S")


def _unescape(segment: str) -> str:
    out, i = [], 0
    while i < len(segment):
        if segment[i] == "." and i + 1 < len(segment):
            out.append("/" if segment[i + 1] == "S" else segment[i + 1])
            i += 2
        else:
            out.append(segment[i])
            i += 1
    return "".join(out)


def _walk(root: dict, found: dict, optimizers: list) -> None:
    """Breadth first from the root's objects, as TF's object graph view: an object reached
    along several paths is saved under the shortest (the first met among equals)."""
    seen: set = set()
    queue = collections.deque((_escape(name), obj, 0) for name, obj in root.items())
    while queue:
        path, obj, depth = queue.popleft()
        if obj is None or isinstance(obj, _LEAVES) or id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, _variables.Variable):
            found[f"{path}/{_VALUE}"] = obj
            continue
        saved = getattr(obj, "_checkpoint_values", None)
        if saved is not None and not isinstance(obj, type):
            # An object with state of its own (an iterator's position): values that read and
            # assign like a variable's, under its attribute names (``ITERATOR_STATE``).
            for attribute, value in saved().items():
                found[f"{path}{_ATTRIBUTES}{attribute}"] = value
            continue
        if _is_optimizer(obj):
            optimizers.append((path, obj))
        if depth < 32:
            queue.extend((f"{path}/{_escape(name)}", child, depth + 1)
                         for name, child in _children(obj))


def _key_of_variable(v):
    return ("eager", v.handle.op.get_attr("shared_name")) if getattr(
        v, "handle", None) is not None and v.handle.is_eager else (v.op.graph, v.op.name)


def object_graph_variables(root: dict) -> dict:
    """``{checkpoint key: variable}`` for everything ``root``'s objects reach."""
    found: dict = {}
    optimizers: list = []
    _walk(root, found, optimizers)
    by_key = {_key_of_variable(v): _split(k)[0] for k, v in found.items()
              if isinstance(v, _variables.Variable)}
    for opt_path, opt in optimizers:
        for slot_name, per_var in sorted(opt._slots.items()):
            for var_key, slot in per_var.items():
                var_path = by_key.get(var_key)
                if var_path is not None:
                    found[f"{var_path}/.OPTIMIZER_SLOT/{opt_path}/{slot_name}/{_VALUE}"] = slot
        for (name, _graph), v in sorted(opt._non_slot_dict.items(), key=lambda kv: kv[0][0]):
            found[f"{opt_path}/{name}/{_VALUE}"] = v
    return found


def _split(key: str) -> tuple[str, str]:
    """A checkpoint key's object path and attribute name (``VARIABLE_VALUE``, ...)."""
    path, attribute = key.rsplit(_ATTRIBUTES, 1)
    return path, attribute


def object_graph(found: dict):
    """TF's ``TrackableObjectGraph`` of the checkpoint keys ``found`` (``{key: variable}``, as
    ``object_graph_variables`` gives them): node 0 the root, a node per object on a key's path,
    children by the path's names, each variable's node holding its key; a slot's node is
    referenced only by its optimizer's ``slot_variables``."""
    graph = protos.TrackableObjectGraph()
    graph.nodes.add()
    ids = {(): 0}

    def node(path: tuple) -> int:
        found_id = ids.get(path)
        if found_id is None:
            parent = node(path[:-1])
            found_id = ids[path] = len(graph.nodes)
            graph.nodes.add()
            graph.nodes[parent].children.add(node_id=found_id, local_name=_unescape(path[-1]))
        return found_id

    def holds(node_proto, key, variable) -> None:
        node_proto.attributes.add(name=_split(key)[1], checkpoint_key=key,
                                  full_name=variable.name.rsplit(":", 1)[0])

    slots = []
    for key, variable in found.items():
        if _SLOT in key:
            slots.append((key, variable))
        else:
            holds(graph.nodes[node(tuple(_split(key)[0].split("/")))], key, variable)
    for key, variable in slots:
        var_path, rest = key.split(_SLOT, 1)
        opt_path, slot_name = rest[: -len(_VALUE) - 1].rsplit("/", 1)
        slot_id = len(graph.nodes)
        holds(graph.nodes.add(), key, variable)
        graph.nodes[node(tuple(opt_path.split("/")))].slot_variables.add(
            original_variable_node_id=ids[tuple(var_path.split("/"))], slot_name=slot_name,
            slot_variable_node_id=slot_id)
    for node_proto in graph.nodes:  # every object here leads to a saved value
        node_proto.has_checkpoint_values.value = True
    return graph


class CheckpointLoadStatus:
    """What ``Checkpoint.restore`` returns: which saved values found a variable."""

    def __init__(self, path: str, restored: list, unmatched_saved: list, unmatched_live: list):
        self.save_path = path
        self.restored = restored
        self.unmatched_saved = unmatched_saved
        self.unmatched_live = unmatched_live

    def assert_consumed(self):
        if self.unmatched_saved or self.unmatched_live:
            raise AssertionError(
                f"Unresolved object in checkpoint {self.save_path}: saved values without a "
                f"variable {self.unmatched_saved}, variables without a saved value "
                f"{self.unmatched_live}")
        return self

    def assert_existing_objects_matched(self):
        if self.unmatched_live:
            raise AssertionError(f"Variables without a value in {self.save_path}: "
                                 f"{self.unmatched_live}")
        return self

    def assert_nontrivial_match(self):
        if not self.restored:
            raise AssertionError(f"Nothing in {self.save_path} matched this checkpoint's "
                                 "objects")
        return self

    def expect_partial(self):
        return self

    def run_restore_ops(self, session=None) -> None:
        """Values are assigned when ``restore`` runs eagerly: nothing is left to run."""

    def initialize_or_restore(self, session=None) -> None:
        """As ``run_restore_ops``."""


class Checkpoint:
    """``tf.train.Checkpoint(**objects)`` (see the module docstring)."""

    def __init__(self, **kwargs):
        if not _ops.executing_eagerly():
            raise RuntimeError("tf.train.Checkpoint saves objects' variables when eager "
                               "execution is enabled; in a graph use tf.train.Saver.")
        for k, v in kwargs.items():
            if k == "save_counter":
                raise ValueError("save_counter is the checkpoint's own attribute")
            setattr(self, k, v)
        self._dflab_counter = None

    @property
    def save_counter(self):
        """How many times ``save`` ran (a variable, saved with the checkpoint)."""
        if self._dflab_counter is None:
            self._dflab_counter = _rv.ResourceVariable(0, dtype=_dt.int64, trainable=False,
                                                       name="save_counter")
        return self._dflab_counter

    def _objects(self) -> dict:
        root = {k: v for k, v in vars(self).items() if not k.startswith("_dflab_")}
        found = object_graph_variables(root)
        found[f"save_counter/{_VALUE}"] = self.save_counter
        return found

    def write(self, file_prefix: str) -> str:
        """Write the variables to ``file_prefix`` (no counter, no state file)."""
        found = self._objects()
        names = sorted(found)
        _ensure_dir(file_prefix)
        graph = constant(object_graph(found).SerializeToString(), dtype=_dt.string)
        io_ops.save_v2(file_prefix, [OBJECT_GRAPH_KEY, *names], [""] * (len(names) + 1),
                       [graph, *[found[n].read_value() for n in names]])
        return file_prefix

    def save(self, file_prefix: str) -> str:
        """Write ``file_prefix-N`` (N: the save counter, incremented first) and record it
        in the directory's ``checkpoint`` file; returns the path."""
        self.save_counter.assign_add(1)
        path = f"{file_prefix}-{int(self.save_counter.numpy())}"
        self.write(path)
        directory = os.path.dirname(os.path.abspath(path))
        state = get_checkpoint_state(directory)
        earlier = list(state.all_model_checkpoint_paths) if state is not None else []
        update_checkpoint_state(directory, path, earlier + [path])
        return path

    def read(self, save_path: str) -> CheckpointLoadStatus:
        return self.restore(save_path)

    def restore(self, save_path) -> CheckpointLoadStatus:
        """Assign every variable the checkpoint ``save_path`` has a value for."""
        if save_path is None:
            return CheckpointLoadStatus("", [], [], [])
        try:
            reader = NewCheckpointReader(save_path)
        except (OSError, ValueError) as e:
            raise NotFoundError(None, None, f"Failed to find a checkpoint at {save_path}: "
                                f"{e}") from None
        dtypes = reader.get_variable_to_dtype_map()
        saved = set(dtypes) - {OBJECT_GRAPH_KEY}
        found = self._objects()
        # Variables first: a saved value another kind of object refuses (an iterator position
        # over another pipeline) then leaves the variables restored and that object as it was.
        matched = sorted((n for n in found if n in saved),
                         key=lambda n: (not isinstance(found[n], _variables.Variable), n))
        unreadable = [n for n in matched if dtypes[n] is None]
        readable = [n for n in matched if dtypes[n] is not None]
        if readable:
            values = io_ops.restore_v2(save_path, readable, [""] * len(readable),
                                       [found[n].dtype.base_dtype for n in readable])
            for n, value in zip(readable, values):
                found[n].assign(value)
        if unreadable:
            raise UnimplementedError(
                None, None, f"Checkpoint {save_path} holds {', '.join(unreadable)} in a dtype "
                "dflab does not read (TF's own iterator state is a variant): the other values "
                "are restored; restore from a Checkpoint without those objects.")
        return CheckpointLoadStatus(save_path, sorted(matched), sorted(saved - set(found)),
                                    sorted(n for n in found if n not in saved
                                           and not n.startswith("save_counter")))


def _ensure_dir(prefix: str) -> None:
    directory = os.path.dirname(os.path.abspath(prefix))
    os.makedirs(directory, exist_ok=True)
