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
every variable that exists when ``restore`` is called, then those values; the rest wait for
their objects (TF's deferred restoration, ``_Restoration``): a module's attribute, a layer's
weight, an optimizer's slot is restored as it is made. The returned status says what matched
as of when it is asked (``assert_consumed``, ``assert_existing_objects_matched``).

In a graph (TF 1.x's graph mode) the same walk builds ops instead: ``save``/``write`` run a
``SaveV2`` (built once per set of values) in a session, and ``restore`` builds the
``RestoreV2`` and assigns, those of objects made later too, which the status's
``run_restore_ops``/``initialize_or_restore`` run.
"""

from __future__ import annotations

import collections
import logging
import os
import sys

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
    update_checkpoint_state,
)

logger = logging.getLogger("dflab.train")

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


def _join(path: str, name: str) -> str:
    """The path of ``path``'s child ``name`` (the root's path is ``""``)."""
    return f"{path}/{_escape(name)}" if path else _escape(name)


def _walk(starts, found: dict, optimizers: list, objects: list | None = None) -> None:
    """Breadth first from ``starts`` (``(path, object)`` pairs), as TF's object graph view: an
    object reached along several paths is saved under the shortest (the first met among
    equals). ``objects`` collects every object passed on the way with its path."""
    seen: set = set()
    queue = collections.deque((path, obj, 0) for path, obj in starts)
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
        if objects is not None:
            objects.append((path, obj))
        if _is_optimizer(obj):
            optimizers.append((path, obj))
        if depth < 32:
            queue.extend((_join(path, name), child, depth + 1)
                         for name, child in _children(obj))


def _key_of_variable(v):
    return ("eager", v.handle.op.get_attr("shared_name")) if getattr(
        v, "handle", None) is not None and v.handle.is_eager else (v.op.graph, v.op.name)


def _add_optimizer_state(found: dict, optimizers: list, var_paths: dict) -> None:
    """Add the optimizers' slots (under the path of their variable, looked up in
    ``var_paths``: ``{_key_of_variable(v): path}``) and non-slot variables to ``found``."""
    for opt_path, opt in optimizers:
        for slot_name, per_var in sorted(opt._slots.items()):
            for var_key, slot in per_var.items():
                var_path = var_paths.get(var_key)
                if var_path is not None:
                    found[_slot_key(var_path, opt_path, slot_name)] = slot
        for (name, _graph), v in sorted(opt._non_slot_dict.items(), key=lambda kv: kv[0][0]):
            found[f"{_join(opt_path, name)}/{_VALUE}"] = v


def _slot_key(var_path: str, opt_path: str, slot_name: str) -> str:
    return f"{var_path}{_SLOT}{opt_path}/{_escape(slot_name)}/{_VALUE}"


def _variable_paths(found: dict) -> dict:
    return {_key_of_variable(v): _split(k)[0] for k, v in found.items()
            if isinstance(v, _variables.Variable)}


def object_graph_variables(root: dict) -> dict:
    """``{checkpoint key: variable}`` for everything ``root``'s objects reach."""
    found: dict = {}
    optimizers: list = []
    _walk([(_escape(name), obj) for name, obj in root.items()], found, optimizers)
    _add_optimizer_state(found, optimizers, _variable_paths(found))
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


def _pretty(key: str) -> str:
    """A key as TF's messages name its object: ``(root).model.w``, a slot as
    ``(root).w's state 'm' for (root).optimizer``."""
    def dotted(path):
        return ".".join(["(root)"] + [_unescape(p) for p in path.split("/") if p])

    path = _split(key)[0]
    if _SLOT in path:
        var_path, rest = path.split(_SLOT, 1)
        opt_path, slot_name = rest.rsplit("/", 1)
        return f"{dotted(var_path)}'s state '{_unescape(slot_name)}' for {dotted(opt_path)}"
    return dotted(path)


class _Restoration:
    """One ``restore`` call: the checkpoint's values, the keys still waiting for an object
    (TF's deferred restoration), and the objects that may yet gain one.

    An object the walk from the root passed, under which values still wait, holds
    ``(restoration, its path)`` in ``_dflab_restorations``; its hooks call back here:
    ``attach`` when a ``tf.Module``/``Checkpoint`` gains an attribute or a layer makes a
    weight, ``restore_slot`` when an optimizer makes a slot or a non-slot variable. A slot
    finds its value through the path its variable was restored from (``var_paths``)."""

    def __init__(self, save_path: str, dtypes: dict):
        self.save_path = save_path
        self.dtypes = dtypes
        self.pending = set(dtypes) - {OBJECT_GRAPH_KEY}
        self.restored: set = set()
        self.var_paths: dict = {}  # {_key_of_variable(v): path} of the variables restored
        self.expect_partial = False
        # Where the values go: the eager context, or the graph whose session runs the
        # restoring ops (``graph_ops``, built as their variables are found).
        self.graph = None if _ops.executing_eagerly() else _ops.get_default_graph()
        self.graph_ops: list = []
        # {object path: how many waiting values lie under it}, every path leading to one
        self._prefixes: collections.Counter = collections.Counter()
        for key in self.pending:
            self._prefixes.update(_path_prefixes(key))

    def _done(self, keys) -> None:
        """``keys`` are restored: they wait no more."""
        for key in keys:
            self.pending.discard(key)
            self.restored.add(key)
            self._prefixes.subtract(_path_prefixes(key))
        self._prefixes += collections.Counter()  # (drops the paths left at zero)

    def __del__(self):
        # TF's warning when the last object a restore could still reach goes away with values
        # never restored (silenced by ``expect_partial``).
        if self.pending and not self.expect_partial and not sys.is_finalizing():
            try:
                logger.warning(
                    "Detecting that an object or model or tf.train.Checkpoint is being deleted "
                    "with unrestored values. See the following logs for the specific values in "
                    "question. To silence these warnings, use `status.expect_partial()`.")
                for key in sorted(self.pending):
                    logger.warning("Value in checkpoint could not be found in the restored "
                                   "object: %s", _pretty(key))
            except Exception:  # noqa: BLE001  (at interpreter exit logging may be gone)
                pass

    def restore_from(self, starts) -> list:
        """Assign the waiting values of what ``starts`` (``(path, object)`` pairs) reaches,
        and leave this restoration with the objects under which values still wait; returns
        the keys assigned."""
        found: dict = {}
        optimizers: list = []
        objects: list = []
        _walk(starts, found, optimizers, objects)
        self.var_paths.update({k: p for k, p in _variable_paths(found).items()
                               if f"{p}/{_VALUE}" in self.dtypes})
        _add_optimizer_state(found, optimizers, self.var_paths)
        matched = self._assign({k: v for k, v in found.items() if k in self.pending})
        for path, obj in objects:
            if self.pending and (path in self._prefixes or _is_optimizer(obj)):
                _hold(obj, self, path)
        return matched

    def attach(self, path: str, name: str, value) -> None:
        """``value`` became the attribute ``name`` of the object at ``path``."""
        child = _join(path, name)
        if child in self._prefixes and value is not None and not isinstance(value, _LEAVES):
            self.restore_from([(child, value)])

    def restore_slot(self, opt_path: str, slot_name, var, slot) -> None:
        """The optimizer at ``opt_path`` made ``slot`` for ``var`` (``var`` None: the
        non-slot variable ``slot_name``)."""
        if var is None:
            key = f"{_join(opt_path, slot_name)}/{_VALUE}"
        else:
            var_path = self.var_paths.get(_key_of_variable(var))
            if var_path is None:
                return
            key = _slot_key(var_path, opt_path, slot_name)
        if key in self.pending:
            self._assign({key: slot})

    def _assign(self, targets: dict) -> list:
        """Read ``targets``' values (``{key: variable}``) and assign them: variables first,
        so a value another kind of object refuses (an iterator position over another
        pipeline) leaves the variables restored and that object as it was."""
        if not targets:
            return []
        from dflab.eager.context import init_scope  # (eager imports the train package)

        keys = sorted(targets, key=lambda n: (not isinstance(targets[n], _variables.Variable), n))
        unreadable = [n for n in keys if self.dtypes[n] is None]
        readable = [n for n in keys if self.dtypes[n] is not None]
        with init_scope():  # a variable made while a function is traced lives outside it
            here = None if _ops.executing_eagerly() else _ops.get_default_graph()
            if here is not self.graph:
                return []  # another graph's variable: nothing would run its restoring ops
            if readable:
                values = io_ops.restore_v2(self.save_path, readable, [""] * len(readable),
                                           [targets[n].dtype.base_dtype for n in readable])
                for n, value in zip(readable, values):
                    shape = getattr(targets[n], "shape", None)
                    if shape is not None and not shape.is_compatible_with(value.shape):
                        raise ValueError(
                            f"Received incompatible tensor with shape {value.shape} when "
                            f"attempting to restore variable with shape {shape} and name "
                            f"{targets[n].name}.")
                for n, value in zip(readable, values):
                    assigned = targets[n].assign(value)
                    if here is not None:  # run by the status's run_restore_ops
                        self.graph_ops.append(getattr(assigned, "op", assigned))
        self._done(readable)
        if unreadable:
            raise UnimplementedError(
                None, None, f"Checkpoint {self.save_path} holds {', '.join(unreadable)} in a "
                "dtype dflab does not read (TF's own iterator state is a variant): the other "
                "values are restored; restore from a Checkpoint without those objects.")
        return readable


def _path_prefixes(key: str) -> list:
    """The object paths leading to ``key``'s value (``a``, ``a/b`` for ``a/b/.ATTRIBUTES/...``),
    the root's (``""``) included; a slot's value is led to by its optimizer's path too."""
    path = _split(key)[0]
    paths = [path]
    if _SLOT in path:
        paths.append(path.split(_SLOT, 1)[1].rsplit("/", 1)[0])
    found = {""}
    for p in paths:
        parts = p.split("/")
        found.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    return sorted(found)


def _hold(obj, restoration: _Restoration, path: str) -> None:
    """Record on ``obj`` that ``restoration`` has values waiting under it (at ``path``);
    restorations with nothing left waiting are dropped."""
    try:
        held = obj.__dict__.setdefault("_dflab_restorations", [])
    except (AttributeError, TypeError):  # no instance dict: nothing can be attached to it
        return
    held[:] = [(r, p) for r, p in held if r.pending and r is not restoration]
    held.append((restoration, path))


def restore_attribute(obj, name: str, value) -> None:
    """``value`` became ``obj``'s attribute ``name``: restore what waits for it (the hook
    ``tf.Module``, ``Checkpoint`` and layers call; a no-op for an object no restore
    reached)."""
    for restoration, path in list(obj.__dict__.get("_dflab_restorations", ())):
        restoration.attach(path, name, value)


class CheckpointLoadStatus:
    """What ``Checkpoint.restore`` returns: which saved values found an object, as of when it
    is asked (values restored later, when their objects are made, count)."""

    def __init__(self, checkpoint, restoration: _Restoration | None):
        self._checkpoint = checkpoint
        self._restoration = restoration
        self.save_path = restoration.save_path if restoration is not None else ""

    @property
    def restored(self) -> list:
        """The keys given their values so far."""
        return sorted(self._restoration.restored) if self._restoration is not None else []

    def _unmatched_live(self) -> list:
        saved = self._restoration.dtypes
        # (The counter is the checkpoint's own: a checkpoint written without it matches.)
        return [v for k, v in sorted(self._checkpoint._objects().items())
                if k not in saved and not k.startswith("save_counter/")]

    def _nothing_restored(self) -> None:
        """TF's status of ``restore(None)`` fails every assertion."""
        if self._restoration is None:
            raise AssertionError("No checkpoint specified (save_path=None); nothing is being "
                                 "restored.")

    def assert_consumed(self):
        """TF's: every existing object matched, and every value in the checkpoint restored."""
        self.assert_existing_objects_matched()
        if self._restoration.pending:
            key = sorted(self._restoration.pending)[0]
            raise AssertionError(f"Unresolved object in checkpoint {_pretty(key)}: "
                                 f"checkpoint_key: {key!r} (of {len(self._restoration.pending)}"
                                 f" values not restored from {self.save_path})")
        return self

    def assert_existing_objects_matched(self):
        """TF's: every variable the root reaches now has a value in the checkpoint (values
        whose objects are not made yet are no error)."""
        self._nothing_restored()
        unmatched = self._unmatched_live()
        if unmatched:
            raise AssertionError(
                f"Found {len(unmatched)} Python objects that were not bound to checkpointed "
                "values, likely due to changes in the Python program. Showing "
                f"{min(len(unmatched), 10)} of {len(unmatched)} unmatched objects: "
                f"{unmatched[:10]}")
        return self

    def assert_nontrivial_match(self):
        self._nothing_restored()
        if not self._restoration.restored:
            raise AssertionError(f"Nothing in {self.save_path} matched this checkpoint's "
                                 "objects")
        return self

    def expect_partial(self):
        """Silence the warning about values this restore leaves unrestored (TF's)."""
        if self._restoration is not None:
            self._restoration.expect_partial = True
        return self

    def run_restore_ops(self, session=None) -> None:
        """In a graph, run the ops that restore the values found so far (those of objects
        made after ``restore`` included). Executing eagerly, values are assigned as their
        objects are found: nothing is left to run."""
        if self._restoration is not None and self._restoration.graph is not None:
            ops = list(self._restoration.graph_ops)
            if ops:
                _session(session).run(ops)

    def initialize_or_restore(self, session=None) -> None:
        """In a graph, run the initializers of the variables the checkpoint has no value
        for, then ``run_restore_ops`` (TF's); eagerly, nothing is left to run."""
        if _ops.executing_eagerly():
            return
        restored = self._restoration.restored if self._restoration is not None else set()
        initializers = [v.initializer for k, v in sorted(self._checkpoint._objects().items())
                        if k not in restored and isinstance(v, _variables.Variable)]
        if initializers:
            _session(session).run(initializers)
        self.run_restore_ops(session)


def _session(session):
    """``session``, else the default one: what runs a graph's save and restore ops."""
    session = session or _ops.get_default_session()
    if session is None:
        raise ValueError("tf.train.Checkpoint in a graph runs its ops in a session: pass "
                         "session= or make one the default (with tf.Session() as sess:).")
    return session


class Checkpoint:
    """``tf.train.Checkpoint(**objects)`` (see the module docstring). Executing eagerly its
    values are read and assigned on the spot; in a graph ``save`` and ``write`` run their
    ops in a session (``session=``, else the default one), and ``restore`` builds the
    restoring ops that its status's ``run_restore_ops``/``initialize_or_restore`` run."""

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            if k == "save_counter":
                raise ValueError("save_counter is the checkpoint's own attribute")
            setattr(self, k, v)
        self._dflab_counter = None
        self._dflab_save_ops: dict = {}  # graph mode: {(graph, keys): (filename, save op)}
        self._dflab_count_op = None

    @property
    def save_counter(self):
        """How many times ``save`` ran (a variable, saved with the checkpoint)."""
        if self._dflab_counter is None:
            from dflab.eager.context import init_scope

            with init_scope():
                self._dflab_counter = _rv.ResourceVariable(0, dtype=_dt.int64,
                                                           trainable=False,
                                                           name="save_counter")
        return self._dflab_counter

    def _objects(self) -> dict:
        root = {k: v for k, v in vars(self).items() if not k.startswith("_dflab_")}
        found = object_graph_variables(root)
        found[f"save_counter/{_VALUE}"] = self.save_counter
        return found

    def write(self, file_prefix: str, session=None) -> str:
        """Write the variables to ``file_prefix`` (no counter, no state file)."""
        found = self._objects()
        names = sorted(found)
        _ensure_dir(file_prefix)
        if _ops.executing_eagerly():
            graph = constant(object_graph(found).SerializeToString(), dtype=_dt.string)
            io_ops.save_v2(file_prefix, [OBJECT_GRAPH_KEY, *names], [""] * (len(names) + 1),
                           [graph, *[found[n].read_value() for n in names]])
            return file_prefix
        # In a graph the save op is built once per set of values, the file name fed.
        key = (_ops.get_default_graph(), tuple(names))
        if key not in self._dflab_save_ops:
            from dflab.ops import array_ops

            filename = array_ops.placeholder(_dt.string, shape=[], name="checkpoint_prefix")
            graph = constant(object_graph(found).SerializeToString(), dtype=_dt.string)
            op = io_ops.save_v2(filename, [OBJECT_GRAPH_KEY, *names], [""] * (len(names) + 1),
                                [graph, *[found[n].read_value() for n in names]])
            self._dflab_save_ops[key] = (filename, op)
        filename, op = self._dflab_save_ops[key]
        _session(session).run(op, {filename: file_prefix})
        return file_prefix

    def save(self, file_prefix: str, session=None) -> str:
        """Write ``file_prefix-N`` (N: the save counter, incremented first) and record it
        in the directory's ``checkpoint`` file as TF's ``Checkpoint.save`` does: that path
        alone, relative to the directory (which may then move); returns the path."""
        if _ops.executing_eagerly():
            self.save_counter.assign_add(1)
            number = int(self.save_counter.numpy())
        else:
            session = _session(session)
            if self._dflab_counter is None:  # a new counter starts at 0 (TF's)
                session.run(self.save_counter.initializer)
            if self._dflab_count_op is None:
                self._dflab_count_op = self.save_counter.assign_add(1)
            number = int(session.run(self._dflab_count_op))
        path = f"{file_prefix}-{number}"
        self.write(path, session=session)
        update_checkpoint_state(os.path.dirname(file_prefix), path, [path],
                                save_relative_paths=True)
        return path

    def read(self, save_path: str) -> CheckpointLoadStatus:
        return self.restore(save_path)

    def restore(self, save_path) -> CheckpointLoadStatus:
        """Assign every variable the checkpoint ``save_path`` has a value for; the values
        left are restored as their objects are made (TF's deferred restoration: a layer's
        or module's variables made on its first call, an optimizer's slots on its first
        update)."""
        if save_path is None:
            return CheckpointLoadStatus(self, None)
        try:
            reader = NewCheckpointReader(save_path)
        except (OSError, ValueError) as e:
            raise NotFoundError(None, None, f"Failed to find a checkpoint at {save_path}: "
                                f"{e}") from None
        restoration = _Restoration(save_path, reader.get_variable_to_dtype_map())
        self.save_counter  # noqa: B018  (made first: it is restored with the rest)
        roots = [(_escape(k), v) for k, v in vars(self).items() if not k.startswith("_dflab_")]
        restoration.restore_from([*roots, ("save_counter", self.save_counter)])
        _hold(self, restoration, "")
        return CheckpointLoadStatus(self, restoration)

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if not name.startswith("_dflab_"):
            restore_attribute(self, name, value)


def _ensure_dir(prefix: str) -> None:
    directory = os.path.dirname(os.path.abspath(prefix))
    os.makedirs(directory, exist_ok=True)
