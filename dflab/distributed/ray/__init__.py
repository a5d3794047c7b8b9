"""The Ray transport: each task of a cluster is a Ray actor; tensors cross tasks through Ray's
object store (``pip install dflab[ray]``; see docs/distributed.md).

Ray is the engine for processes, scheduling across machines, transfer and actor restarts;
dflab adds only the dataflow protocol on top, the same task stub the in-process transport
implements (``dflab.distributed.stub``):

* ``actor`` — the task's actor, an asyncio actor wrapping the task's ``Task``: steps run on
  threads of its own, a peer's pull of a tensor waits without holding any thread;
* ``client`` — ``RayTaskStub`` (a client's calls as actor calls) and the session worker of a
  ``dflab+ray://`` target;
* ``launcher`` — starting task actors (``tf.train.Server(..., protocol="ray")``, ``launch``);
* ``targets`` — target and actor names (imports no Ray).

Only ``targets`` may be imported without Ray installed.
"""
