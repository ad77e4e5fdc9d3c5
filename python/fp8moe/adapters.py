"""Thin adapters with the argument names hosts already use. Each maps its arguments onto fp8moe.fused_moe
(no copies: transposes and reshapes are views) and documents what it accepts beyond the original.

What every adapter accepts that the originals do not (the plugin converts losslessly inside):
  * router logits in fp32, bf16 or fp16 for every routing method (not only DeepSeek-V3's fp32);
  * a routing bias in fp32, bf16 or fp16, never rounded;
  * weights in their natural layout ([E,2I,H] and [E,H,I], rows contiguous): no shuffling or tiling;
  * numpy arrays on the CPU backend as well as torch tensors on either backend.
"""
from .errors import InvalidArgumentError
from .moe import fused_moe
from .tensors import is_torch


def _refuse(argument, got, accepted):
    raise InvalidArgumentError(f"{argument}: got {got}; accepted {accepted}", status_name="invalid argument")


def _scalar_one_like(x):
    """A [1] fp32 tensor/array holding 1.0 on x's device."""
    if is_torch(x):
        import torch
        return torch.ones(1, dtype=torch.float32, device=x.device)
    import numpy as np
    return np.ones(1, dtype=np.float32)


def trtllm_fp8_block_scale_moe(routing_logits, routing_bias, hidden_states, hidden_states_scale, gemm1_weights,
                               gemm1_weights_scale, gemm2_weights, gemm2_weights_scale, num_experts, top_k,
                               n_group, topk_group, intermediate_size, local_expert_offset, local_num_experts,
                               routed_scaling_factor, tile_tokens_dim=None, routing_method_type=0,
                               use_shuffled_weight=False, weight_layout=0, enable_pdl=None, *,
                               gate_up_order="GATE_FIRST", output=None):
    """FlashInfer's trtllm_fp8_block_scale_moe (DeepSeek-style FP8 128x128 block scales) on fp8moe.

    Same arguments and meaning: e4m3fn hidden_states with hidden_states_scale [H/128, T] (FlashInfer's
    transposed layout, passed to fp8moe as a [T, H/128] view), gemm1_weights [E_l, 2I, H] with
    gemm1_weights_scale [E_l, 2I/128, H/128], gemm2_weights [E_l, H, I] with [E_l, H/128, I/128];
    routing_method_type uses FlashInfer's numbering (0 Default, 1 Renormalize, 2 DeepSeekV3, 3 Llama4,
    4 RenormalizeNaive, 5 TopK), which fp8moe's routing ids share. Returns a bf16 [T, H] tensor.
    tile_tokens_dim and enable_pdl are tuning hints and ignored.

    Beyond the original: bf16/fp16 hidden_states with hidden_states_scale=None (quantized inside in 1x128
    groups); any logits/bias dtype of the module docstring for every method; natural weight layout only
    (use_shuffled_weight=True or weight_layout != 0 is refused); `gate_up_order` ("GATE_FIRST" default, or
    "UP_FIRST") names the half order of gemm1_weights; `output=` writes into a given [T, H] tensor.
    """
    if use_shuffled_weight or weight_layout:
        _refuse("use_shuffled_weight/weight_layout", f"{use_shuffled_weight}/{weight_layout}",
                "False/0: fp8moe reads weights in their natural [E,2I,H] / [E,H,I] layout")
    if gemm1_weights.shape[1] != 2 * intermediate_size:
        _refuse("intermediate_size", f"{intermediate_size} with gemm1_weights {tuple(gemm1_weights.shape)}",
                "gemm1_weights.shape[1] / 2")
    hidden_scale = None if hidden_states_scale is None else hidden_states_scale.T
    return fused_moe(
        hidden_states, routing_logits, w13=gemm1_weights, w13_scale=gemm1_weights_scale, w2=gemm2_weights,
        w2_scale=gemm2_weights_scale, routing=int(routing_method_type), top_k=top_k,
        quant_format="FP8_BLOCK128", gate_up_order=gate_up_order, num_experts=num_experts,
        local_expert_offset=local_expert_offset, local_num_experts=local_num_experts, n_group=n_group or 0,
        topk_group=topk_group or 0, routed_scaling_factor=1.0 if routed_scaling_factor is None
        else routed_scaling_factor, routing_bias=routing_bias, hidden_scale=hidden_scale, out=output,
        out_dtype=None if output is not None else "bfloat16")


def trtllm_fp8_per_tensor_scale_moe(routing_logits, routing_bias, hidden_states, gemm1_weights,
                                    output1_scales_scalar, output1_scales_gate_scalar, gemm2_weights,
                                    output2_scales_scalar, num_experts, top_k, n_group, topk_group,
                                    intermediate_size, local_expert_offset, local_num_experts,
                                    routed_scaling_factor, use_routing_scales_on_input, tile_tokens_dim=8,
                                    routing_method_type=0, enable_pdl=None, *, gate_up_order="UP_FIRST",
                                    output=None):
    """FlashInfer's trtllm_fp8_per_tensor_scale_moe on fp8moe.

    Same arguments: hidden_states already quantized to e4m3fn with the input scale a1; the caller's scale
    products output1_scales_gate_scalar = a1*w1 [E_l], output1_scales_scalar = a1*w1/a2 [E_l] and
    output2_scales_scalar = a2*w2 [E_l]. fp8moe takes the factors instead, so the adapter recovers them as
    device-side views and arithmetic (no host synchronization): hidden_scale = 1, w13_scale = a1*w1,
    a2_scale = (a1*w1)/(a1*w1/a2) of expert 0 (one global a2, as the products assume), w2_scale = output2/a2.
    The result equals the original's up to fp32 rounding of those scale products. gate_up_order defaults to
    "UP_FIRST", FlashInfer's w3/w1 order for this kernel. Returns a bf16 [T, H] tensor.

    Beyond the original: any logits/bias dtype (module docstring), natural (unshuffled) weight layout,
    numpy arrays on the CPU backend, `output=` to write into a given tensor. If you have a1, w1, a2, w2
    separately, call fp8moe.fused_moe with quant_format="FP8_PER_TENSOR" and a1_scale/a2_scale instead:
    it takes bf16 hidden states and no precomputed products.
    """
    if gemm1_weights.shape[1] != 2 * intermediate_size:
        _refuse("intermediate_size", f"{intermediate_size} with gemm1_weights {tuple(gemm1_weights.shape)}",
                "gemm1_weights.shape[1] / 2")
    a2 = output1_scales_gate_scalar[:1] / output1_scales_scalar[:1]
    return fused_moe(
        hidden_states, routing_logits, w13=gemm1_weights, w13_scale=output1_scales_gate_scalar,
        w2=gemm2_weights, w2_scale=output2_scales_scalar / a2, routing=int(routing_method_type), top_k=top_k,
        quant_format="FP8_PER_TENSOR", gate_up_order=gate_up_order, num_experts=num_experts,
        local_expert_offset=local_expert_offset, local_num_experts=local_num_experts, n_group=n_group or 0,
        topk_group=topk_group or 0, routed_scaling_factor=1.0 if routed_scaling_factor is None
        else routed_scaling_factor, routing_bias=routing_bias, hidden_scale=_scalar_one_like(hidden_states),
        a2_scale=a2, weight_on_input=bool(use_routing_scales_on_input) and int(routing_method_type) != 3,
        out=output, out_dtype=None if output is not None else "bfloat16")


_ACTIVATIONS = {"silu": "SWIGLU", "swiglu": "SWIGLU", "gelu": "GEGLU", "geglu": "GEGLU"}


def fused_experts(hidden_states, w1, w2, topk_weights, topk_ids, inplace=False, activation="silu",
                  apply_router_weight_on_input=False, use_fp8_w8a8=False, use_int8_w8a8=False,
                  use_int8_w8a16=False, use_int4_w4a16=False, ocp_mx_scheme=None, per_channel_quant=False,
                  global_num_experts=-1, expert_map=None, w1_scale=None, w2_scale=None, w1_zp=None, w2_zp=None,
                  a1_scale=None, a2_scale=None, block_shape=None, w1_bias=None, w2_bias=None, *,
                  local_expert_offset=0, out=None):
    """vLLM's fused_experts (PRECOMPUTED routing: the caller's topk_ids / topk_weights) on fp8moe, FP8 W8A8.

    Same arguments: w1 [E_l, 2I, H] (gate first, vLLM's w13), w2 [E_l, H, I], both e4m3fn; the format from
    vLLM's flags: block_shape=[128,128] -> FP8_BLOCK128 (w*_scale [E_l, N/128, K/128]); per_channel_quant
    -> FP8_PER_CHANNEL (w*_scale [E_l, N] or [E_l, N, 1]); otherwise FP8_PER_TENSOR (w*_scale [E_l] or
    [E_l,1,1], optional static a1_scale/a2_scale). activation "silu" or "gelu"; inplace writes the result
    into hidden_states. global_num_experts (-1 = w1.shape[0]) is E.

    Not supported (refused with InvalidArgumentError): non-FP8 schemes (int8/int4/mx), zero points and
    biases, expert_map. For expert parallelism pass the contiguous slice as `local_expert_offset=` (an
    extension): fp8moe owns experts [offset, offset + w1.shape[0]) and skips the others.

    Beyond the original: topk_weights in fp32/bf16/fp16 and topk_ids int32/int64 without conversion;
    out-of-range ids are an fp8moe.DataError on the CPU backend (counted in device_status on CUDA) instead
    of undefined behaviour; numpy arrays on the CPU backend; `out=` for a preallocated output.
    """
    for name, value in (("use_int8_w8a8", use_int8_w8a8), ("use_int8_w8a16", use_int8_w8a16),
                        ("use_int4_w4a16", use_int4_w4a16), ("ocp_mx_scheme", ocp_mx_scheme),
                        ("w1_zp", w1_zp), ("w2_zp", w2_zp), ("w1_bias", w1_bias), ("w2_bias", w2_bias),
                        ("expert_map", expert_map)):
        if value is not None and value is not False:
            _refuse(name, "a value", "None/False: fp8moe runs FP8 W8A8 experts without zero points or biases; "
                    "for expert parallelism pass local_expert_offset")
    if not use_fp8_w8a8:
        _refuse("use_fp8_w8a8", use_fp8_w8a8, "True (fp8moe runs FP8 W8A8 only)")
    if activation not in _ACTIVATIONS:
        _refuse("activation", repr(activation), ", ".join(_ACTIVATIONS))
    n_local = w1.shape[0]
    if block_shape is not None:
        if list(block_shape) != [128, 128]:
            _refuse("block_shape", list(block_shape), "[128, 128]")
        fmt = "FP8_BLOCK128"
    elif per_channel_quant:
        fmt = "FP8_PER_CHANNEL"
        w1_scale, w2_scale = w1_scale.reshape(n_local, -1), w2_scale.reshape(n_local, -1)
    else:
        fmt = "FP8_PER_TENSOR"
        w1_scale, w2_scale = w1_scale.reshape(-1), w2_scale.reshape(-1)
    if fmt != "FP8_PER_TENSOR" and (a1_scale is not None or a2_scale is not None):
        _refuse("a1_scale/a2_scale", "static scales", f"None with {fmt} (its activation scales are dynamic)")
    result = fused_moe(
        hidden_states, None, w13=w1, w13_scale=w1_scale, w2=w2, w2_scale=w2_scale, routing="PRECOMPUTED",
        top_k=topk_ids.shape[1], quant_format=fmt, activation=_ACTIVATIONS[activation],
        num_experts=n_local if global_num_experts in (None, -1) else global_num_experts,
        local_expert_offset=local_expert_offset, local_num_experts=n_local, topk_ids=topk_ids,
        topk_weights=topk_weights, a1_scale=a1_scale, a2_scale=a2_scale,
        weight_on_input=apply_router_weight_on_input, out=out)
    if inplace:
        if is_torch(hidden_states):
            hidden_states.copy_(result)
        else:
            hidden_states[...] = result
        return hidden_states
    return result


__all__ = ["trtllm_fp8_block_scale_moe", "trtllm_fp8_per_tensor_scale_moe", "fused_experts"]
