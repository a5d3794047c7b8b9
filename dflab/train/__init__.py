"""``tf.train``: optimizers, the global step, learning-rate schedules, graph writing
(checkpoints and queues come later)."""

from dflab.framework.graph_io import write_graph  # noqa: F401
from dflab.train import slot_creator  # noqa: F401
from dflab.train.adagrad import AdagradOptimizer  # noqa: F401
from dflab.train.adam import AdamOptimizer  # noqa: F401
from dflab.train.gradient_descent import GradientDescentOptimizer  # noqa: F401
from dflab.train.learning_rate_decay import (  # noqa: F401
    exponential_decay,
    inverse_time_decay,
    natural_exp_decay,
    polynomial_decay,
)
from dflab.train.momentum import MomentumOptimizer  # noqa: F401
from dflab.train.optimizer import Optimizer  # noqa: F401
from dflab.train.rmsprop import RMSPropOptimizer  # noqa: F401
from dflab.train.training_util import (  # noqa: F401
    assert_global_step,
    create_global_step,
    get_global_step,
    get_or_create_global_step,
    global_step,
)
