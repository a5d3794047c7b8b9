"""NumPy (and, where present, CuPy) kernels, registered per (op type, device type).

Importing this package registers every kernel module.
"""

from dflab.kernels import (  # noqa: F401 - imported for their registrations
    accumulator_kernels,
    array_kernels,
    comm_kernels,
    control_flow_kernels,
    conv_kernels,
    cuda,  # noqa: F401, E402 - the GPU's own kernels, before mirroring
    data_flow_kernels,
    dataset_kernels,
    fused_kernels,
    io_kernels,
    iterator_kernels,
    logging_kernels,
    math_kernels,
    nested_dataset_kernels,
    nn_kernels,
    parsing_kernels,
    random_kernels,
    reader_kernels,
    record_dataset_kernels,
    resource_variable_kernels,
    script_kernels,
    state_kernels,
    summary_kernels,
    tensor_array_kernels,
    training_kernels,
)

from dflab.kernels import special_math_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import candidate_sampling_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import sparse_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import sparse_text_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import normalization_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import fixed_length_record_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import lmdb_reader_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import image_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import image_color_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import image_codec_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import string_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import matrix_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import segment_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import scatter_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import sort_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import bitwise_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import fft_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import space_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import more_array_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import tensor_io_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import conv_nd_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import stateless_random_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import image_box_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import sample_box_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import tridiagonal_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import string_hash_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import string_sequence_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import lookup_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import contraction_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import stateful_random_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels import session_kernels  # noqa: F401, E402  isort: skip
from dflab.kernels.gpu_kernels import register_gpu_kernels

# Last: the GPU mirrors every CPU kernel written against ``xp`` (see gpu_kernels).
register_gpu_kernels()
