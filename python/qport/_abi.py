"""ctypes declarations of api/qport.h: the structs and the functions the
package calls. Nothing here computes; every layout mirrors the header field
for field (tests/test_abi.py compiles a C program that prints the real
offsets and compares them)."""
from __future__ import annotations

import ctypes as C

from ._lib import load_library

c_int, c_size_t, c_char_p, c_void_p = C.c_int, C.c_size_t, C.c_char_p, C.c_void_p
c_float, c_int64, c_uint64 = C.c_float, C.c_int64, C.c_uint64

QP_NAME_MAX = 64
QP_TENSOR_MAX_DIMS = 4
QP_CAPABILITY_NONE = -1

# qp_status (qport.h)
QP_OK = 0
STATUS_NAMES = (
    "QP_OK", "QP_ERR_INVALID_ARGUMENT", "QP_ERR_IO", "QP_ERR_PARSE", "QP_ERR_UNSUPPORTED", "QP_ERR_VALUE",
    "QP_ERR_NOT_IMPLEMENTED", "QP_ERR_CAPABILITY", "QP_ERR_OUT_OF_MEMORY", "QP_ERR_NOT_FOUND", "QP_ERR_DEVICE",
    "QP_ERR_INTERNAL",
)

# qp_dtype, in enum order; the names are qp_dtype_name's
DTYPES = ("none", "f32", "f16", "bf16", "fp8_e4m3fn", "fp8_e4m3fnuz", "fp8_e5m2", "fp6_e2m3", "fp6_e3m2",
          "fp4_e2m1", "e8m0", "int8", "uint8", "int4", "uint4", "int32", "int64")
DT = {name: i for i, name in enumerate(DTYPES)}

LAYER_KINDS = ("linear", "attention", "moe")
DIALECTS = ("vllm", "sglang")
PACK_METHODS = (None, "order", "reorder", "marlin_qqq")
MOE_SCORING = ("softmax", "sigmoid")
# qp_method and qp_moe_layers, in enum order
METHODS = ("quark", "quark_online", "qqq", "fp8", "compressed-tensors")
MOE_LAYER_RULES = ("all", "deepseek", "step")


class ErrorInfo(C.Structure):
    _fields_ = [("status", c_int), ("exception", c_char_p), ("message", c_char_p), ("file", c_char_p),
                ("key_path", c_char_p), ("layer", c_char_p)]


class PackedModule(C.Structure):
    _fields_ = [("fused", c_char_p), ("shards", C.POINTER(c_char_p)), ("n_shards", c_size_t)]


class ArchInfo(C.Structure):
    _fields_ = [("struct_size", c_size_t), ("known", c_int), ("name", c_char_p), ("packed", C.POINTER(PackedModule)),
                ("n_packed", c_size_t), ("moe_block", c_char_p), ("experts", c_char_p),
                ("expert_proj", c_char_p * 3), ("router", c_char_p), ("router_quantized", c_int),
                ("shared_experts", c_char_p), ("shared_expert_gate", c_char_p), ("scoring", c_int),
                ("grouped_topk", c_int), ("correction_bias", c_int), ("renormalize", c_int),
                ("num_experts_key", c_char_p), ("moe_intermediate_key", c_char_p), ("num_experts", C.c_longlong),
                ("moe_intermediate_size", C.c_longlong), ("moe_layer_rule", c_int),
                ("first_k_dense_replace", C.c_longlong), ("moe_layer_freq", C.c_longlong), ("note", c_char_p)]


class SchemeKindInfo(C.Structure):
    _fields_ = [("struct_size", c_size_t), ("name", c_char_p), ("family", c_char_p), ("linear", c_int),
                ("moe", c_int), ("exact", c_int), ("moe_refusal", c_char_p), ("tensors", c_char_p),
                ("classes", c_char_p)]


class ResolveOptions(C.Structure):
    _fields_ = [("struct_size", c_size_t), ("capability", c_int), ("dialect", c_int),
                ("packed", C.POINTER(PackedModule)), ("n_packed", c_size_t), ("model_type", c_char_p),
                ("layer_class", c_char_p)]


class QTensor(C.Structure):
    _fields_ = [("dtype", c_int), ("granularity", c_int), ("group_size", c_int), ("block", c_int * 2),
                ("symmetric", c_int), ("dynamic", c_int), ("scale_dtype", c_int), ("scale2_dtype", c_int)]


class Scheme(C.Structure):
    _fields_ = [("struct_size", c_size_t), ("kind", c_int), ("weight", QTensor), ("activation", QTensor),
                ("pack_method", c_int), ("min_capability", c_int), ("out_dtype_fixed", c_int),
                ("method", C.c_char * QP_NAME_MAX), ("scheme_class", C.c_char * QP_NAME_MAX),
                ("weight_key", C.c_char * QP_NAME_MAX), ("activation_key", C.c_char * QP_NAME_MAX),
                ("kv_cache", QTensor)]


class ConfigSummary(C.Structure):
    _fields_ = [("method", c_int), ("n_layer_patterns", c_size_t), ("n_excludes", c_size_t),
                ("pack_method", c_char_p), ("model_type", c_char_p), ("file", c_char_p)]


class Tensor(C.Structure):
    _fields_ = [("name", c_char_p), ("dtype", c_int), ("ndim", c_int), ("shape", c_int64 * QP_TENSOR_MAX_DIMS),
                ("data", c_void_p)]


class DeviceCaps(C.Structure):
    _fields_ = [(n, c_int) for n in ("int8_storage", "int8_arith", "fp16_arith", "bf16", "int_dot",
                                     "int_dot_accelerated", "tensor_core_int8", "tensor_core_fp8",
                                     "subgroup_min", "subgroup_max")] + \
               [(n, c_int64) for n in ("shared_mem_bytes", "max_buffer_bytes", "max_alloc_bytes")]


class DeviceInfo(C.Structure):
    _fields_ = [("struct_size", c_size_t), ("backend", C.c_char * 16), ("index", c_int), ("name", C.c_char * 128),
                ("vendor", C.c_char * 64), ("driver", C.c_char * 128), ("api_version", C.c_char * 32),
                ("kind", c_int), ("memory_bytes", c_uint64), ("uuid", C.c_uint8 * 16), ("has_uuid", c_int),
                ("cuda_cc", c_int), ("same_as", C.c_char * 24), ("caps", DeviceCaps)]


class SupportInfo(C.Structure):
    _fields_ = [("level", c_int), ("reason", C.c_char * 256)]


class BackendStatus(C.Structure):
    _fields_ = [("name", c_char_p), ("path", c_char_p), ("loaded", c_int), ("n_devices", c_int), ("note", c_char_p)]


class LinearOptions(C.Structure):
    _fields_ = [("struct_size", c_size_t), ("act_dtype", c_int), ("path", C.c_uint), ("layer", c_char_p),
                ("shard_rows", C.POINTER(c_int)), ("n_shards", c_size_t), ("act_ue8m0", c_int),
                ("max_m", c_int)]


class BindOptions(C.Structure):
    _fields_ = [("struct_size", c_size_t), ("resolve", C.POINTER(ResolveOptions)), ("tp_size", c_int),
                ("tp_rank", c_int), ("ep_size", c_int), ("ep_rank", c_int)]


class LayerBinding(C.Structure):
    _fields_ = [("layer", C.c_char * 256), ("scheme", Scheme), ("N", c_int), ("K", c_int), ("tensors", Tensor * 16),
                ("n_tensors", c_size_t), ("shard_rows", c_int * 8), ("n_shards", c_size_t),
                ("owned_", c_void_p * 16), ("names_", (C.c_char * 48) * 16)]


class MoeOptions(C.Structure):
    _fields_ = [("struct_size", c_size_t), ("act_dtype", c_int), ("layer", c_char_p), ("top_k", c_int),
                ("renormalize", c_int), ("num_expert_group", c_int), ("topk_group", c_int), ("scoring", c_int),
                ("routed_scaling_factor", c_float), ("e_score_correction_bias", C.POINTER(c_float)),
                ("global_num_experts", c_int), ("expert_offset", c_int), ("max_m", c_int)]


class MoeBinding(C.Structure):
    _fields_ = [("layer", C.c_char * 256), ("scheme", Scheme), ("E", c_int), ("H", c_int), ("I", c_int),
                ("global_num_experts", c_int), ("expert_offset", c_int), ("tensors", Tensor * 8),
                ("n_tensors", c_size_t), ("router", C.c_char * 256), ("owned_", c_void_p * 8)]


class QuantizeOptions(C.Structure):
    _fields_ = [("struct_size", c_size_t), ("params_dtype", c_int), ("calib", C.POINTER(c_float)),
                ("calib_rows", c_size_t), ("input_absmax", c_float), ("scale_dtype", c_int),
                ("sym_zero_points", c_int)]


# qp_native_api
NATIVE_APIS = ("none", "host", "vulkan", "opencl", "cuda")
NATIVE = {name: i for i, name in enumerate(NATIVE_APIS)}
c_uint32 = C.c_uint32


class DeviceImportDesc(C.Structure):
    _fields_ = [("struct_size", c_size_t), ("api", c_int), ("vk_instance", c_void_p),
                ("vk_physical_device", c_void_p), ("vk_device", c_void_p), ("vk_queue_family", c_uint32),
                ("vk_queue", c_void_p), ("vk_get_instance_proc_addr", c_void_p), ("vk_enabled_features", c_void_p),
                ("vk_enabled_extensions", C.POINTER(c_char_p)), ("vk_n_enabled_extensions", c_uint32),
                ("cl_context", c_void_p), ("cl_device", c_void_p), ("cl_queue", c_void_p), ("cuda_device", c_int),
                ("cuda_stream", c_void_p)]


class DeviceNative(C.Structure):
    _fields_ = [("struct_size", c_size_t), ("api", c_int), ("imported", c_int), ("vk_instance", c_void_p),
                ("vk_physical_device", c_void_p), ("vk_device", c_void_p), ("vk_queue", c_void_p),
                ("vk_queue_family", c_uint32), ("cl_context", c_void_p), ("cl_device", c_void_p),
                ("cl_queue", c_void_p), ("cuda_device", c_int), ("cuda_stream", c_void_p)]


class BufferImportDesc(C.Structure):
    _fields_ = [("struct_size", c_size_t), ("vk_buffer", c_void_p), ("cl_mem", c_void_p), ("cuda_ptr", c_void_p),
                ("host_ptr", c_void_p), ("offset", c_size_t), ("size", c_size_t)]


class BufferNative(C.Structure):
    _fields_ = [("struct_size", c_size_t), ("api", c_int), ("imported", c_int), ("vk_buffer", c_void_p),
                ("cl_mem", c_void_p), ("ptr", c_void_p), ("offset", c_size_t), ("size", c_size_t)]


class EnqueueSync(C.Structure):
    _fields_ = [("struct_size", c_size_t), ("vk_wait_semaphore", c_void_p), ("vk_wait_value", c_uint64),
                ("vk_signal_semaphore", c_void_p), ("vk_signal_value", c_uint64), ("vk_command_buffer", c_void_p),
                ("cl_wait_list", C.POINTER(c_void_p)), ("cl_n_wait", c_uint32), ("cl_out_event", C.POINTER(c_void_p)),
                ("cuda_wait_event", c_void_p), ("cuda_record_event", c_void_p)]


class DeviceStats(C.Structure):
    _fields_ = [("struct_size", c_size_t), ("host_waits", c_uint64), ("submissions", c_uint64),
                ("allocations", c_uint64)]


P = C.POINTER
vp = c_void_p
# name: (restype, argtypes). Handles are opaque void pointers; status returns are ints.
_PROTOS = {
    "qp_version": (c_char_p, []),
    "qp_status_str": (c_char_p, [c_int]),
    "qp_status_exception": (c_char_p, [c_int]),
    "qp_context_create": (c_int, [P(vp)]),
    "qp_context_destroy": (None, [vp]),
    "qp_last_error": (c_char_p, [vp]),
    "qp_last_error_info": (c_int, [vp, P(ErrorInfo)]),
    "qp_config_load_file": (c_int, [vp, c_char_p, P(vp)]),
    "qp_config_load_buffer": (c_int, [vp, c_char_p, c_char_p, c_size_t, P(vp)]),
    "qp_config_destroy": (None, [vp]),
    "qp_config_method": (c_int, [vp]),
    "qp_method_name": (c_char_p, [c_int]),
    "qp_resolve_options_init": (None, [P(ResolveOptions)]),
    "qp_config_resolve": (c_int, [vp, c_char_p, c_int, P(ResolveOptions), P(Scheme)]),
    "qp_config_layer_shards": (c_int, [vp, c_char_p, P(ResolveOptions), P(P(c_char_p)), P(c_size_t), P(c_char_p)]),
    "qp_scheme_check_capability": (c_int, [vp, P(Scheme), c_int]),
    "qp_config_kv_cache": (c_int, [vp, P(QTensor)]),
    "qp_config_summarize": (c_int, [vp, P(ConfigSummary)]),
    "qp_config_layer_pattern": (c_char_p, [vp, c_size_t]),
    "qp_config_exclude": (c_char_p, [vp, c_size_t]),
    "qp_config_resolve_global": (c_int, [vp, P(ResolveOptions), P(Scheme)]),
    "qp_config_resolve_pattern": (c_int, [vp, c_size_t, P(ResolveOptions), P(Scheme)]),
    "qp_config_map_scale_name": (c_int, [vp, c_char_p, vp, c_size_t]),
    "qp_scheme_kind_name": (c_char_p, [c_int]),
    "qp_scheme_kind_describe": (c_int, [c_int, P(SchemeKindInfo)]),
    "qp_dtype_name": (c_char_p, [c_int]),
    "qp_granularity_name": (c_char_p, [c_int]),
    "qp_tensor_bytes": (c_size_t, [P(Tensor)]),
    "qp_device_kind_name": (c_char_p, [c_int]),
    "qp_support_level_name": (c_char_p, [c_int]),
    "qp_device_count": (c_int, [vp, P(c_size_t)]),
    "qp_device_get": (c_int, [vp, c_size_t, P(vp)]),
    "qp_device_find": (c_int, [vp, c_char_p, P(vp)]),
    "qp_device_get_info": (c_int, [vp, P(DeviceInfo)]),
    "qp_device_supports": (c_int, [vp, P(Scheme), c_int, c_int, c_int, P(SupportInfo)]),
    "qp_device_pick": (c_int, [vp, P(Scheme), P(vp)]),
    "qp_device_synchronize": (c_int, [vp]),
    "qp_backend_get_status": (c_int, [vp, c_size_t, P(BackendStatus)]),
    "qp_buffer_create": (c_int, [vp, c_size_t, P(vp)]),
    "qp_buffer_destroy": (None, [vp]),
    "qp_buffer_upload": (c_int, [vp, c_size_t, vp, c_size_t]),
    "qp_buffer_download": (c_int, [vp, c_size_t, vp, c_size_t]),
    "qp_linear_options_init": (None, [P(LinearOptions)]),
    "qp_linear_create": (c_int, [vp, P(Scheme), c_int, c_int, P(Tensor), c_size_t, P(LinearOptions), P(vp)]),
    "qp_linear_destroy": (None, [vp]),
    "qp_linear_forward": (c_int, [vp, vp, c_int, vp]),
    "qp_linear_out_dtype": (c_int, [vp]),
    "qp_linear_describe": (c_int, [vp, c_int, vp, c_size_t]),
    "qp_kv_quantize": (c_int, [vp, c_int, vp, c_size_t, c_float, vp]),
    "qp_kv_dequantize": (c_int, [vp, c_int, vp, c_size_t, c_float, vp]),
    "qp_ref_kv_quantize": (c_int, [vp, c_int, vp, c_size_t, c_float, vp]),
    "qp_ref_kv_dequantize": (c_int, [vp, c_int, vp, c_size_t, c_float, vp]),
    "qp_model_open": (c_int, [vp, c_char_p, P(vp)]),
    "qp_model_close": (None, [vp]),
    "qp_model_config": (vp, [vp]),
    "qp_model_dtype": (c_int, [vp]),
    "qp_model_find_tensor": (c_int, [vp, c_char_p, P(Tensor)]),
    "qp_model_tensor_count": (c_size_t, [vp]),
    "qp_model_tensor_get": (c_int, [vp, c_size_t, P(Tensor)]),
    "qp_model_kv_scales": (c_int, [vp, c_char_p, P(c_float), P(c_float)]),
    "qp_model_layer_count": (c_size_t, [vp]),
    "qp_model_layer_name": (c_char_p, [vp, c_size_t]),
    "qp_model_moe_count": (c_size_t, [vp]),
    "qp_model_moe_name": (c_char_p, [vp, c_size_t]),
    # model architectures
    "qp_config_arch": (c_int, [vp, P(ArchInfo)]),
    "qp_model_arch": (c_int, [vp, P(ArchInfo)]),
    "qp_arch_lookup": (c_int, [c_char_p, c_char_p, P(ArchInfo)]),
    "qp_arch_count": (c_size_t, []),
    "qp_arch_name": (c_char_p, [c_size_t]),
    "qp_arch_model_types": (c_char_p, [c_size_t]),
    "qp_arch_module_class": (c_int, [P(ArchInfo), c_char_p]),
    "qp_arch_module_class_vllm": (c_int, [P(ArchInfo), c_int, c_char_p]),
    "qp_arch_layer_is_moe": (c_int, [P(ArchInfo), C.c_long]),
    "qp_method_quantizes": (c_int, [c_int, c_int]),
    "qp_module_class_name": (c_char_p, [c_int]),
    "qp_bind_options_init": (None, [P(BindOptions)]),
    "qp_model_bind_layer": (c_int, [vp, c_char_p, P(BindOptions), P(LayerBinding)]),
    "qp_layer_binding_free": (None, [P(LayerBinding)]),
    "qp_model_bind_moe": (c_int, [vp, c_char_p, P(BindOptions), P(MoeBinding)]),
    "qp_moe_binding_free": (None, [P(MoeBinding)]),
    "qp_model_layer_unquantized": (c_int, [vp, c_char_p]),
    "qp_model_moe_options": (c_int, [vp, c_char_p, P(MoeOptions)]),
    "qp_moe_options_init": (None, [P(MoeOptions)]),
    "qp_moe_route": (c_int, [vp, vp, c_int, c_int, P(MoeOptions), vp, vp]),
    "qp_moe_create": (c_int, [vp, P(Scheme), c_int, c_int, c_int, P(Tensor), c_size_t, P(MoeOptions), P(vp)]),
    "qp_moe_forward": (c_int, [vp, vp, c_int, vp, vp]),
    "qp_moe_forward_topk": (c_int, [vp, vp, c_int, vp, vp, vp]),
    "qp_moe_destroy": (None, [vp]),
    "qp_device_supports_moe": (c_int, [vp, P(Scheme), P(SupportInfo)]),
    "qp_moe_describe": (None, [vp, c_int, vp, c_size_t]),
    "qp_quantize_options_init": (None, [P(QuantizeOptions)]),
    "qp_quantize_weights": (c_int, [vp, P(Scheme), vp, c_int, c_int, P(QuantizeOptions), P(vp)]),
    "qp_qweights_count": (c_size_t, [vp]),
    "qp_qweights_get": (c_int, [vp, c_size_t, P(Tensor)]),
    "qp_qweights_destroy": (None, [vp]),
    "qp_format_encode_array": (c_int, [c_int, vp, c_size_t, vp]),
    "qp_format_decode_array": (c_int, [c_int, vp, c_size_t, vp]),
    # embedding: the application's devices and memory, enqueue, events
    "qp_buffer_size": (c_size_t, [vp]),
    "qp_buffer_copy": (c_int, [vp, c_size_t, vp, c_size_t, c_size_t]),
    "qp_device_import_desc_init": (None, [P(DeviceImportDesc)]),
    "qp_device_import": (c_int, [vp, P(DeviceImportDesc), P(vp)]),
    "qp_device_release": (None, [vp]),
    "qp_device_get_native": (c_int, [vp, P(DeviceNative)]),
    "qp_device_flush": (c_int, [vp]),
    "qp_device_get_stats": (c_int, [vp, P(DeviceStats)]),
    "qp_buffer_import_desc_init": (None, [P(BufferImportDesc)]),
    "qp_buffer_import": (c_int, [vp, P(BufferImportDesc), P(vp)]),
    "qp_buffer_get_native": (c_int, [vp, P(BufferNative)]),
    "qp_enqueue_sync_init": (None, [P(EnqueueSync)]),
    "qp_linear_enqueue": (c_int, [vp, vp, c_int, vp, P(EnqueueSync)]),
    "qp_moe_enqueue": (c_int, [vp, vp, c_int, vp, vp, vp, P(EnqueueSync)]),
    "qp_moe_enqueue_logits": (c_int, [vp, vp, c_int, vp, vp, P(EnqueueSync)]),
    "qp_event_record": (c_int, [vp, P(vp)]),
    "qp_event_wait": (c_int, [vp]),
    "qp_event_query": (c_int, [vp, P(c_int)]),
    "qp_event_destroy": (None, [vp]),
}


def _declare(lib: C.CDLL) -> C.CDLL:
    for name, (res, args) in _PROTOS.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    return lib


lib = _declare(load_library())


def s(b: bytes | None) -> str:
    """A C string (or char array) as str; None stays None."""
    return b.decode("utf-8", "replace") if b is not None else None  # type: ignore[return-value]
