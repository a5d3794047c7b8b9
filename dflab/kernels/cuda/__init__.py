"""GPU kernels of their own: what a GPU runs differently from the shared kernels bound to CuPy.

* ``program``: CUDA C programs (one ``__global__`` function each, with a NumPy reference),
  compiled with NVRTC through CuPy's ``RawKernel``;
* ``libraries``: the device's own cuBLAS handle and cuDNN handle, and the GPU kernel context
  that carries them;
* ``blas``: ``MatMul`` and ``BatchMatMulV2`` on the owned cuBLAS handle;
* ``dnn`` and ``conv``: convolutions through cuDNN graphs;
* ``nn`` and ``optimizers``: one launch per op for nn ops, pooling and dense updates;
* ``fused``: fused elementwise groups as programs of their own;
* ``gather``: gathers and row scatters without host checks (capturable);
* ``multi_apply``: all of one optimizer's dense resource updates in one launch.

Each module registers its kernels for "GPU" when imported; ``dflab.kernels`` imports this
package before it mirrors the remaining CPU kernels onto GPUs, so an op with a kernel here
keeps it.
"""

from dflab.kernels.cuda import (  # noqa: F401 - imported for their registrations
    blas,
    conv,
    fused,
    gather,
    multi_apply,
    nn,
    optimizers,
)
