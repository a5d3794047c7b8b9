"""The TF 1.x API surface against dflab's: which of TF's public names dflab has, and why the
others are missing. ``tf1_api_names.json`` lists the public names of ``tensorflow.compat.v1``
(TF 2.21) and its sub-modules (``layers`` and ``nn.rnn_cell`` from TF 1.15's documentation);
the generated part of ``docs/compat.md`` is written from it by

    python tests/compat/surface.py --write

and ``test_api_surface.py`` fails when that part is stale (a name added or removed).
"""

from __future__ import annotations

import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAMES = pathlib.Path(__file__).with_name("tf1_api_names.json")
DOC = ROOT / "docs" / "compat.md"
BEGIN = "<!-- BEGIN GENERATED: tests/compat/surface.py -->"
END = "<!-- END GENERATED -->"

# Why a name is missing, first match wins: (reason, module regex, name regex).
REASONS = [
    ("TF 2.x / eager-only, or a TF subsystem outside the paper's runtime (Keras, Estimator, "
     "SavedModel, distribution strategies, TPU/XLA, autograph, TFLite)",
     r"^(distribute|feature_column|experimental|autograph|tpu|xla|lite|mixed_precision|"
     r"saved_model|types|ragged|config|profiler|app|flags|test|sysconfig|resource_loader|"
     r"user_ops|version)$", r".*"),
    ("TF 2.x / eager-only, or a TF subsystem outside the paper's runtime (Keras, Estimator, "
     "SavedModel, distribution strategies, TPU/XLA, autograph, TFLite)",
     r".*", r"^(GradientTape|function|Module|.*Spec|TypeSpec|type_spec_from_value|"
     r"RaggedTensor.*|ragged.*|keras|estimator|distribute|autograph|tpu|xla|lite|mlir|"
     r"saved_model|experimental|feature_column|mixed_precision|wrap_function|"
     r"variable_creator_scope|init_scope|is_symbolic_tensor|executing_eagerly_outside_"
     r"functions|vectorized_map|"
     r"nondifferentiable_batch_function|enable_.*|profiler|config|types|sysconfig|app|flags|"
     r"test|resource_loader|user_ops|version|CriticalSection|Checkpoint.*|"
     r"random_index_shuffle|"
     r"TaskLevelStatusMessage)$"),
    ("TF 2.x / eager-only, or a TF subsystem outside the paper's runtime (Keras, Estimator, "
     "SavedModel, distribution strategies, TPU/XLA, autograph, TFLite)",
     r"^(compat|summary|debugging|data|errors)$", r"^(v2|all_v2_summary_ops|initialize|"
     r".*traceback_filtering.*|NumpyIterator|disable_check_numerics|"
     r"raise_exception_on_not_ok_status)$"),
    ("TF 1.x's tf.distributions (deprecated in TF 1.13, removed from TF 2's own API; "
     "TensorFlow Probability replaced it)", r".*", r"^distributions$"),
    ("no TF 2.21 CPU kernel to check against (TF registers these for GPUs only), or a "
     "function that only reads graph nodes dflab never builds",
     r".*", r"^(conv2d_backprop_filter_v2|conv2d_backprop_input_v2|"
     r"get_summary_description)$"),
    ("build and platform facts of the TensorFlow binary, custom C++ op libraries",
     r".*", r"^(VERSION|GIT_VERSION|COMPILER_VERSION|CXX11_ABI_FLAG|CXX_VERSION|"
     r"MONOLITHIC_BUILD|GRAPH_DEF_VERSION.*|load_.*library|raw_ops|check_pinned|"
     r"forward_compatib.*|QUANTIZED_DTYPES)$"),
    ("protocol buffers and formats not offered (graphs and meta graphs are dflab's JSON; "
     "TensorBoard's protos come with tf.summary)",
     r".*", r"^(AttrValue|NameAttrList|MetaGraphDef|TensorInfo|LogMessage|SessionLog|Event|"
     r"HistogramProto|Summary|SummaryMetadata|"
     r"BytesList|Example|Feature|FeatureList|FeatureLists|Features|FloatList|Int64List|"
     r"SequenceExample|ClusterDef|JobDef|ServerDef|generate_checkpoint_state_proto|"
     r"(FixedLen|VarLen|Sparse)(Sequence)?Feature|RaggedFeature|parse_.*|TFRecord.*|"
     r"tf_record_iterator|decode_proto|encode_proto|serialize_.*|deserialize_.*|"
     r"decode_json_example|python_io|summary_iterator)$"),
    ("sparse tensors: TF's fingerprint hashing of crosses",
     r"^sparse$", r".*"),
    ("sparse tensors: TF's fingerprint hashing of crosses",
     r".*", r"^(SparseTensor.*|sparse_.*|.*_sparse|sparse|sparse_placeholder|"
     r"convert_to_tensor_or_sparse_tensor|SparseConditionalAccumulator)$"),
    ("quantized types and ops, bfloat16", r"^quantization$", r".*"),
    ("quantized types and ops, bfloat16", r".*", r"^quantization$"),
    ("quantized types and ops, bfloat16",
     r".*", r"^(q(u)?int.*|bfloat16|to_bfloat16|quantize.*|dequantize|fake_quant.*|"
     r"quantized_.*)$"),
    ("image and audio processing (tf.image, tf.audio), and tf.signal's N-d FFT wrappers "
     "(TF 2.21 runs them on GPUs only)",
     r"^(image|audio|signal|spectral)$", r".*"),
    ("image and audio processing (tf.image, tf.audio), and tf.signal's N-d FFT wrappers "
     "(TF 2.21 runs them on GPUs only)",
     r".*", r"^(.*fft.*|audio|image|signal|"
     r"spectral|decode_(jpeg|png|gif|bmp|image|webp|jxl|and_crop_jpeg)|encode_(jpeg|png)|"
     r"extract_jpeg_shape|is_jpeg)$"),
    ("string ops with ragged results (bytes_split, Unicode decoding and splitting) and "
     "unicode_script (ICU's script table)",
     r"^strings$", r".*"),
    ("string ops with ragged results (bytes_split, Unicode decoding and splitting) and "
     "unicode_script (ICU's script table)",
     r".*", r"^(string_.*|substr|regex_replace|reduce_join|as_string|decode_base64|"
     r"encode_base64|decode_compressed|decode_raw|fingerprint|edit_distance|strings|"
     r"unicode_.*)$"),
    ("the circulant LinearOperators (not built yet)", r"^linalg$", r".*"),
    ("the circulant LinearOperators (not built yet)",
     r".*", r"^(matrix_.*|cholesky.*|qr|svd|self_adjoint_.*|eye|diag|diag_part|trace|cross|"
     r"norm|linalg|adjoint|lu.*|logdet|slogdet|det|inv|pinv|expm|logm|sqrtm|eigh.*|"
     r"eigvalsh|tridiagonal_.*|band_part|set_diag|triangular_solve|solve|lstsq|matvec|"
     r"tensor_diag.*|matrix_rank|normalize|LinearOperator.*)$"),
    ("special functions not built yet (tf.math.special's Bessel J/Y/K, Fresnel, Dawson, "
     "exponential integral and Spence functions; Sobol sequences)",
     r".*", r"^(lgamma|digamma|polygamma|igamma|igammac|betainc|zeta|lbeta|erf|erfc|erfinv|"
     r"erfcinv|ndtri|bessel_.*|special|acos|acosh|asin|asinh|atan|atan2|atanh|cosh|sinh|tan|"
     r"expm1|xlog1py|nextafter|sobol_sample|polyval|cumulative_logsumexp|angle|conj|real|"
     r"imag|complex|log_sigmoid|rint|reciprocal_no_nan|multiply_no_nan|divide_no_nan|"
     r"div_no_nan|xdivy|xlogy)$"),
    ("nn ops not built yet (CTC losses and decoders, fractional pooling, "
     "with_space_to_batch)",
     r".*", r"^(.*candidate_sampler|compute_accidental_hits|nce_loss|sampled_softmax_loss|"
     r"ctc_.*|collapse_repeated|fractional_.*|dilation2d|erosion2d|.*3d.*|conv1d_transpose|"
     r"atrous_.*|depthwise_.*|separable_conv.*|with_space_to_batch|pool|lrn|"
     r"local_response_normalization|max_pool_with_argmax|quantized_.*|approx_.*|"
     r"batch_norm_with_global_normalization|raw_rnn|static_state_saving_rnn|crelu|"
     r"relu_layer|log_poisson_loss|weighted_moments|normalize_moments|"
     r"sufficient_statistics|scale_regularization_loss|compute_average_loss|silu|swish|"
     r"max_pool1d|avg_pool1d|max_pool_v2|avg_pool_v2|conv_transpose|convolution|"
     r"embedding_lookup_sparse|safe_embedding_lookup_sparse)$"),
    ("training utilities not built yet (SDCA, quantized training)",
     r"^train$", r".*"),
]
OTHER = "not built yet"


def missing_names() -> dict[str, list[str]]:
    """``{module: [TF names dflab lacks]}`` (module "tf" is the top level)."""
    import dflab
    from dflab.namespaces import _lookup

    api = json.loads(NAMES.read_text())
    out = {}
    for module, names in sorted(api.items()):
        mod = dflab if module == "tf" else _lookup(dflab, module)
        gone = [n for n in names if mod is None or not hasattr(mod, n)]
        if gone:
            out[module] = gone
    return out


def reason_for(module: str, name: str) -> str:
    for reason, mod_re, name_re in REASONS:
        if re.match(mod_re, module) and re.match(name_re, name):
            return reason
    return OTHER


def generated_section() -> str:
    api = json.loads(NAMES.read_text())
    missing = missing_names()
    total = sum(len(v) for v in api.values())
    absent = sum(len(v) for v in missing.values())
    by_reason: dict[str, dict[str, list[str]]] = {}
    for module, names in missing.items():
        for n in names:
            by_reason.setdefault(reason_for(module, n), {}).setdefault(module, []).append(n)
    lines = [BEGIN, "",
             f"Of the {total} public names of `tf.compat.v1` and the sub-modules listed in "
             f"`tests/compat/tf1_api_names.json`, dflab has {total - absent} and lacks "
             f"{absent}. The missing ones, by reason:", ""]
    order = [r for r, _, _ in REASONS] + [OTHER]
    for reason in sorted(by_reason, key=order.index):
        lines.append(f"### Missing: {reason}")
        lines.append("")
        for module, names in sorted(by_reason[reason].items()):
            prefix = "tf." if module == "tf" else f"tf.{module}."
            shown = ", ".join(f"`{n}`" for n in names)
            lines.append(f"- **{prefix}**: {shown}")
        lines.append("")
    lines.append(END)
    return "\n".join(lines)


def current_section() -> str:
    text = DOC.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[start:end]


def write() -> None:
    text = DOC.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    DOC.write_text(text[:start] + generated_section() + text[end:])


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    if "--write" in sys.argv:
        write()
    else:
        print(generated_section())
