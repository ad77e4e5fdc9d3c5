"""fp8moe contexts: one per (library, backend, device), created on first use and cached for the process."""
import ctypes as C
import threading
from dataclasses import dataclass

from . import _abi, capabilities as _caps
from ._library import backend_code, resolve


@dataclass(frozen=True)
class ContextInfo:
    backend: str
    device_ordinal: int
    num_threads: int
    graph_capturable: bool
    sm_count: int
    compute_capability: int
    device_name: str


class Context:
    """An fp8moe_context. Prefer fp8moe.context(...), which caches one per backend and device."""

    def __init__(self, backend="auto", device=0, *, num_threads=0, library=None):
        self.library = resolve(library)
        api = self.library.api
        message = C.create_string_buffer(1024)
        args = _abi.ContextArgs()
        args.struct_size = C.sizeof(args)
        args.error_message = C.cast(message, C.c_void_p)
        args.error_message_size = C.sizeof(message)
        args.backend = backend_code(backend)
        args.device_ordinal = int(device or 0)
        args.num_threads = int(num_threads)
        handle = C.c_void_p()
        self.library.raise_for(api.context_create(C.byref(args), C.byref(handle)), message)
        self.handle = handle
        info = _abi.ContextInfo()
        info.struct_size = C.sizeof(info)
        self.library.raise_for(api.context_info(handle, C.byref(info)), message)
        self.info = ContextInfo(
            backend=_abi.BACKEND_NAMES.get(info.backend, str(info.backend)), device_ordinal=info.device_ordinal,
            num_threads=info.num_threads, graph_capturable=bool(info.graph_capturable), sm_count=info.sm_count,
            compute_capability=info.compute_capability, device_name=info.device_name.decode())
        self.backend = self.info.backend
        self.capabilities = _caps.read(self.library, handle)
        self.workspaces = threading.local()  # numpy/CPU scratch, one per thread (see moe.py)

    def last_error(self):
        buf = C.create_string_buffer(1024)
        status = self.library.api.last_error(self.handle, buf, C.sizeof(buf))
        return status, buf.value.decode(errors="replace")

    def close(self):
        if getattr(self, "handle", None):
            self.library.api.context_destroy(self.handle)
            self.handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown: the library may already be gone
            pass

    def __repr__(self):
        return f"<fp8moe.Context {self.backend} {self.info.device_name!r}>"


_lock = threading.Lock()
_contexts = {}


def context(backend="auto", device=0, *, num_threads=0, library=None):
    """The process-wide context for this backend and device (created once, then reused).

    backend: "auto" (CUDA when a usable GPU is present, otherwise CPU), "cpu" or "cuda";
    device: the CUDA ordinal (ignored by the CPU backend); library: a path or fp8moe.Library.
    """
    lib = resolve(library)
    code = backend_code(backend)
    key = (id(lib), code, int(device or 0) if code != _abi.BACKEND_CPU else 0, int(num_threads))
    with _lock:
        ctx = _contexts.get(key)
        if ctx is None:
            ctx = Context(code, key[2], num_threads=num_threads, library=lib)
            _contexts[key] = ctx
        return ctx


def capabilities(library=None):
    """The capability table as the library reports it with no context (the CPU backend's view)."""
    return _caps.read(resolve(library), None)
