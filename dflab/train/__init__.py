"""``tf.train``: optimizers, the global step, learning-rate schedules, graph writing
(checkpoints and queues come later)."""

from dflab.framework.graph_io import write_graph  # noqa: F401
from dflab.train import slot_creator  # noqa: F401
from dflab.train.adadelta import AdadeltaOptimizer  # noqa: F401
from dflab.train.adagrad import AdagradOptimizer  # noqa: F401
from dflab.train.adagrad_da import AdagradDAOptimizer  # noqa: F401
from dflab.train.adam import AdamOptimizer  # noqa: F401
from dflab.train.basic_loops import basic_train_loop  # noqa: F401
from dflab.train.basic_session_run_hooks import (  # noqa: F401, E402
    CheckpointSaverHook,
    CheckpointSaverListener,
    FeedFnHook,
    FinalOpsHook,
    GlobalStepWaiterHook,
    LoggingTensorHook,
    NanLossDuringTrainingError,
    NanTensorHook,
    SecondOrStepTimer,
    StepCounterHook,
    StopAtStepHook,
)

# Checkpoints, queues, input pipelines and monitored sessions.
from dflab.train.checkpoint_manager import CheckpointManager  # noqa: F401, E402
from dflab.train.checkpoint_utils import (  # noqa: F401, E402
    CheckpointState,
    NewCheckpointReader,
    checkpoint_exists,
    checkpoints_iterator,
    generate_checkpoint_state_proto,
    get_checkpoint_mtimes,
    get_checkpoint_state,
    latest_checkpoint,
    list_variables,
    load_checkpoint,
    load_variable,
    remove_checkpoint,
    update_checkpoint_state,
)
from dflab.train.coordinator import Coordinator, LooperThread  # noqa: F401, E402
from dflab.train.device_setter import (  # noqa: F401, E402
    GreedyLoadBalancingStrategy,
    byte_size_load_fn,
    replica_device_setter,
)
from dflab.train.ftrl import FtrlOptimizer  # noqa: F401
from dflab.train.gradient_descent import GradientDescentOptimizer  # noqa: F401
from dflab.train.input import (  # noqa: F401, E402
    batch,
    batch_join,
    input_producer,
    limit_epochs,
    match_filenames_once,
    maybe_batch,
    maybe_batch_join,
    maybe_shuffle_batch,
    maybe_shuffle_batch_join,
    range_input_producer,
    shuffle_batch,
    shuffle_batch_join,
    slice_input_producer,
    string_input_producer,
)
from dflab.train.learning_rate_decay import (  # noqa: F401
    cosine_decay,
    cosine_decay_restarts,
    exponential_decay,
    inverse_time_decay,
    linear_cosine_decay,
    natural_exp_decay,
    noisy_linear_cosine_decay,
    piecewise_constant,
    piecewise_constant_decay,
    polynomial_decay,
)
from dflab.train.meta_graph import export_meta_graph  # noqa: F401, E402
from dflab.train.momentum import MomentumOptimizer  # noqa: F401
from dflab.train.monitored_session import (  # noqa: F401, E402
    ChiefSessionCreator,
    MonitoredSession,
    MonitoredTrainingSession,
    Scaffold,
    SessionCreator,
    SingularMonitoredSession,
    WorkerSessionCreator,
)
from dflab.train.moving_averages import ExponentialMovingAverage  # noqa: F401, E402

# Object-based checkpoints of eager programs (``checkpoint_manager`` numbers and prunes them).
from dflab.train.object_checkpoint import Checkpoint  # noqa: F401, E402
from dflab.train.optimizer import Optimizer  # noqa: F401
from dflab.train.proximal import (  # noqa: F401
    ProximalAdagradOptimizer,
    ProximalGradientDescentOptimizer,
)
from dflab.train.queue_runner import (  # noqa: F401, E402
    QueueRunner,
    add_queue_runner,
    start_queue_runners,
)
from dflab.train.rmsprop import RMSPropOptimizer  # noqa: F401
from dflab.train.saver import (  # noqa: F401, E402
    Saver,
    SaverDef,
    import_meta_graph,  # noqa: F401, E402
)
from dflab.train.session_manager import SessionManager  # noqa: F401, E402
from dflab.train.session_run_hook import (  # noqa: F401, E402
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
)
from dflab.train.sync_replicas_optimizer import SyncReplicasOptimizer  # noqa: F401, E402
from dflab.train.training_util import (  # noqa: F401
    assert_global_step,
    create_global_step,
    get_global_step,
    get_or_create_global_step,
    global_step,
)

# tf.train.Example and its parts: protobuf messages, built on first use (see dflab.lib).
_PROTO_NAMES = frozenset({"BytesList", "Example", "Feature", "FeatureList", "FeatureLists",
                          "Features", "FloatList", "Int64List", "SequenceExample"})


def __getattr__(name: str):
    if name in _PROTO_NAMES:
        from dflab.lib import protos

        return getattr(protos, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | _PROTO_NAMES)
from dflab.train.warm_starting import (  # noqa: F401, E402
    VocabInfo,
    init_from_checkpoint,  # noqa: F401, E402
    warm_start,
)
