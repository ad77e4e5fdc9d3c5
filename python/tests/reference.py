"""A pure-torch MoE reference of docs/DESIGN.md's computation (fp32 math, dynamic activation scales), for
checking the plugin from Python. Independent of fp8moe: it never calls the library."""
import torch

FLT_MIN = torch.finfo(torch.float32).tiny


def e4m3(x):
    """Round to e4m3fn as fp8moe does: RNE with saturation to +-448, NaN stays NaN."""
    return x.clamp(-448.0, 448.0).to(torch.float8_e4m3fn).to(torch.float32)


def _quant(x, fmt):
    """Dynamic quantization of rows x [R, C]: (codes as fp32, scales). Scales: [] / [R, C/128] / [R]."""
    a = torch.where(torch.isfinite(x), x.abs(), torch.zeros_like(x))
    if fmt == "FP8_PER_TENSOR":
        amax = a.max() if a.numel() else torch.zeros((), device=x.device)
        s = torch.clamp(amax / 448.0, min=FLT_MIN)
        return e4m3(x / s), s
    if fmt == "FP8_PER_CHANNEL":
        s = torch.clamp(a.amax(dim=1) / 448.0, min=FLT_MIN)
        return e4m3(x / s[:, None]), s
    r, c = x.shape
    s = torch.clamp(a.view(r, c // 128, 128).amax(-1) / 448.0, min=FLT_MIN)
    return e4m3(x / s.repeat_interleave(128, dim=1)), s


def _gemm(q, s, w, ws, fmt):
    """q [R,C] codes with scales s, w [N,C] codes with scales ws -> [R,N] fp32."""
    if fmt == "FP8_PER_TENSOR":
        return (q @ w.T) * (s * ws)
    if fmt == "FP8_PER_CHANNEL":
        return (q @ w.T) * s[:, None] * ws[None, :]
    out = torch.zeros(q.shape[0], w.shape[0], device=q.device)
    for kb in range(q.shape[1] // 128):
        part = q[:, kb * 128:(kb + 1) * 128] @ w[:, kb * 128:(kb + 1) * 128].T
        out += part * s[:, kb:kb + 1] * ws[:, kb].repeat_interleave(128)[None, :]
    return out


def route(logits, method, top_k, n_group=0, topk_group=0, scale=1.0, bias=None):
    """(ids [T,K], weights [T,K]) for the routing methods the tests use."""
    logits = logits.float()
    if method == "DEFAULT":
        p = torch.softmax(logits, dim=-1)
        w, ids = torch.topk(p, top_k, dim=-1)
    elif method == "RENORMALIZE":
        v, ids = torch.topk(logits, top_k, dim=-1)
        w = torch.softmax(v, dim=-1)
    elif method == "DEEPSEEK_V3":
        sig = torch.sigmoid(logits)
        key = sig + (bias.float() if bias is not None else 0.0)
        t, e = key.shape
        grouped = key.view(t, n_group, e // n_group)
        gscore = grouped.topk(2, dim=-1).values.sum(-1)
        keep = gscore.topk(topk_group, dim=-1).indices
        mask = torch.zeros(t, n_group, dtype=torch.bool, device=logits.device)
        mask.scatter_(1, keep, True)
        key = key.masked_fill(~mask.repeat_interleave(e // n_group, dim=1), float("-inf"))
        ids = key.topk(top_k, dim=-1).indices
        sel = sig.gather(1, ids)
        w = sel / (sel.sum(-1, keepdim=True) + 1e-20)
    else:
        raise ValueError(method)
    return ids, w * scale


BF16_MAX = 3.38953139e38


def _slot_bf16(y):
    """Slot outputs are kept as bf16 before the combine (docs/DESIGN.md "Combine"): RNE, finite stays finite."""
    y = torch.where(torch.isfinite(y), y.clamp(-BF16_MAX, BF16_MAX), y)
    return y.to(torch.bfloat16).float()


def moe(hidden, w13, w13_scale, w2, w2_scale, ids, weights, fmt, local_offset=0, activation="SWIGLU",
        out_dtype=torch.bfloat16):
    """out [T,H] for bf16/fp16 hidden states, routing (ids, weights) over global experts."""
    x = hidden.float()
    t_count, h = x.shape
    n_local = w13.shape[0]
    inter = w13.shape[1] // 2
    xq, xs = _quant(x, fmt)
    slots = [(t, k) for t in range(t_count) for k in range(ids.shape[1])
             if local_offset <= int(ids[t, k]) < local_offset + n_local]
    acts = []
    for t, k in slots:
        e = int(ids[t, k]) - local_offset
        s = xs if fmt == "FP8_PER_TENSOR" else xs[t:t + 1]
        hrow = _gemm(xq[t:t + 1], s, w13[e].float(), w13_scale[e].float(), fmt)[0]
        g, u = hrow[:inter], hrow[inter:]
        a = g / (1.0 + torch.exp(-g)) if activation == "SWIGLU" else 0.5 * g * (1.0 + torch.erf(g / 2 ** 0.5))
        acts.append(a * u)
    out = torch.zeros(t_count, h, device=hidden.device)
    if not slots:
        return out.to(out_dtype)
    aq, as_ = _quant(torch.stack(acts), fmt)
    for i, (t, k) in enumerate(slots):
        e = int(ids[t, k]) - local_offset
        s = as_ if fmt == "FP8_PER_TENSOR" else as_[i:i + 1]
        y = _slot_bf16(_gemm(aq[i:i + 1], s, w2[e].float(), w2_scale[e].float(), fmt)[0])
        out[t] += weights[t, k].float() * y
    return out.to(out_dtype)
