"""fp8moe as PyTorch custom ops (torch.library), so fused_moe works under torch.compile(fullgraph=True) and
inside CUDA graph capture:

- torch.ops.fp8moe.fused_moe(...) -> Tensor           allocates the output (functional)
- torch.ops.fp8moe.fused_moe_out(..., out, ...) -> () writes `out` and the optional routing outputs

Both have fake (meta) implementations that only describe the output, and run the eager path
(fp8moe.moe.run_moe) otherwise. Names (routing="DEEPSEEK_V3") travel as strings and are resolved inside the
op against the plugin's capability table; integer ids travel as their decimal strings.
"""
from typing import Optional

import torch

from . import moe
from .context import Context
from .dtypes import name_of

Tensor = torch.Tensor


def _choice(value):
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return value


def _kw(routing, quant_format, activation, gate_up_order, top_k, num_experts, local_expert_offset,
        local_num_experts, n_group, topk_group, routed_scaling_factor, weight_on_input, backend, library):
    return dict(routing=_choice(routing), quant_format=_choice(quant_format), activation=_choice(activation),
                gate_up_order=_choice(gate_up_order), top_k=top_k, num_experts=num_experts,
                local_expert_offset=local_expert_offset, local_num_experts=local_num_experts, n_group=n_group,
                topk_group=topk_group, routed_scaling_factor=routed_scaling_factor,
                weight_on_input=weight_on_input, backend=backend or None, library=library or None)


def _out_dtype(hidden_states, out_dtype):
    if out_dtype is not None:
        return out_dtype
    return hidden_states.dtype if hidden_states.dtype in (torch.bfloat16, torch.float16) else torch.bfloat16


@torch.library.custom_op("fp8moe::fused_moe", mutates_args=())
def fused_moe_op(hidden_states: Tensor, router_logits: Optional[Tensor], w13: Tensor, w13_scale: Tensor,
                 w2: Tensor, w2_scale: Tensor, routing_bias: Optional[Tensor], hidden_scale: Optional[Tensor],
                 a1_scale: Optional[Tensor], a2_scale: Optional[Tensor], topk_ids: Optional[Tensor],
                 topk_weights: Optional[Tensor], routing: str, quant_format: str, activation: str,
                 gate_up_order: str, top_k: int, num_experts: int, local_expert_offset: int,
                 local_num_experts: int, n_group: int, topk_group: int, routed_scaling_factor: float,
                 weight_on_input: bool, out_dtype: Optional[torch.dtype], backend: str, library: str) -> Tensor:
    kw = _kw(routing, quant_format, activation, gate_up_order, top_k, num_experts, local_expert_offset,
             local_num_experts, n_group, topk_group, routed_scaling_factor, weight_on_input, backend, library)
    kw.update(router_logits=router_logits, w13=w13, w13_scale=w13_scale, w2=w2, w2_scale=w2_scale,
              routing_bias=routing_bias, hidden_scale=hidden_scale, a1_scale=a1_scale, a2_scale=a2_scale,
              topk_ids=topk_ids, topk_weights=topk_weights, out_dtype=_out_dtype(hidden_states, out_dtype))
    return moe.run_moe(hidden_states, kw)


@fused_moe_op.register_fake
def _fused_moe_fake(hidden_states, router_logits, w13, w13_scale, w2, w2_scale, routing_bias, hidden_scale,
                    a1_scale, a2_scale, topk_ids, topk_weights, routing, quant_format, activation, gate_up_order,
                    top_k, num_experts, local_expert_offset, local_num_experts, n_group, topk_group,
                    routed_scaling_factor, weight_on_input, out_dtype, backend, library):
    return hidden_states.new_empty(hidden_states.shape, dtype=_out_dtype(hidden_states, out_dtype))


@torch.library.custom_op("fp8moe::fused_moe_out",
                         mutates_args=("out", "routing_ids_out", "routing_weights_out", "device_status"))
def fused_moe_out_op(hidden_states: Tensor, router_logits: Optional[Tensor], w13: Tensor, w13_scale: Tensor,
                     w2: Tensor, w2_scale: Tensor, routing_bias: Optional[Tensor], hidden_scale: Optional[Tensor],
                     a1_scale: Optional[Tensor], a2_scale: Optional[Tensor], topk_ids: Optional[Tensor],
                     topk_weights: Optional[Tensor], routing: str, quant_format: str, activation: str,
                     gate_up_order: str, top_k: int, num_experts: int, local_expert_offset: int,
                     local_num_experts: int, n_group: int, topk_group: int, routed_scaling_factor: float,
                     weight_on_input: bool, backend: str, library: str, out: Tensor,
                     routing_ids_out: Optional[Tensor], routing_weights_out: Optional[Tensor],
                     device_status: Optional[Tensor]) -> None:
    kw = _kw(routing, quant_format, activation, gate_up_order, top_k, num_experts, local_expert_offset,
             local_num_experts, n_group, topk_group, routed_scaling_factor, weight_on_input, backend, library)
    kw.update(router_logits=router_logits, w13=w13, w13_scale=w13_scale, w2=w2, w2_scale=w2_scale,
              routing_bias=routing_bias, hidden_scale=hidden_scale, a1_scale=a1_scale, a2_scale=a2_scale,
              topk_ids=topk_ids, topk_weights=topk_weights, out=out, routing_ids_out=routing_ids_out,
              routing_weights_out=routing_weights_out, device_status=device_status)
    moe.run_moe(hidden_states, kw)


@fused_moe_out_op.register_fake
def _fused_moe_out_fake(*args, **kwargs):
    return None


def _as_choice(value, default):
    if value is None:
        return default
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, int):  # also IntEnum
        return str(int(value))
    return str(value)


def dispatch(hidden_states, kw):
    """fused_moe with torch tensors: resolve defaults from shapes, then call the custom op."""
    d = moe.shape_defaults(kw)
    backend, library = kw["backend"], kw["library"]
    ctx = kw["context"]
    if isinstance(ctx, Context):
        backend, library = ctx.backend, ctx.library.path
    if library is not None and not isinstance(library, str):
        library = library.path
    tensors = {name: kw[name] for name in ("router_logits", "w13", "w13_scale", "w2", "w2_scale", "routing_bias",
                                           "hidden_scale", "a1_scale", "a2_scale", "topk_ids", "topk_weights")}
    scale = kw["routed_scaling_factor"]
    common = dict(
        hidden_states=hidden_states, **tensors,
        routing=_as_choice(d["routing"], ""), quant_format=_as_choice(d["quant_format"], ""),
        activation=_as_choice(kw["activation"], "SWIGLU"),
        gate_up_order=_as_choice(kw["gate_up_order"], "GATE_FIRST"),
        top_k=int(d["top_k"]), num_experts=int(d["num_experts"]),
        local_expert_offset=int(kw["local_expert_offset"] or 0), local_num_experts=int(d["local_num_experts"]),
        n_group=int(kw["n_group"] or 0), topk_group=int(kw["topk_group"] or 0),
        routed_scaling_factor=float(1.0 if scale is None else scale),
        weight_on_input=bool(kw["weight_on_input"]), backend=backend or "", library=library or "")
    out = kw["out"]
    extra = (kw["routing_ids_out"], kw["routing_weights_out"], kw["device_status"])
    if out is None and all(x is None for x in extra):
        out_dtype = kw["out_dtype"]
        if out_dtype is not None and not isinstance(out_dtype, torch.dtype):
            out_dtype = getattr(torch, name_of(out_dtype))
        return torch.ops.fp8moe.fused_moe(**common, out_dtype=out_dtype)
    if out is None:
        out = moe._new_output(hidden_states, kw["out_dtype"])
    torch.ops.fp8moe.fused_moe_out(**common, out=out, routing_ids_out=extra[0], routing_weights_out=extra[1],
                                   device_status=extra[2])
    return out
