"""TF 1.x's sub-namespaces (``tf.math``, ``tf.random``, ``tf.initializers``, ``tf.dtypes``,
``tf.debugging``, ``tf.linalg``, ``tf.io``, ``tf.logging``, ``tf.gfile``): the same functions
as the top level under the names TF gives them there.

Each namespace is a real module (``import dflab.math`` works) listing the names TF's module of
that name has; a name whose op dflab lacks is simply absent (docs/compat.md lists them). The
lists are data here so that one place says which spelling maps to which function.
"""

from __future__ import annotations

import sys
import types

from dflab.platform import gfile as _gfile
from dflab.platform import tf_logging as _tf_logging

# Names that appear in the namespace exactly as at the top level.
_SAME = {
    "math": """abs accumulate_n acos acosh add add_n angle argmax argmin asin asinh atan atan2
        atanh ceil conj cos cosh count_nonzero cumprod cumsum digamma divide equal erf erfc
        exp expm1 floor floordiv floormod greater greater_equal imag in_top_k
        invert_permutation is_finite is_inf is_nan is_non_decreasing is_strictly_increasing
        l2_normalize lbeta less less_equal lgamma log log1p log_sigmoid log_softmax
        logical_and logical_not logical_or logical_xor maximum minimum mod multiply negative
        not_equal pow real reciprocal reduce_all reduce_any reduce_logsumexp reduce_max
        reduce_mean reduce_min reduce_prod reduce_std reduce_sum reduce_variance rint round
        rsqrt scalar_mul segment_max segment_mean segment_min segment_prod segment_sum sigmoid
        sign sin sinh softmax softplus softsign sqrt square squared_difference subtract tan
        tanh top_k truediv unsorted_segment_max unsorted_segment_mean unsorted_segment_min
        unsorted_segment_prod unsorted_segment_sqrt_n unsorted_segment_sum xdivy xlogy
        zero_fraction""",
    "random": """categorical get_seed multinomial set_random_seed truncated_normal""",
    "dtypes": """DType as_dtype as_string bool cast complex complex128 complex64 double float16
        float32 float64 half int16 int32 int64 int8 resource saturate_cast string uint16
        uint32 uint64 uint8 variant""",
    "debugging": """Assert assert_all_finite assert_equal assert_greater assert_greater_equal
        assert_integer assert_less assert_less_equal assert_near assert_negative
        assert_non_negative assert_non_positive assert_none_equal assert_positive
        assert_proper_iterable assert_rank assert_rank_at_least assert_rank_in
        assert_same_float_dtype assert_scalar assert_shapes assert_type check_numerics
        is_finite is_inf is_nan is_non_decreasing is_numeric_tensor is_strictly_increasing""",
    "linalg": """einsum global_norm l2_normalize matmul matrix_transpose tensordot
        transpose""",
    "queue": """FIFOQueue PaddingFIFOQueue PriorityQueue QueueBase RandomShuffleQueue""",
    "manip": """batch_to_space_nd gather_nd reshape reverse roll scatter_nd space_to_batch_nd
        tile""",
    "io": """FixedLenFeature PaddingFIFOQueue PriorityQueue QueueBase RandomShuffleQueue
        VarLenFeature decode_base64 decode_csv decode_raw encode_base64 matching_files
        read_file serialize_tensor parse_tensor write_file write_graph
        FixedLenSequenceFeature parse_example parse_single_example
        parse_single_sequence_example SparseFeature serialize_sparse serialize_many_sparse
        deserialize_many_sparse""",
}

# Names that are spelled differently at the top level: namespace name -> top-level name.
_RENAMED = {
    "math": {"divide_no_nan": "div_no_nan", "multiply_no_nan": "multiply_no_nan",
             "reciprocal_no_nan": "reciprocal_no_nan", "softplus": "nn.softplus",
             "softsign": "nn.softsign", "log_softmax": "nn.log_softmax",
             "softmax": "nn.softmax", "in_top_k": "nn.in_top_k", "top_k": "nn.top_k",
             "l2_normalize": "nn.l2_normalize", "zero_fraction": "nn.zero_fraction"},
    "random": {"normal": "random_normal", "uniform": "random_uniform",
               "shuffle": "random_shuffle", "gamma": "random_gamma",
               "poisson": "random_poisson", "crop": "random_crop"},
    "initializers": {"constant": "constant_initializer", "zeros": "zeros_initializer",
                     "ones": "ones_initializer", "random_normal": "random_normal_initializer",
                     "random_uniform": "random_uniform_initializer",
                     "truncated_normal": "truncated_normal_initializer",
                     "glorot_normal": "glorot_normal_initializer",
                     "glorot_uniform": "glorot_uniform_initializer",
                     "orthogonal": "orthogonal_initializer",
                     "uniform_unit_scaling": "uniform_unit_scaling_initializer",
                     "variance_scaling": "variance_scaling_initializer",
                     "global_variables": "global_variables_initializer",
                     "local_variables": "local_variables_initializer",
                     "variables": "variables_initializer",
                     "tables_initializer": "tables_initializer",
                     "identity": "identity_initializer", "he_normal": "he_normal",
                     "he_uniform": "he_uniform", "lecun_normal": "lecun_normal",
                     "lecun_uniform": "lecun_uniform"},
    "io": {"gfile": None, "TFRecordWriter": "python_io.TFRecordWriter",
           "TFRecordOptions": "python_io.TFRecordOptions",
           "TFRecordCompressionType": "python_io.TFRecordCompressionType",
           "tf_record_iterator": "python_io.tf_record_iterator",
           "write_graph": "train.write_graph",
           "match_filenames_once": "train.match_filenames_once"},
    "debugging": {"assert_all_finite": "verify_tensor_all_finite"},
}


def _lookup(top, dotted: str):
    obj = top
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _build(name: str, top) -> types.ModuleType:
    mod = types.ModuleType(f"dflab.{name}", f"``tf.{name}``: see dflab.namespaces.")
    for attr in _SAME.get(name, "").split():
        if hasattr(top, attr):
            setattr(mod, attr, getattr(top, attr))
    for attr, source in _RENAMED.get(name, {}).items():
        found = _lookup(top, source) if source is not None else None
        if found is not None:
            setattr(mod, attr, found)
    return mod


def _metrics_module() -> types.ModuleType:
    from dflab.ops import metrics_impl

    mod = types.ModuleType("dflab.metrics", "``tf.metrics``: see dflab.ops.metrics_impl.")
    for name in ("mean", "accuracy", "mean_squared_error", "mean_absolute_error"):
        setattr(mod, name, getattr(metrics_impl, name))
    for name in metrics_impl.METRICS:
        setattr(mod, name, getattr(metrics_impl, name))
    from dflab.ops import metrics_at_k

    for name in metrics_at_k.METRICS:
        setattr(mod, name, getattr(metrics_at_k, name))
    return mod


def install(top) -> None:
    """Attach the namespaces to the package ``top`` and register them as modules."""
    for name in sorted(set(_SAME) | set(_RENAMED)):
        mod = _build(name, top)
        setattr(top, name, mod)
        sys.modules[mod.__name__] = mod
    top.io.gfile = _gfile
    top.metrics = sys.modules["dflab.metrics"] = _metrics_module()
    for name, mod in (("logging", _tf_logging), ("gfile", _gfile)):
        setattr(top, name, mod)
        sys.modules[f"dflab.{name}"] = mod


# --- the wider TF1 API: names that live in an ops module rather than at the top level --------
# namespace -> {module holding the objects: "names as TF spells them there"}. A namespace that
# does not exist yet (tf.image, tf.sparse, …) is made; one that does gains the names.
_FROM_MODULES = {
    "": {"dflab.train.moving_averages": "moving_average_variables",  # the top level
         "dflab.ops.more_math_ops": "saturate_cast",
         "dflab.platform.tf_logging": "get_logger"},
    "math": {
        "dflab.ops.special_math_ops": """bessel_i0 bessel_i0e bessel_i1 bessel_i1e erfinv
            erfcinv ndtri xlogy xdivy xlog1py multiply_no_nan reciprocal_no_nan nextafter
            polyval divide_no_nan:div_no_nan polygamma zeta igamma igammac betainc""",
        "dflab.ops.more_math_ops": """reduce_std reduce_variance reduce_euclidean_norm""",
        "dflab.ops.sort_ops": "bincount confusion_matrix approx_max_k approx_min_k",
        "dflab.ops.accumulate_ops": "cumulative_logsumexp",
    },
    "spectral": {
        "dflab.ops.fft_ops": """fft ifft fft2d ifft2d fft3d ifft3d rfft irfft rfft2d irfft2d
            rfft3d irfft3d""",
        "dflab.ops.signal_ops": "dct idct",
    },
    "signal": {
        "dflab.ops.fft_ops": """fft ifft fft2d ifft2d fft3d ifft3d rfft irfft rfft2d irfft2d
            rfft3d irfft3d""",
        "dflab.ops.signal_ops": """fftshift ifftshift hann_window hamming_window frame
            overlap_and_add dct idct stft inverse_stft inverse_stft_window_fn vorbis_window
            kaiser_window kaiser_bessel_derived_window linear_to_mel_weight_matrix
            mfccs_from_log_mel_spectrograms mdct inverse_mdct""",
    },
    "bitwise": {
        "dflab.ops.bitwise_ops": """bitwise_and bitwise_or bitwise_xor invert left_shift
            right_shift""",
    },
    "nn": {
        "dflab.ops.candidate_sampling_ops": """uniform_candidate_sampler
            log_uniform_candidate_sampler learned_unigram_candidate_sampler
            fixed_unigram_candidate_sampler all_candidate_sampler compute_accidental_hits""",
        "dflab.ops.sampled_losses": "nce_loss sampled_softmax_loss",
        "dflab.ops.normalization_ops": "lrn local_response_normalization",
        "dflab.ops.sparse_embedding_ops": """embedding_lookup_sparse
            safe_embedding_lookup_sparse""",
        "dflab.ops.sort_ops": "approx_max_k approx_min_k",
    },
    "image": {
        "dflab.ops.image_ops": """ResizeMethod resize resize_images resize_bilinear
            resize_bicubic resize_nearest_neighbor resize_area flip_left_right flip_up_down
            random_flip_left_right random_flip_up_down transpose transpose_image rot90
            crop_to_bounding_box pad_to_bounding_box resize_image_with_crop_or_pad
            resize_with_crop_or_pad central_crop resize_image_with_pad random_crop""",
        "dflab.ops.image_color_ops": """convert_image_dtype adjust_brightness adjust_contrast
            adjust_gamma adjust_hue adjust_saturation random_brightness random_contrast
            random_hue random_saturation rgb_to_hsv hsv_to_rgb rgb_to_yiq yiq_to_rgb
            rgb_to_yuv yuv_to_rgb rgb_to_grayscale grayscale_to_rgb per_image_standardization
            total_variation image_gradients sobel_edges psnr ssim ssim_multiscale""",
        "dflab.ops.image_codec_ops": """decode_png decode_jpeg decode_and_crop_jpeg decode_bmp
            decode_gif decode_webp decode_image encode_png encode_jpeg extract_jpeg_shape
            is_jpeg adjust_jpeg_quality random_jpeg_quality""",
        "dflab.ops.space_ops": "extract_image_patches extract_patches",
        "dflab.ops.image_box_ops": """non_max_suppression non_max_suppression_with_scores
            non_max_suppression_overlaps non_max_suppression_padded
            combined_non_max_suppression crop_and_resize draw_bounding_boxes
            sample_distorted_bounding_box extract_glimpse""",
    },
    "io": {
        "dflab.ops.image_codec_ops": """decode_png decode_jpeg decode_and_crop_jpeg decode_bmp
            decode_gif decode_webp decode_image encode_png encode_jpeg extract_jpeg_shape
            is_jpeg""",
        "dflab.ops.string_ops": "decode_compressed",
    },
    "strings": {
        "dflab.ops.string_ops": """as_string join length lower upper strip substr reduce_join
            regex_full_match regex_replace to_number unicode_transcode
            unsorted_segment_join format""",
        "dflab.ops.sparse_text_ops": "split:strings_split",
        "dflab.ops.string_hash_ops": """to_hash_bucket:string_to_hash_bucket
            to_hash_bucket_fast:string_to_hash_bucket_fast
            to_hash_bucket_strong:string_to_hash_bucket_strong""",
        "dflab.ops.string_sequence_ops": "ngrams unicode_encode",
    },
    "linalg": {
        "dflab.ops.matrix_ops": """adjoint band_part cross diag:matrix_diag
            diag_part:matrix_diag_part eye matvec norm normalize set_diag:matrix_set_diag
            tensor_diag:diag tensor_diag_part:diag_part trace""",
        "dflab.ops.linalg_solve_ops": """cholesky cholesky_solve det:matrix_determinant
            eigh:self_adjoint_eig eigvalsh:self_adjoint_eigvals expm inv:matrix_inverse logdet
            logm
            lstsq:matrix_solve_ls lu lu_matrix_inverse lu_reconstruct lu_solve matrix_rank
            pinv qr slogdet solve:matrix_solve sqrtm:matrix_square_root svd
            triangular_solve:matrix_triangular_solve""",
        "dflab.ops.nn_impl": "l2_normalize",
        "dflab.ops.linear_operator": "LinearOperator",
        "dflab.ops.linear_operator_basic": """LinearOperatorFullMatrix LinearOperatorDiag
            LinearOperatorLowerTriangular LinearOperatorHouseholder LinearOperatorPermutation
            LinearOperatorToeplitz""",
        "dflab.ops.linear_operator_identity": """LinearOperatorIdentity
            LinearOperatorScaledIdentity LinearOperatorZeros""",
        "dflab.ops.linear_operator_structured": """LinearOperatorAdjoint
            LinearOperatorInversion LinearOperatorComposition LinearOperatorKronecker""",
        "dflab.ops.linear_operator_block": """LinearOperatorBlockDiag
            LinearOperatorBlockLowerTriangular LinearOperatorLowRankUpdate""",
        "dflab.ops.tridiagonal_ops": """LinearOperatorTridiag tridiagonal_matmul
            tridiagonal_solve eigh_tridiagonal""",
    },
    "nn.rnn_cell": {
        "dflab.ops.rnn_cell_wrappers": "DropoutWrapper ResidualWrapper DeviceWrapper",
    },
    "sparse": {
        "dflab.ops.sparse_ops": """SparseTensor add:sparse_add concat:sparse_concat
            fill_empty_rows:sparse_fill_empty_rows maximum:sparse_maximum
            minimum:sparse_minimum reduce_max:sparse_reduce_max
            reduce_max_sparse:sparse_reduce_max_sparse reduce_sum:sparse_reduce_sum
            reduce_sum_sparse:sparse_reduce_sum_sparse reorder:sparse_reorder
            reshape:sparse_reshape segment_mean:sparse_segment_mean
            segment_sqrt_n:sparse_segment_sqrt_n segment_sum:sparse_segment_sum
            slice:sparse_slice softmax:sparse_softmax split:sparse_split
            matmul:sparse_tensor_dense_matmul sparse_dense_matmul:sparse_tensor_dense_matmul
            to_dense:sparse_tensor_to_dense bincount:sparse_bincount""",
        "dflab.ops.sparse_compose_ops": """expand_dims:sparse_expand_dims eye:sparse_eye
            from_dense mask:sparse_mask merge:sparse_merge placeholder:sparse_placeholder
            reset_shape:sparse_reset_shape retain:sparse_retain
            to_indicator:sparse_to_indicator transpose:sparse_transpose""",
        "dflab.ops.sparse_text_ops": "cross:sparse_cross",
        "dflab.ops.accumulator_ops": "SparseConditionalAccumulator",
    },
    "sets": {
        "dflab.ops.sets_ops": """set_difference set_intersection set_size set_union
            difference:set_difference intersection:set_intersection size:set_size
            union:set_union""",
    },
    "random": {
        "dflab.ops.candidate_sampling_ops": """uniform_candidate_sampler
            log_uniform_candidate_sampler learned_unigram_candidate_sampler
            fixed_unigram_candidate_sampler all_candidate_sampler""",
        "dflab.ops.stateless_random_ops": """categorical stateless_uniform stateless_normal
            stateless_truncated_normal stateless_categorical stateless_multinomial split
            fold_in Algorithm stateless_gamma stateless_poisson stateless_binomial
            stateless_parameterized_truncated_normal create_rng_state""",
        "dflab.ops.stateful_random_ops": """Generator get_global_generator
            set_global_generator""",
    },
    "initializers": {
        "dflab.ops.init_ops": "he_normal he_uniform lecun_normal lecun_uniform identity:Identity",
    },
    "debugging": {
        "dflab.runtime.config": "get_log_device_placement set_log_device_placement",
        "dflab.ops.check_ops": "assert_shapes",
    },
    "lookup": {
        "dflab.ops.lookup_ops": """KeyValueTensorInitializer StaticHashTable TextFileIndex
            TextFileInitializer StaticVocabularyTable""",
    },
    "nest": {
        "dflab.framework.nest": """assert_same_structure flatten is_nested map_structure
            pack_sequence_as""",
    },
}


def _names(spec: str):
    """``"a b:c"`` -> [("a", "a"), ("b", "c")]: (name in the namespace, attribute)."""
    for item in spec.split():
        name, _, attr = item.partition(":")
        yield name, attr or name


def install_more(top) -> None:
    """Attach the names of ``_FROM_MODULES`` (after ``install``)."""
    import importlib

    for ns, sources in _FROM_MODULES.items():
        mod = _lookup(top, ns) if ns else top
        if mod is None:
            mod = types.ModuleType(f"dflab.{ns}", f"``tf.{ns}``: see dflab.namespaces.")
            setattr(top, ns, mod)
            sys.modules[mod.__name__] = mod
        for module_name, spec in sources.items():
            source = importlib.import_module(module_name)
            for name, attr in _names(spec):
                setattr(mod, name, getattr(source, attr))


def refill(top) -> None:
    """Give each namespace of ``_SAME``/``_RENAMED`` the names the top level has gained
    since ``install`` (those ``install_more`` attached there)."""
    for name in sorted(set(_SAME) | set(_RENAMED)):
        mod = getattr(top, name)
        for attr in _SAME.get(name, "").split():
            if not hasattr(mod, attr) and hasattr(top, attr):
                setattr(mod, attr, getattr(top, attr))
        for attr, source in _RENAMED.get(name, {}).items():
            found = _lookup(top, source) if source is not None else None
            if found is not None and not hasattr(mod, attr):
                setattr(mod, attr, found)
