/*
 * fp8moe.h — the public C ABI of the fp8moe plugin (fused FP8 Mixture-of-Experts).
 *
 * This is the only header a host compiles against. It is self-contained (<stddef.h>, <stdint.h>),
 * C99-compatible, and holds no CUDA or C++ types: a CUDA stream travels as `void*`.
 *
 * How a host uses it:
 *   1. dlopen("libfp8moe.so.1") and dlsym("fp8moe_get_api")          (the one exported symbol)
 *   2. fill an fp8moe_negotiation with the ABI range it speaks and call fp8moe_get_api()
 *   3. through the returned table: context_create → query_* → run … → context_destroy
 *
 * Evolution rules (docs/ABI.md has the long form):
 *   - Every enum value and every struct field offset in this file is pinned for ABI major 1; the offsets
 *     are checked by the static assertions at the end of this file.
 *   - Structs that start with `struct_size` only grow at their end. The plugin reads only the bytes the
 *     caller's `struct_size` covers and uses the documented default for every field past it.
 *   - The function table only grows at its end; a host calls only entries of the minor it negotiated.
 *   - Info structs handed out in arrays (fp8moe_*_info) are frozen for major 1; new facts come as new
 *     arrays appended to fp8moe_capabilities.
 */
#ifndef FP8MOE_H
#define FP8MOE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------------
 * Versions. The library version (semver) and the ABI version are separate: the ABI major is the SONAME.
 * The runtime values come from fp8moe_api.get_version / fp8moe_negotiation, so a host can compare what it
 * was built against with what it loaded.
 * ------------------------------------------------------------------------------------------------- */
#define FP8MOE_VERSION_MAJOR 1
#define FP8MOE_VERSION_MINOR 0
#define FP8MOE_VERSION_PATCH 0
#define FP8MOE_VERSION_STRING "1.0.0"

#define FP8MOE_ABI_VERSION_MAJOR 1
#define FP8MOE_ABI_VERSION_MINOR 0

#if defined(_WIN32)
#define FP8MOE_EXPORT __declspec(dllexport)
#elif defined(__GNUC__)
#define FP8MOE_EXPORT __attribute__((visibility("default")))
#else
#define FP8MOE_EXPORT
#endif

/* ---------------------------------------------------------------------------------------------------
 * Status codes (pinned). Every entry point returns one; a non-OK status comes with a message in the
 * caller's error buffer (args.error_message) and in the context's last error.
 * ------------------------------------------------------------------------------------------------- */
#define FP8MOE_STATUS_OK 0
#define FP8MOE_STATUS_INVALID_ARGUMENT 1      /* NULL, wrong rank/shape/stride/alignment, bad value */
#define FP8MOE_STATUS_UNSUPPORTED_DTYPE 2     /* a tensor's dtype is outside the argument's accepted set */
#define FP8MOE_STATUS_UNSUPPORTED 3           /* a combination or size outside the capability table */
#define FP8MOE_STATUS_ABI_MISMATCH 4          /* negotiation refused (see fp8moe_negotiation.refusal) */
#define FP8MOE_STATUS_BACKEND_UNAVAILABLE 5   /* e.g. CUDA asked for, but no driver or device */
#define FP8MOE_STATUS_WORKSPACE_TOO_SMALL 6   /* workspace smaller than query_workspace reports */
#define FP8MOE_STATUS_WRONG_DEVICE 7          /* a tensor lives where the context's backend cannot read it */
#define FP8MOE_STATUS_OUT_OF_MEMORY 8         /* context_create only: run never allocates */
#define FP8MOE_STATUS_DEVICE_ERROR 9          /* a CUDA call failed; the message holds its error string */
#define FP8MOE_STATUS_INTERNAL 10             /* a bug in fp8moe; please report the message */
#define FP8MOE_STATUS_DATA_ERROR 11           /* input data (not its description) is invalid, e.g. an
                                                 out-of-range PRECOMPUTED expert id on the CPU backend */

/* ---------------------------------------------------------------------------------------------------
 * Tensors: layout-compatible with DLPack's DLTensor, so a host may pass a `DLTensor*` unchanged.
 * ------------------------------------------------------------------------------------------------- */
/* DLPack device types used by fp8moe (DLDeviceType values). */
#define FP8MOE_DEVICE_CPU 1           /* host memory */
#define FP8MOE_DEVICE_CUDA 2          /* device memory of device_id */
#define FP8MOE_DEVICE_CUDA_HOST 3     /* pinned host memory: CPU backend accepts it */
#define FP8MOE_DEVICE_CUDA_MANAGED 13 /* managed memory: CUDA backend accepts it */

/* DLPack 1.1 dtype codes (DLDataTypeCode values). */
#define FP8MOE_DTYPE_INT 0
#define FP8MOE_DTYPE_UINT 1
#define FP8MOE_DTYPE_FLOAT 2
#define FP8MOE_DTYPE_BFLOAT 4
#define FP8MOE_DTYPE_FLOAT8_E4M3FN 10
#define FP8MOE_DTYPE_FLOAT8_E5M2 12

typedef struct fp8moe_device {
  int32_t device_type; /* FP8MOE_DEVICE_* (DLDeviceType) */
  int32_t device_id;   /* ordinal; 0 for the CPU */
} fp8moe_device;

typedef struct fp8moe_dtype {
  uint8_t code;   /* FP8MOE_DTYPE_* (DLPack 1.1 code) */
  uint8_t bits;   /* 8, 16, 32 or 64 */
  uint16_t lanes; /* always 1 for fp8moe */
} fp8moe_dtype;

typedef struct fp8moe_tensor {
  void* data;             /* base pointer; element (i…) lives at data + byte_offset + Σ i_d·strides[d]·bytes */
  fp8moe_device device;   /* where data lives */
  int32_t ndim;           /* number of dimensions, 0 for a scalar */
  fp8moe_dtype dtype;     /* element type */
  int64_t* shape;         /* [ndim] extents */
  int64_t* strides;       /* [ndim] strides in elements; NULL = compact row-major */
  uint64_t byte_offset;   /* added to data before indexing */
} fp8moe_tensor;

/* ---------------------------------------------------------------------------------------------------
 * Routing methods, quantization formats, activations, backends, arguments (all pinned, append-only).
 * Values 1000+ are reserved for experimental entries that may change between minors.
 * ------------------------------------------------------------------------------------------------- */
#define FP8MOE_ROUTING_DEFAULT 0           /* softmax over E → top-K; weights are those probabilities */
#define FP8MOE_ROUTING_RENORMALIZE 1       /* top-K on logits → softmax over the K */
#define FP8MOE_ROUTING_DEEPSEEK_V3 2       /* sigmoid + bias, grouped top-K, σ/Σσ × scale */
#define FP8MOE_ROUTING_LLAMA4 3            /* top-1, sigmoid weight applied to the input; K must be 1 */
#define FP8MOE_ROUTING_RENORMALIZE_NAIVE 4 /* softmax over E → top-K → divide by their sum */
#define FP8MOE_ROUTING_TOPK 5              /* top-K on logits; weight = the raw logit */
#define FP8MOE_ROUTING_SIGMOID 6           /* sigmoid → top-K; no renormalization */
#define FP8MOE_ROUTING_SIGMOID_RENORM 7    /* sigmoid → top-K → divide by their sum */
#define FP8MOE_ROUTING_TOPK_SIGMOID 8      /* top-K on logits → sigmoid */
#define FP8MOE_ROUTING_PRECOMPUTED 9       /* the host passes topk_ids and topk_weights */

#define FP8MOE_QUANT_FP8_PER_TENSOR 0  /* one fp32 scale per expert matrix; activation per-tensor */
#define FP8MOE_QUANT_FP8_BLOCK128 1    /* 128×128 weight blocks; 1×128 activation groups (DeepSeek) */
#define FP8MOE_QUANT_FP8_PER_CHANNEL 2 /* one scale per output row; activation per-token */

#define FP8MOE_ACTIVATION_SWIGLU 0 /* silu(gate) · up */
#define FP8MOE_ACTIVATION_GEGLU 1  /* gelu_erf(gate) · up */

#define FP8MOE_GATE_UP_GATE_FIRST 0 /* W13 rows [0,I) are the gate, [I,2I) the up projection */
#define FP8MOE_GATE_UP_UP_FIRST 1   /* W13 rows [0,I) are the up projection, [I,2I) the gate */

#define FP8MOE_BACKEND_AUTO 0 /* CUDA when a usable device is present, otherwise CPU */
#define FP8MOE_BACKEND_CPU 1
#define FP8MOE_BACKEND_CUDA 2

/* fp8moe_moe_args.flags */
#define FP8MOE_FLAG_WEIGHT_ON_INPUT (1u << 0) /* apply the routing weight to the input (K must be 1) */

/* Argument ids: name the tensors of fp8moe_moe_args in capabilities and error messages. */
#define FP8MOE_ARG_HIDDEN_STATES 0
#define FP8MOE_ARG_HIDDEN_SCALE 1
#define FP8MOE_ARG_ROUTER_LOGITS 2
#define FP8MOE_ARG_ROUTING_BIAS 3
#define FP8MOE_ARG_TOPK_IDS 4
#define FP8MOE_ARG_TOPK_WEIGHTS 5
#define FP8MOE_ARG_W13 6
#define FP8MOE_ARG_W13_SCALE 7
#define FP8MOE_ARG_W2 8
#define FP8MOE_ARG_W2_SCALE 9
#define FP8MOE_ARG_A1_SCALE 10
#define FP8MOE_ARG_A2_SCALE 11
#define FP8MOE_ARG_OUTPUT 12
#define FP8MOE_ARG_ROUTING_IDS_OUT 13
#define FP8MOE_ARG_ROUTING_WEIGHTS_OUT 14
#define FP8MOE_ARG_DEVICE_STATUS 15
#define FP8MOE_ARG_COUNT_V1_0 16

/* ---------------------------------------------------------------------------------------------------
 * Negotiation — the one exported function.
 * The host states the ABI major it speaks and the range of minors it accepts. The plugin accepts when the
 * majors match and its newest minor is ≥ host_min_minor; the agreed minor is min(plugin minor,
 * host_max_minor). Otherwise it returns FP8MOE_STATUS_ABI_MISMATCH with a refusal code and message.
 * ------------------------------------------------------------------------------------------------- */
#define FP8MOE_REFUSAL_NONE 0
#define FP8MOE_REFUSAL_MAJOR_MISMATCH 1   /* host_abi_major != plugin's major */
#define FP8MOE_REFUSAL_PLUGIN_TOO_OLD 2   /* plugin's newest minor < host_min_minor */
#define FP8MOE_REFUSAL_BAD_RANGE 3        /* host_min_minor > host_max_minor */
#define FP8MOE_REFUSAL_STRUCT_TOO_SMALL 4 /* struct_size does not cover the fields up to `refusal` */
#define FP8MOE_REFUSAL_NULL_ARGUMENT 5    /* negotiation or api pointer is NULL */

#define FP8MOE_MESSAGE_CAPACITY 256

typedef struct fp8moe_negotiation {
  size_t struct_size;      /* in: sizeof(fp8moe_negotiation) as the host compiled it */
  uint32_t host_abi_major; /* in: FP8MOE_ABI_VERSION_MAJOR of the host */
  uint32_t host_min_minor; /* in: oldest ABI minor the host can work with */
  uint32_t host_max_minor; /* in: newest ABI minor the host knows (its FP8MOE_ABI_VERSION_MINOR) */
  uint32_t plugin_abi_major; /* out: the plugin's ABI major */
  uint32_t plugin_abi_minor; /* out: the plugin's newest ABI minor */
  uint32_t agreed_minor;     /* out: the minor both sides use; valid when the call returns OK */
  int32_t refusal;           /* out: FP8MOE_REFUSAL_*, FP8MOE_REFUSAL_NONE on success */
  char message[FP8MOE_MESSAGE_CAPACITY]; /* out: why it was refused (NUL-terminated, truncated to fit) */
  /* fields are only appended after this line */
} fp8moe_negotiation;

struct fp8moe_api;
typedef int32_t (*fp8moe_get_api_fn)(fp8moe_negotiation* negotiation, const struct fp8moe_api** api);

/* Returns FP8MOE_STATUS_OK and sets *api to the plugin's function table, or FP8MOE_STATUS_ABI_MISMATCH
 * (or INVALID_ARGUMENT for NULL/short structs) and sets *api to NULL when api is not NULL. */
FP8MOE_EXPORT int32_t fp8moe_get_api(fp8moe_negotiation* negotiation, const struct fp8moe_api** api);

/* ---------------------------------------------------------------------------------------------------
 * Context creation.
 * ------------------------------------------------------------------------------------------------- */
typedef struct fp8moe_context fp8moe_context; /* opaque; one per backend and device */

typedef struct fp8moe_context_args {
  size_t struct_size;        /* sizeof(fp8moe_context_args) as the host compiled it */
  char* error_message;       /* optional buffer for the reason of a non-OK status; default NULL */
  size_t error_message_size; /* its size in bytes; default 0 */
  int32_t backend;           /* FP8MOE_BACKEND_*; default AUTO */
  int32_t device_ordinal;    /* CUDA device ordinal, >= 0 with AUTO/CUDA; any value (e.g. -1) with CPU; default 0 */
  int32_t num_threads;       /* CPU worker threads; 0 = online cores; default 0 */
  uint32_t flags;            /* reserved, must be 0; default 0 */
  /* fields are only appended after this line */
} fp8moe_context_args;

#define FP8MOE_NAME_CAPACITY 128

typedef struct fp8moe_context_info {
  size_t struct_size;      /* in: sizeof as the host compiled it; the plugin fills what it covers */
  int32_t backend;         /* FP8MOE_BACKEND_CPU or _CUDA: what AUTO resolved to */
  int32_t device_ordinal;  /* CUDA ordinal, or -1 for the CPU backend */
  int32_t num_threads;     /* CPU worker threads, or 0 */
  int32_t graph_capturable; /* 1 when run may be captured into a CUDA graph */
  int32_t sm_count;        /* CUDA multiprocessors, or 0 */
  int32_t compute_capability; /* major·10 + minor, e.g. 90; 0 for the CPU */
  char device_name[FP8MOE_NAME_CAPACITY]; /* e.g. "NVIDIA H200" or the CPU backend's description */
  /* fields are only appended after this line */
} fp8moe_context_info;

typedef struct fp8moe_backend_info {
  size_t struct_size;     /* in: sizeof as the host compiled it */
  int32_t backend;        /* in: FP8MOE_BACKEND_CPU or _CUDA */
  int32_t available;      /* out: 1 when context_create would succeed for device 0 */
  int32_t device_count;   /* out: devices this backend sees (1 for the CPU) */
  int32_t compiled_in;    /* out: 1 when the library was built with this backend */
  char name[FP8MOE_NAME_CAPACITY];        /* out: "cpu" or "cuda" */
  char device_name[FP8MOE_NAME_CAPACITY]; /* out: device 0's name, when available */
  char reason[FP8MOE_MESSAGE_CAPACITY];   /* out: why it is unavailable, when it is */
  /* fields are only appended after this line */
} fp8moe_backend_info;

/* ---------------------------------------------------------------------------------------------------
 * Capabilities: the contract table, as data. query_support and run validate against the same table.
 * All pointers point into the library's read-only data and stay valid while it is loaded.
 * ------------------------------------------------------------------------------------------------- */
#define FP8MOE_BACKEND_MASK_CPU (1u << FP8MOE_BACKEND_CPU)
#define FP8MOE_BACKEND_MASK_CUDA (1u << FP8MOE_BACKEND_CUDA)

/* fp8moe_routing_method_info.flags */
#define FP8MOE_ROUTING_USES_LOGITS (1u << 0)     /* reads router_logits [T,E] */
#define FP8MOE_ROUTING_USES_BIAS (1u << 1)       /* accepts routing_bias [E] */
#define FP8MOE_ROUTING_USES_GROUPS (1u << 2)     /* reads n_group / topk_group */
#define FP8MOE_ROUTING_WEIGHT_ON_INPUT (1u << 3) /* weight multiplies the input, not the output */
#define FP8MOE_ROUTING_TOP1_ONLY (1u << 4)       /* K must be 1 */
#define FP8MOE_ROUTING_USES_TOPK_INPUT (1u << 5) /* reads topk_ids / topk_weights */

typedef struct fp8moe_routing_method_info { /* frozen for major 1 */
  int32_t id;          /* FP8MOE_ROUTING_* */
  uint32_t flags;      /* FP8MOE_ROUTING_* flags above */
  uint32_t backends;   /* FP8MOE_BACKEND_MASK_* that implement it */
  uint32_t reserved;
  const char* name;    /* "DEEPSEEK_V3", … */
  const char* summary; /* one line: selection → weight */
} fp8moe_routing_method_info;

typedef struct fp8moe_quant_format_info { /* frozen for major 1 */
  int32_t id;              /* FP8MOE_QUANT_* */
  int32_t k_multiple;      /* H and I must be multiples of this */
  uint32_t backends;       /* FP8MOE_BACKEND_MASK_* */
  uint32_t reserved;
  const char* name;        /* "FP8_BLOCK128", … */
  const char* summary;     /* weights, scales and activation quantization in one line */
} fp8moe_quant_format_info;

typedef struct fp8moe_activation_info { /* frozen for major 1 */
  int32_t id;          /* FP8MOE_ACTIVATION_* */
  uint32_t backends;   /* FP8MOE_BACKEND_MASK_* */
  const char* name;    /* "SWIGLU", "GEGLU" */
} fp8moe_activation_info;

/* fp8moe_argument_info.flags */
#define FP8MOE_ARGUMENT_OUTPUT (1u << 0)         /* written by run */
#define FP8MOE_ARGUMENT_ANY_STRIDES (1u << 1)    /* any non-negative strides are accepted */
#define FP8MOE_ARGUMENT_INNER_CONTIGUOUS (1u << 2) /* last dimension must have stride 1 */

typedef struct fp8moe_argument_info { /* frozen for major 1 */
  int32_t id;                 /* FP8MOE_ARG_* */
  uint32_t flags;             /* FP8MOE_ARGUMENT_* */
  uint32_t dtype_count;       /* entries in dtypes */
  uint32_t alignment;         /* required byte alignment of the data pointer (after byte_offset) */
  const char* name;           /* the field's name in fp8moe_moe_args, used in every message */
  const char* shape;          /* its shape(s) in words, e.g. "[T,E]" */
  const char* when;           /* when it is required, optional or ignored */
  const fp8moe_dtype* dtypes; /* the accepted dtypes */
} fp8moe_argument_info;

typedef struct fp8moe_limits { /* frozen for major 1; every bound is inclusive */
  int64_t max_tokens;          /* T */
  int64_t max_hidden;          /* H */
  int64_t max_intermediate;    /* I */
  int32_t max_experts;         /* E */
  int32_t max_top_k;           /* K */
  int32_t max_groups;          /* n_group (DEEPSEEK_V3) */
  int32_t min_group_size;      /* experts per group when n_group > 1 */
  int32_t max_group_size;      /* experts per group (E / n_group) */
  int32_t reserved;
} fp8moe_limits;

/* fp8moe_capabilities.flags */
#define FP8MOE_CAPABILITY_GRAPH_CAPTURABLE (1u << 0) /* the context's run may be captured in a CUDA graph */
#define FP8MOE_CAPABILITY_HOST_SYNC_FREE (1u << 1)   /* run never synchronizes the host */

typedef struct fp8moe_capabilities {
  size_t struct_size;  /* in: sizeof as the host compiled it */
  int32_t backend;     /* out: the backend of the context asked (CPU when the context is NULL) */
  uint32_t flags;      /* out: FP8MOE_CAPABILITY_* for that backend */
  uint32_t routing_method_count;
  uint32_t quant_format_count;
  uint32_t activation_count;
  uint32_t argument_count;
  const fp8moe_routing_method_info* routing_methods;
  const fp8moe_quant_format_info* quant_formats;
  const fp8moe_activation_info* activations;
  const fp8moe_argument_info* arguments;
  fp8moe_limits limits;
  /* fields are only appended after this line */
} fp8moe_capabilities;

/* ---------------------------------------------------------------------------------------------------
 * One MoE layer: the problem, its tensors and where scratch lives.
 * Shapes: T tokens, H hidden, I intermediate, E experts, E_l = local_num_experts, K = top_k.
 * Optional tensors are NULL when absent. Nothing is read past the caller's struct_size.
 * ------------------------------------------------------------------------------------------------- */
typedef struct fp8moe_moe_args {
  size_t struct_size;          /* sizeof(fp8moe_moe_args) as the host compiled it */
  char* error_message;         /* optional buffer for the reason of a non-OK status; default NULL */
  size_t error_message_size;   /* its size in bytes; default 0 */
  int32_t routing_method;      /* FP8MOE_ROUTING_* */
  int32_t quant_format;        /* FP8MOE_QUANT_* */
  int32_t activation;          /* FP8MOE_ACTIVATION_*; default SWIGLU */
  int32_t gate_up_order;       /* FP8MOE_GATE_UP_*; default GATE_FIRST */
  uint32_t flags;              /* FP8MOE_FLAG_*; unknown bits are refused; default 0 */
  int32_t num_experts;         /* E, experts of the whole model */
  int32_t top_k;               /* K */
  int32_t local_expert_offset; /* first expert this call owns; default 0 */
  int32_t local_num_experts;   /* E_l; 0 = all E; default 0 */
  int32_t n_group;             /* DEEPSEEK_V3 groups; ignored by other methods */
  int32_t topk_group;          /* DEEPSEEK_V3 groups kept; ignored by other methods */
  float routed_scaling_factor; /* multiplies every method's final weights; 0 means 1.0; default 1.0 */
  const fp8moe_tensor* hidden_states; /* [T,H] bf16/fp16 (quantized by fp8moe) or e4m3fn + hidden_scale */
  const fp8moe_tensor* hidden_scale;  /* with e4m3fn hidden: per-tensor [] or [1]; BLOCK128 [T,H/128] in any
                                         strides; PER_CHANNEL [T] or [T,1] */
  const fp8moe_tensor* router_logits; /* [T,E] fp32/bf16/fp16; every method but PRECOMPUTED */
  const fp8moe_tensor* routing_bias;  /* [E] fp32/bf16/fp16, optional (DEEPSEEK_V3: e_score_correction_bias) */
  const fp8moe_tensor* topk_ids;      /* PRECOMPUTED: [T,K] int32/int64 global expert ids */
  const fp8moe_tensor* topk_weights;  /* PRECOMPUTED: [T,K] fp32/bf16/fp16 */
  const fp8moe_tensor* w13;           /* [E_l,2I,H] e4m3fn, rows contiguous along H */
  const fp8moe_tensor* w13_scale;     /* PER_TENSOR [E_l]; BLOCK128 [E_l,2I/128,H/128]; PER_CHANNEL [E_l,2I] */
  const fp8moe_tensor* w2;            /* [E_l,H,I] e4m3fn, rows contiguous along I */
  const fp8moe_tensor* w2_scale;      /* PER_TENSOR [E_l]; BLOCK128 [E_l,H/128,I/128]; PER_CHANNEL [E_l,H] */
  const fp8moe_tensor* a1_scale;      /* PER_TENSOR only: static input scale [] or [1]; NULL = dynamic */
  const fp8moe_tensor* a2_scale;      /* PER_TENSOR only: static intermediate scale; NULL = dynamic */
  fp8moe_tensor* output;              /* [T,H] bf16/fp16/fp32, rows contiguous; fully written */
  fp8moe_tensor* routing_ids_out;     /* optional [T,K] int32: the selected global expert ids */
  fp8moe_tensor* routing_weights_out; /* optional [T,K] fp32: their final weights */
  fp8moe_tensor* device_status;       /* optional [1] int32: set to the number of PRECOMPUTED ids outside
                                         [0,E) that the CUDA backend skipped */
  void* workspace;                    /* scratch on the backend's device, ≥ query_workspace bytes, 256-byte
                                         aligned; contents need not be preserved between calls */
  size_t workspace_size;              /* its size in bytes */
  void* stream;                       /* cudaStream_t for the CUDA backend (NULL = legacy default stream) */
  /* fields are only appended after this line */
} fp8moe_moe_args;

/* ---------------------------------------------------------------------------------------------------
 * The function table (append-only). Entries return FP8MOE_STATUS_*; none prints, aborts or exits.
 * ------------------------------------------------------------------------------------------------- */
typedef struct fp8moe_api {
  size_t struct_size; /* sizeof the plugin's table */
  uint32_t abi_major; /* the plugin's ABI major */
  uint32_t abi_minor; /* the plugin's newest ABI minor */

  /* ---- ABI 1.0 ---- */
  /* The library's runtime version (semver). Any pointer may be NULL. */
  void (*get_version)(uint32_t* major, uint32_t* minor, uint32_t* patch);
  /* A static description of a status code (never NULL). */
  const char* (*status_string)(int32_t status);
  /* What a backend can do on this machine; fills info up to info->struct_size. */
  int32_t (*backend_info)(fp8moe_backend_info* info);
  /* Creates a context for one backend and device. Allocates; not for hot paths. */
  int32_t (*context_create)(const fp8moe_context_args* args, fp8moe_context** context);
  /* Destroys a context; NULL is a no-op. No run may be in flight on it. */
  int32_t (*context_destroy)(fp8moe_context* context);
  /* Describes a context (backend resolved, device, threads). */
  int32_t (*context_info)(const fp8moe_context* context, fp8moe_context_info* info);
  /* The capability table; context may be NULL (then backend and flags describe the CPU backend). */
  int32_t (*query_capabilities)(const fp8moe_context* context, fp8moe_capabilities* capabilities);
  /* Workspace bytes run needs for exactly these args (validates them first). Never fewer for a larger T with
   * everything else the same, so a workspace sized at a host's largest T serves every smaller T. */
  int32_t (*query_workspace)(const fp8moe_context* context, const fp8moe_moe_args* args, size_t* bytes);
  /* OK when run would accept these args; otherwise the status and message run would give. Reads no
   * tensor data and does not check the workspace. */
  int32_t (*query_support)(const fp8moe_context* context, const fp8moe_moe_args* args);
  /* Runs one MoE layer. Validates everything before any work; the output is untouched on refusal.
   * Never allocates; on the CUDA backend, enqueues on args->stream without synchronizing the host.
   * Concurrent runs on one context are safe (the CPU backend serializes them on its thread pool). */
  int32_t (*run)(fp8moe_context* context, const fp8moe_moe_args* args);
  /* Copies the context's most recent error message (any thread's) into buf; returns its status. */
  int32_t (*last_error)(const fp8moe_context* context, char* buf, size_t size);
  /* entries are only appended after this line */
} fp8moe_api;

/* ---------------------------------------------------------------------------------------------------
 * Pinned layout (LP64). A failure here means an ABI break.
 * ------------------------------------------------------------------------------------------------- */
#if defined(__cplusplus)
#define FP8MOE_STATIC_ASSERT(cond, name) static_assert(cond, #name)
#elif defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L
#define FP8MOE_STATIC_ASSERT(cond, name) _Static_assert(cond, #name)
#else
#define FP8MOE_STATIC_ASSERT(cond, name) typedef char fp8moe_static_assert_##name[(cond) ? 1 : -1]
#endif

#if UINTPTR_MAX == 0xffffffffffffffffu
FP8MOE_STATIC_ASSERT(sizeof(fp8moe_tensor) == 48, tensor_size);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_tensor, device) == 8, tensor_device);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_tensor, ndim) == 16, tensor_ndim);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_tensor, dtype) == 20, tensor_dtype);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_tensor, shape) == 24, tensor_shape);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_tensor, strides) == 32, tensor_strides);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_tensor, byte_offset) == 40, tensor_byte_offset);

FP8MOE_STATIC_ASSERT(offsetof(fp8moe_negotiation, refusal) == 32, negotiation_refusal);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_negotiation, message) == 36, negotiation_message);
FP8MOE_STATIC_ASSERT(sizeof(fp8moe_negotiation) == 296, negotiation_size);

FP8MOE_STATIC_ASSERT(offsetof(fp8moe_context_args, backend) == 24, context_args_backend);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_context_args, flags) == 36, context_args_flags);
FP8MOE_STATIC_ASSERT(sizeof(fp8moe_context_args) == 40, context_args_size);

FP8MOE_STATIC_ASSERT(offsetof(fp8moe_context_info, device_name) == 32, context_info_device_name);
FP8MOE_STATIC_ASSERT(sizeof(fp8moe_context_info) == 160, context_info_size);

FP8MOE_STATIC_ASSERT(offsetof(fp8moe_backend_info, name) == 24, backend_info_name);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_backend_info, reason) == 280, backend_info_reason);
FP8MOE_STATIC_ASSERT(sizeof(fp8moe_backend_info) == 536, backend_info_size);

FP8MOE_STATIC_ASSERT(sizeof(fp8moe_routing_method_info) == 32, routing_method_info_size);
FP8MOE_STATIC_ASSERT(sizeof(fp8moe_quant_format_info) == 32, quant_format_info_size);
FP8MOE_STATIC_ASSERT(sizeof(fp8moe_activation_info) == 16, activation_info_size);
FP8MOE_STATIC_ASSERT(sizeof(fp8moe_argument_info) == 48, argument_info_size);
FP8MOE_STATIC_ASSERT(sizeof(fp8moe_limits) == 48, limits_size);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_capabilities, routing_methods) == 32, capabilities_methods);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_capabilities, limits) == 64, capabilities_limits);
FP8MOE_STATIC_ASSERT(sizeof(fp8moe_capabilities) == 112, capabilities_size);

FP8MOE_STATIC_ASSERT(offsetof(fp8moe_moe_args, routing_method) == 24, moe_args_routing_method);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_moe_args, routed_scaling_factor) == 68, moe_args_scaling);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_moe_args, hidden_states) == 72, moe_args_hidden_states);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_moe_args, output) == 168, moe_args_output);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_moe_args, device_status) == 192, moe_args_device_status);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_moe_args, workspace) == 200, moe_args_workspace);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_moe_args, stream) == 216, moe_args_stream);
FP8MOE_STATIC_ASSERT(sizeof(fp8moe_moe_args) == 224, moe_args_size);

FP8MOE_STATIC_ASSERT(offsetof(fp8moe_api, get_version) == 16, api_get_version);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_api, status_string) == 24, api_status_string);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_api, backend_info) == 32, api_backend_info);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_api, context_create) == 40, api_context_create);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_api, context_destroy) == 48, api_context_destroy);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_api, context_info) == 56, api_context_info);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_api, query_capabilities) == 64, api_query_capabilities);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_api, query_workspace) == 72, api_query_workspace);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_api, query_support) == 80, api_query_support);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_api, run) == 88, api_run);
FP8MOE_STATIC_ASSERT(offsetof(fp8moe_api, last_error) == 96, api_last_error);
FP8MOE_STATIC_ASSERT(sizeof(fp8moe_api) == 104, api_size_v1_0);
#endif

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* FP8MOE_H */
