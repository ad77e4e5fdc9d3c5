"""Loading, negotiation, backends, contexts and the capability table, all as the plugin reports them."""
import os
import subprocess
import sys

import pytest

import fp8moe
from fp8moe import _abi, _library


def test_loads_and_negotiates():
    lib = fp8moe.library()
    assert lib.abi_major == 1 and lib.agreed_minor == 0
    assert lib.version == fp8moe.version() and lib.version.count(".") == 2
    assert os.path.exists(lib.path) or lib.path == fp8moe.SONAME


@pytest.mark.parametrize("args, refusal, words", [
    ((5, 5), 2, "older than the host accepts"),
    ((0, 0, 2), 1, "another ABI major"),
    ((1, 0), 3, "range is empty"),
])
def test_negotiation_refusals_carry_the_plugin_message(args, refusal, words):
    with pytest.raises(fp8moe.AbiMismatchError) as info:
        fp8moe.library().negotiate(*args)
    assert info.value.refusal == refusal
    assert words in info.value.message and "negotiation." in info.value.message


def test_lookup_order(tmp_path, monkeypatch):
    monkeypatch.setenv("FP8MOE_LIBRARY", "/nonexistent/env/libfp8moe.so.1")
    assert _library.candidates("/explicit/lib.so") == [("/explicit/lib.so", "explicit path")]
    assert _library.candidates() == [("/nonexistent/env/libfp8moe.so.1", "FP8MOE_LIBRARY")]
    with pytest.raises(fp8moe.LibraryNotFoundError, match="/nonexistent/env"):  # no silent fall-through
        fp8moe.Library()
    monkeypatch.delenv("FP8MOE_LIBRARY")
    order = [how for _, how in _library.candidates()]
    assert order[-1] == "system SONAME"
    assert order[0] == ("bundled in the wheel" if _library.BUNDLED.exists() else "system SONAME")
    real = fp8moe.library().path
    assert fp8moe.Library(real).version == fp8moe.version()  # an explicit path wins


def test_not_a_plugin(tmp_path):
    with pytest.raises(fp8moe.LibraryNotFoundError, match="does not export fp8moe_get_api"):
        fp8moe.Library(_libc_path())


def _libc_path():
    import ctypes.util
    return ctypes.util.find_library("c") or "libc.so.6"


def test_backend_info():
    cpu = fp8moe.backend_info("cpu")
    assert cpu.available and cpu.compiled_in and cpu.name == "cpu" and cpu.device_count == 1
    cuda = fp8moe.backend_info("cuda")
    assert cuda.name == "cuda"
    assert cuda.available or cuda.reason  # never silently unavailable


def test_contexts_are_cached_per_backend_and_device():
    a, b = fp8moe.context("cpu"), fp8moe.context("cpu")
    assert a is b and a.backend == "cpu" and a.info.device_ordinal == -1
    assert fp8moe.context("cpu", num_threads=1) is not a
    assert fp8moe.context("cpu", num_threads=1).info.num_threads == 1


def test_unknown_backend_is_the_plugins_refusal():
    with pytest.raises(fp8moe.InvalidArgumentError, match="backend: unknown backend; got 7"):
        fp8moe.Context(7)


def test_cuda_unavailable_raises_with_reason():
    if fp8moe.backend_info("cuda").available:
        pytest.skip("a CUDA device is usable here")
    with pytest.raises(fp8moe.BackendUnavailableError, match="CUDA backend is unavailable") as info:
        fp8moe.context("cuda")
    assert info.value.status == _abi.STATUS_BACKEND_UNAVAILABLE


def test_capabilities_come_from_the_plugin():
    caps = fp8moe.context("cpu").capabilities
    assert caps == fp8moe.capabilities()  # the NULL-context query describes the CPU backend too
    assert caps.backend == "cpu"
    # Row i has id i, names unique; a method/format with no backend would be a dead row.
    assert [m.id for m in caps.routing_methods.values()] == list(range(len(caps.routing_methods)))
    assert all(m.backends for m in caps.routing_methods.values())
    assert "uses_topk_input" in caps.routing_methods["PRECOMPUTED"].flags
    assert "uses_bias" in caps.routing_methods["DEEPSEEK_V3"].flags
    assert caps.arguments["router_logits"].dtypes == ("float32", "bfloat16", "float16")
    assert caps.arguments["output"].output and caps.arguments["w13"].inner_contiguous
    assert caps.limits.max_top_k >= 8 and caps.limits.max_experts >= 256
    assert {q.k_multiple for q in caps.quant_formats.values()} == {128}


def test_capabilities_match_fp8moe_info():
    """The Python view and the C tool print the same table (names of every row)."""
    lib = fp8moe.library().path
    info = os.environ.get("FP8MOE_INFO") or os.path.join(os.path.dirname(os.path.realpath(lib)), "..", "tools",
                                                         "fp8moe-info")
    if not os.path.exists(info):
        pytest.skip("no fp8moe-info: set FP8MOE_INFO (scripts/test-python.sh does)")
    text = subprocess.run([info, "--library", lib], capture_output=True, text=True, check=True).stdout
    caps = fp8moe.capabilities()
    for table in (caps.routing_methods, caps.quant_formats, caps.activations):
        for name in table:
            assert name in text


def test_status_mapping_covers_every_code():
    from fp8moe.errors import error_for
    for code in range(1, 12):
        err = error_for(code, "m")
        assert isinstance(err, fp8moe.Error) and err.status == code
    assert type(error_for(99, "newer")) is fp8moe.Error  # an unknown status is still a failure


def test_import_without_torch_registers_nothing():
    code = "import sys; sys.modules['torch'] = None; import fp8moe; print(fp8moe.HAS_TORCH)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
