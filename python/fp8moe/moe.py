"""fp8moe.fused_moe and fp8moe.supports: one MoE layer through the plugin's run / query_support.

Arrays are described in place (no copies, any strides; the plugin decides what it accepts). Names such as
routing="DEEPSEEK_V3" are resolved against the capability table the plugin reports. Scratch memory comes
from torch's caching allocator (CUDA: allocated per call on the current stream and released when run
returns, so the allocator's stream-ordered reuse recycles it, and inside CUDA graph capture or torch's
cudagraph trees it belongs to the graph's pool) or from numpy (one per thread).
"""
import ctypes as C
import sys
from dataclasses import dataclass

from . import _abi
from .context import Context, context as _context
from .dtypes import name_of, numpy_dtype, torch_dtype
from .tensors import describe, is_torch

WORKSPACE_ALIGNMENT = 256
MESSAGE_BYTES = 1024

_OPTIONAL_TENSORS = ("hidden_scale", "router_logits", "routing_bias", "topk_ids", "topk_weights", "a1_scale",
                     "a2_scale", "routing_ids_out", "routing_weights_out", "device_status")


@dataclass(frozen=True)
class Support:
    """The answer of fp8moe.supports(): truthy when run would accept the call, else why not."""
    supported: bool
    status: int
    status_name: str
    message: str

    def __bool__(self):
        return self.supported


def _pick_context(hidden_states, context, backend, library):
    if isinstance(context, Context):
        return context
    on_cuda = is_torch(hidden_states) and hidden_states.device.type == "cuda"
    device = 0
    if on_cuda:
        import torch
        device = hidden_states.device.index if hidden_states.device.index is not None else torch.cuda.current_device()
    if backend is None or backend == "":
        backend = "cuda" if on_cuda else "cpu"
    return _context(backend, device, library=library)


def _new_output(hidden_states, out_dtype):
    """An uninitialised [T,H] output like hidden_states: its dtype when bf16/fp16, else bfloat16."""
    hname = name_of(hidden_states.dtype)
    name = name_of(out_dtype) if out_dtype is not None else (hname if hname in ("bfloat16", "float16")
                                                              else "bfloat16")
    shape = tuple(hidden_states.shape)
    if is_torch(hidden_states):
        import torch
        return torch.empty(shape, dtype=torch_dtype(name), device=hidden_states.device)
    import numpy as np
    return np.empty(shape, dtype=numpy_dtype(name))


def shape_defaults(kw):
    """routing, quant_format, top_k, num_experts and local_num_experts with their defaults filled in from the
    arguments' shapes (python/README.md lists them); shared by the eager path and the torch op wrapper."""
    topk_ids, logits, w13 = kw.get("topk_ids"), kw.get("router_logits"), kw["w13"]
    routing = kw.get("routing")
    if routing is None:
        if topk_ids is None:
            raise TypeError("fused_moe: routing= is required unless topk_ids/topk_weights are given "
                            "(then it is PRECOMPUTED)")
        routing = "PRECOMPUTED"
    if kw.get("quant_format") is None:
        raise TypeError("fused_moe: quant_format= is required (FP8_PER_TENSOR, FP8_BLOCK128, FP8_PER_CHANNEL)")
    top_k = kw.get("top_k")
    if top_k is None:
        if topk_ids is None or len(topk_ids.shape) != 2:
            raise TypeError("fused_moe: top_k= is required unless topk_ids [T,K] is given")
        top_k = topk_ids.shape[1]
    num_experts = kw.get("num_experts")
    if num_experts is None:
        num_experts = logits.shape[-1] if logits is not None and len(logits.shape) else w13.shape[0]
    local = kw.get("local_num_experts")
    if local is None:
        local = w13.shape[0] if len(w13.shape) else 0
    return dict(routing=routing, quant_format=kw["quant_format"], top_k=top_k, num_experts=num_experts,
                local_num_experts=local)


class _Call:
    """One filled fp8moe_moe_args with everything its pointers need kept alive."""

    def __init__(self, ctx, hidden_states, kw):
        caps = ctx.capabilities
        self.ctx = ctx
        self.keep = []
        self.message = C.create_string_buffer(MESSAGE_BYTES)
        a = _abi.MoeArgs()
        a.struct_size = C.sizeof(a)
        a.error_message = C.cast(self.message, C.c_void_p)
        a.error_message_size = MESSAGE_BYTES
        kw = dict(kw, **shape_defaults(kw))
        a.routing_method = caps.lookup("routing_methods", kw["routing"], "routing")
        a.quant_format = caps.lookup("quant_formats", kw["quant_format"], "quant_format")
        a.activation = caps.lookup("activations", kw.get("activation") or "SWIGLU", "activation")
        a.gate_up_order = _gate_up_order(kw.get("gate_up_order"))
        a.flags = _abi.FLAG_WEIGHT_ON_INPUT if kw.get("weight_on_input") else 0
        a.top_k = int(kw["top_k"])
        a.num_experts = int(kw["num_experts"])
        a.local_expert_offset = int(kw.get("local_expert_offset") or 0)
        a.local_num_experts = int(kw["local_num_experts"])
        a.n_group = int(kw.get("n_group") or 0)
        a.topk_group = int(kw.get("topk_group") or 0)
        scale = kw.get("routed_scaling_factor")
        a.routed_scaling_factor = 1.0 if scale is None else float(scale)

        self.out = kw.get("out")
        for name in ("hidden_states", "w13", "w13_scale", "w2", "w2_scale", "output") + _OPTIONAL_TENSORS:
            x = hidden_states if name == "hidden_states" else (self.out if name == "output" else kw.get(name))
            if x is None:
                continue
            d = describe(x, name)
            self.keep.append(d)
            setattr(a, name, C.pointer(d.tensor))
        self.args = a
        self.stream = None
        if ctx.backend == "cuda" and is_torch(hidden_states) and hidden_states.device.type == "cuda":
            import torch
            self.stream = torch.cuda.current_stream(hidden_states.device).cuda_stream
            a.stream = self.stream

    def check(self, status):
        self.ctx.library.raise_for(status, self.message)

    def workspace_bytes(self):
        n = C.c_size_t(0)
        self.check(self.ctx.library.api.query_workspace(self.ctx.handle, C.byref(self.args), C.byref(n)))
        return n.value

    def support(self):
        status = self.ctx.library.api.query_support(self.ctx.handle, C.byref(self.args))
        name = self.ctx.library.status_string(status)
        return Support(status == _abi.STATUS_OK, status, name, self.message.value.decode(errors="replace"))

    def run(self, hidden_states, workspace=None):
        if workspace is not None:  # the caller's scratch, as given: the plugin checks size and alignment
            d = describe(workspace, "workspace")
            self.keep.append(d)
            self.args.workspace = d.tensor.data
            self.args.workspace_size = _nbytes(workspace)
        else:
            need = self.workspace_bytes()
            if need:
                # `buf` lives until run returns and no longer: the eager workspaces stay cached in the context,
                # while one allocated during graph capture goes back to the graph's pool, as torch's cudagraph
                # trees require of every allocation that is not an output.
                ptr, buf = _workspace(self.ctx, hidden_states, need)
                self.args.workspace, self.args.workspace_size = ptr, need
                self.check(self.ctx.library.api.run(self.ctx.handle, C.byref(self.args)))
                return
        self.check(self.ctx.library.api.run(self.ctx.handle, C.byref(self.args)))


def _nbytes(x):
    return x.numel() * x.element_size() if is_torch(x) else x.nbytes


def _gate_up_order(value):
    if value is None or value == "GATE_FIRST" or value == _abi.GATE_UP_GATE_FIRST:
        return _abi.GATE_UP_GATE_FIRST
    if value == "UP_FIRST" or value == _abi.GATE_UP_UP_FIRST:
        return _abi.GATE_UP_UP_FIRST
    if isinstance(value, int):
        return value  # the plugin refuses unknown values with its own message
    raise ValueError(f"gate_up_order: got {value!r}; accepted 'GATE_FIRST', 'UP_FIRST'")


def _aligned(ptr):
    return (ptr + WORKSPACE_ALIGNMENT - 1) // WORKSPACE_ALIGNMENT * WORKSPACE_ALIGNMENT


def _workspace(ctx, hidden_states, need):
    """(256-byte aligned pointer, owner) of at least `need` bytes on the backend's device."""
    total = need + WORKSPACE_ALIGNMENT
    if ctx.backend == "cuda":
        import torch
        device = hidden_states.device if is_torch(hidden_states) else torch.device("cuda", ctx.info.device_ordinal)
        # Never cached across calls: a buffer kept alive would be an untracked live allocation in the pool of a
        # CUDA graph (torch's cudagraph trees allocate from it even in their warm-up runs, uncaptured). The
        # caching allocator makes a per-call allocation cheap, and freeing it right after run is safe: its
        # block is reused only by later work on the same stream, which runs after the plugin's kernels.
        buf = torch.empty(total, dtype=torch.uint8, device=device)
        return _aligned(buf.data_ptr()), buf
    # CPU backend: one buffer per thread, since concurrent runs on one context are allowed.
    buf = getattr(ctx.workspaces, "buf", None)
    if buf is None or len(buf) < total:
        if "numpy" in sys.modules or not is_torch(hidden_states):
            import numpy as np
            buf = np.empty(total, dtype=np.uint8)
        else:
            import torch
            buf = torch.empty(total, dtype=torch.uint8)
        ctx.workspaces.buf = buf
    ptr = buf.__array_interface__["data"][0] if hasattr(buf, "__array_interface__") else buf.data_ptr()
    return _aligned(ptr), buf


def run_moe(hidden_states, kw):
    """The eager path shared by fused_moe and the torch custom op: fills `out` (allocated when None)."""
    ctx = _pick_context(hidden_states, kw.get("context"), kw.get("backend"), kw.get("library"))
    if kw.get("out") is None:
        kw = dict(kw, out=_new_output(hidden_states, kw.get("out_dtype")))
    call = _Call(ctx, hidden_states, kw)
    call.run(hidden_states, kw.get("workspace"))
    return call.out


def fused_moe(hidden_states, router_logits=None, *, w13, w13_scale, w2, w2_scale, routing=None, top_k=None,
              quant_format=None, activation="SWIGLU", gate_up_order="GATE_FIRST", num_experts=None,
              local_expert_offset=0, local_num_experts=None, n_group=0, topk_group=0, routed_scaling_factor=1.0,
              routing_bias=None, hidden_scale=None, a1_scale=None, a2_scale=None, topk_ids=None,
              topk_weights=None, weight_on_input=False, out=None, out_dtype=None, routing_ids_out=None,
              routing_weights_out=None, device_status=None, workspace=None, context=None, backend=None,
              library=None):
    """One fused FP8 MoE layer; returns `out` ([T,H], allocated like hidden_states when not given).

    Takes torch tensors (CPU or CUDA; run on the current stream) or numpy arrays (bf16/e4m3fn through
    ml_dtypes). A call the plugin refuses raises the fp8moe.Error subclass of its status with the plugin's
    message. With torch tensors the call goes through the torch.ops.fp8moe custom ops, so it can be
    captured by torch.compile(fullgraph=True) and CUDA graphs. python/README.md lists every argument.
    """
    kw = dict(router_logits=router_logits, w13=w13, w13_scale=w13_scale, w2=w2, w2_scale=w2_scale,
              routing=routing, top_k=top_k, quant_format=quant_format, activation=activation,
              gate_up_order=gate_up_order, num_experts=num_experts, local_expert_offset=local_expert_offset,
              local_num_experts=local_num_experts, n_group=n_group, topk_group=topk_group,
              routed_scaling_factor=routed_scaling_factor, routing_bias=routing_bias, hidden_scale=hidden_scale,
              a1_scale=a1_scale, a2_scale=a2_scale, topk_ids=topk_ids, topk_weights=topk_weights,
              weight_on_input=weight_on_input, out=out, out_dtype=out_dtype, routing_ids_out=routing_ids_out,
              routing_weights_out=routing_weights_out, device_status=device_status, workspace=workspace,
              context=context,
              backend=backend, library=library)
    if is_torch(hidden_states) and workspace is None:
        from . import torch_ops
        return torch_ops.dispatch(hidden_states, kw)
    return run_moe(hidden_states, kw)


def supports(hidden_states, router_logits=None, **kw):
    """Would fused_moe accept exactly this call? Returns a Support (truthy when yes; otherwise its status,
    status_name and the plugin's message). Reads no tensor data and runs nothing; without `out` it asks
    about the output fused_moe would allocate."""
    kw["router_logits"] = router_logits
    ctx = _pick_context(hidden_states, kw.get("context"), kw.get("backend"), kw.get("library"))
    if kw.get("out") is None:
        kw["out"] = _new_output(hidden_states, kw.get("out_dtype"))
    return _Call(ctx, hidden_states, kw).support()
