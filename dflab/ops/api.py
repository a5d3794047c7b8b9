"""The public op builders, gathered for ``dflab/__init__``: each ops module lists its
exports in ``__all__``; this module re-exports them all."""

from dflab.ops import math_ops as _math_ops
from dflab.ops import variables as _variables
from dflab.ops.accumulator_ops import *  # noqa: F403
from dflab.ops.array_ops import *  # noqa: F403
from dflab.ops.check_ops import *  # noqa: F403
from dflab.ops.control_flow_ops import *  # noqa: F403
from dflab.ops.functional_ops import *  # noqa: F403
from dflab.ops.gradients import (  # noqa: F401
    IndexedSlices,
    IndexedSlicesValue,
    convert_to_tensor_or_indexed_slices,
    gradients,
)
from dflab.ops.init_ops import *  # noqa: F403
from dflab.ops.logging_ops import *  # noqa: F403
from dflab.ops.logging_ops import print_v2 as print  # noqa: A004 - TF's public name
from dflab.ops.math_ops import *  # noqa: F403
from dflab.ops.nn_ops import *  # noqa: F403
from dflab.ops.partitioned_variables import *  # noqa: F403
from dflab.ops.random_ops import *  # noqa: F403
from dflab.ops.resource_variable_ops import *  # noqa: F403
from dflab.ops.rnn import *  # noqa: F403
from dflab.ops.script_ops import *  # noqa: F403
from dflab.ops.state_ops import *  # noqa: F403
from dflab.ops.tensor_array_ops import *  # noqa: F403
from dflab.ops.training_ops import *  # noqa: F403
from dflab.ops.variable_scope import *  # noqa: F403
from dflab.ops.variables import *  # noqa: F403

_math_ops._install_operators()
_variables._overload_variable_operators()
from dflab.ops import io_ops as _io_ops  # noqa: E402 - registers the checkpoint ops
from dflab.ops.accumulate_ops import *  # noqa: E402, F403
from dflab.ops.bitwise_ops import *  # noqa: E402, F403
from dflab.ops.conv_nd_ops import *  # noqa: E402, F403
from dflab.ops.custom_gradient import *  # noqa: E402, F403
from dflab.ops.data_flow_ops import *  # noqa: E402, F403
from dflab.ops.fft_ops import *  # noqa: E402, F403
from dflab.ops.fixed_length_record_ops import *  # noqa: E402, F403
from dflab.ops.linalg_solve_ops import *  # noqa: E402, F403
from dflab.ops.lmdb_reader_ops import *  # noqa: E402, F403
from dflab.ops.lookup_ops import *  # noqa: E402, F403
from dflab.ops.matrix_ops import *  # noqa: E402, F403
from dflab.ops.more_array_ops import *  # noqa: E402, F403
from dflab.ops.numerics_ops import *  # noqa: E402, F403
from dflab.ops.parsing_ops import *  # noqa: E402, F403
from dflab.ops.reader_ops import *  # noqa: E402, F403
from dflab.ops.scatter_ops import *  # noqa: E402, F403
from dflab.ops.segment_ops import *  # noqa: E402, F403
from dflab.ops.session_ops import *  # noqa: E402, F403
from dflab.ops.sort_ops import *  # noqa: E402, F403
from dflab.ops.space_ops import *  # noqa: E402, F403
from dflab.ops.sparse_compose_ops import *  # noqa: E402, F403
from dflab.ops.sparse_io_ops import *  # noqa: E402, F403
from dflab.ops.sparse_ops import *  # noqa: E402, F403
from dflab.ops.sparse_text_ops import *  # noqa: E402, F403
from dflab.ops.special_math_ops import *  # noqa: E402, F403
from dflab.ops.string_hash_ops import *  # noqa: E402, F403
from dflab.ops.string_ops import *  # noqa: E402, F403
from dflab.ops.template import *  # noqa: E402, F403
from dflab.ops.tensor_io_ops import *  # noqa: E402, F403
from dflab.ops.variable_enums import *  # noqa: E402, F403
