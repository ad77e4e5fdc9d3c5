"""GPU tests (marked `gpu`): the CUDA backend through torch against the pure-torch reference and the CPU
backend, inside CUDA graph capture and replay, under torch.compile(fullgraph=True), and on non-default
streams. Skipped without a usable CUDA device and a library built with the CUDA backend."""
import pytest

import fp8moe
from conftest import FORMATS, needs_torch, rel_err, torch
from test_torch_cpu import ROUTINGS, reference, run, torch_problem


def _cuda_ready():
    if torch is None or not torch.cuda.is_available():
        return "no CUDA device visible to torch"
    info = fp8moe.backend_info("cuda")
    return None if info.available else f"fp8moe's CUDA backend is unavailable: {info.reason}"


pytestmark = [pytest.mark.gpu, needs_torch, pytest.mark.skipif(_cuda_ready() is not None,
                                                               reason=str(_cuda_ready()))]
TOL = 2e-2  # fp32 sums in another order may flip an fp8 code of the intermediate


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("routing", ROUTINGS)
def test_cuda_against_pure_torch_reference(routing, fmt):
    p = torch_problem(fmt, "cuda", t=33)
    got = run(p, routing, fmt)
    assert got.is_cuda and fp8moe.context("cuda").backend == "cuda"
    want = reference(p, routing, fmt)
    assert rel_err(got.float().cpu().numpy(), want.float().cpu().numpy()) < TOL


@pytest.mark.parametrize("fmt", FORMATS)
def test_cuda_matches_cpu_backend(fmt):
    p = torch_problem(fmt, "cuda", t=64, h=512, i=256, e=16)
    got = run(p, "DEEPSEEK_V3", fmt)
    cpu = run({k: v.cpu() for k, v in p.items()}, "DEEPSEEK_V3", fmt)
    assert rel_err(got.float().cpu().numpy(), cpu.float().numpy()) < TOL


def test_cuda_graph_capture_and_replay():
    p = torch_problem("FP8_BLOCK128", "cuda", t=16)
    static_hidden = p["hidden_states"].clone()
    static_logits = p["router_logits"].clone()
    args = dict(w13=p["w13"], w13_scale=p["w13_scale"], w2=p["w2"], w2_scale=p["w2_scale"],
                routing="DEEPSEEK_V3", top_k=4, n_group=4, topk_group=2, routed_scaling_factor=2.5,
                routing_bias=p["routing_bias"], quant_format="FP8_BLOCK128")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside capture, as torch recommends
        fp8moe.fused_moe(static_hidden, static_logits, **args)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out = fp8moe.fused_moe(static_hidden, static_logits, **args)
    for seed in (1, 2):
        g = torch.Generator(device="cuda").manual_seed(seed)
        static_hidden.copy_(torch.rand(static_hidden.shape, generator=g, device="cuda") * 2 - 1)
        static_logits.copy_(torch.randn(static_logits.shape, generator=g, device="cuda"))
        graph.replay()
        eager = fp8moe.fused_moe(static_hidden, static_logits, **args)
        torch.cuda.synchronize()
        assert torch.equal(static_out, eager), seed
        assert static_out.abs().max() > 0


def test_torch_compile_fullgraph_inductor():
    p = torch_problem("FP8_PER_TENSOR", "cuda", t=16)

    def layer(hidden, logits):
        y = fp8moe.fused_moe(hidden * 1.0, logits, w13=p["w13"], w13_scale=p["w13_scale"], w2=p["w2"],
                             w2_scale=p["w2_scale"], routing="RENORMALIZE", top_k=4,
                             quant_format="FP8_PER_TENSOR")
        return y.float() + 1.0

    torch._dynamo.reset()
    compiled = torch.compile(layer, fullgraph=True)
    want = layer(p["hidden_states"], p["router_logits"])
    assert torch.equal(compiled(p["hidden_states"], p["router_logits"]), want)


def test_torch_compile_reduce_overhead_uses_cuda_graphs():
    p = torch_problem("FP8_BLOCK128", "cuda", t=16)

    def layer(hidden, logits):
        return fp8moe.fused_moe(hidden, logits, w13=p["w13"], w13_scale=p["w13_scale"], w2=p["w2"],
                                w2_scale=p["w2_scale"], routing="RENORMALIZE", top_k=4,
                                quant_format="FP8_BLOCK128").float()

    torch._dynamo.reset()
    compiled = torch.compile(layer, fullgraph=True, mode="reduce-overhead")
    want = layer(p["hidden_states"], p["router_logits"])
    for _ in range(3):  # record, then replay
        got = compiled(p["hidden_states"], p["router_logits"]).clone()
    assert torch.equal(got, want)


def test_runs_on_the_current_non_default_stream():
    """The input is produced on a side stream after a long sleep; fused_moe on that stream must see it."""
    p = torch_problem("FP8_BLOCK128", "cuda", t=16)
    args = dict(w13=p["w13"], w13_scale=p["w13_scale"], w2=p["w2"], w2_scale=p["w2_scale"], routing="RENORMALIZE",
                top_k=4, quant_format="FP8_BLOCK128")
    want = fp8moe.fused_moe(p["hidden_states"], p["router_logits"], **args)
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(200_000_000)
        hidden = p["hidden_states"] * 1
        got = fp8moe.fused_moe(hidden, p["router_logits"], **args)
    side.synchronize()
    assert torch.equal(got, want)


def test_device_status_counts_out_of_range_ids():
    p = torch_problem("FP8_PER_CHANNEL", "cuda", t=4)
    ids = torch.tensor([[0, 1], [2, 99], [3, 4], [-1, 5]], dtype=torch.int32, device="cuda")
    status = torch.full((1,), -7, dtype=torch.int32, device="cuda")
    fp8moe.fused_moe(p["hidden_states"], None, w13=p["w13"], w13_scale=p["w13_scale"], w2=p["w2"],
                     w2_scale=p["w2_scale"], topk_ids=ids, topk_weights=torch.ones(4, 2, device="cuda"),
                     quant_format="FP8_PER_CHANNEL", device_status=status)
    assert int(status.item()) == 2


def test_block_scale_adapter_on_cuda():
    p = torch_problem("FP8_BLOCK128", "cuda", t=8)
    want = run(p, "DEEPSEEK_V3", "FP8_BLOCK128")
    got = fp8moe.trtllm_fp8_block_scale_moe(
        p["router_logits"], p["routing_bias"], p["hidden_states"], None, p["w13"], p["w13_scale"], p["w2"],
        p["w2_scale"], 8, 4, 4, 2, 128, 0, 8, 2.5, routing_method_type=2)
    assert torch.equal(got, want)


def test_wrong_device_from_torch():
    p = torch_problem("FP8_BLOCK128", "cuda", t=4)
    with pytest.raises(fp8moe.WrongDeviceError, match="router_logits"):
        run(dict(p, router_logits=p["router_logits"].cpu()), "RENORMALIZE", "FP8_BLOCK128")
