"""File formats TensorFlow writes, read and written without TensorFlow: TFRecord files
(``lib/io/tf_record.py``), the tables and tensor bundles of TF's checkpoints
(``lib/io/table.py``, ``lib/io/tensor_bundle.py``) and the protocol buffers they carry
(``lib/protos.py``); and the string hashes TF's ops compute (``lib/hash.py``: FarmHash's
Fingerprint64, TF's Hash64, SipHash), which must match TF's bit for bit.

The layer sits just above ``framework`` (it raises TF's error classes) and below everything
else, so kernels, the training layer and the public API share one implementation of each
format. Nothing here builds graphs or runs ops.
"""
