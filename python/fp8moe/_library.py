"""Finding, loading and negotiating with libfp8moe.so.1.

Lookup order: an explicit path, then $FP8MOE_LIBRARY, then the copy inside the wheel (fp8moe/lib/), then the
system SONAME (the .deb/.rpm install). An explicit path or $FP8MOE_LIBRARY that cannot be loaded is an error,
never a silent fall-through to another copy.
"""
import ctypes as C
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from . import _abi
from .errors import AbiMismatchError, LibraryNotFoundError, error_for

SONAME = "libfp8moe.so.1"
BUNDLED = Path(__file__).resolve().parent / "lib" / SONAME


@dataclass(frozen=True)
class BackendInfo:
    """What one backend can do on this machine (fp8moe_backend_info)."""
    backend: str
    name: str
    compiled_in: bool
    available: bool
    device_count: int
    device_name: str
    reason: str


def candidates(path=None):
    """(path, how it was found) in lookup order; stops after an explicit choice."""
    if path is not None:
        return [(str(path), "explicit path")]
    env = os.environ.get("FP8MOE_LIBRARY")
    if env:
        return [(env, "FP8MOE_LIBRARY")]
    found = []
    if BUNDLED.exists():
        found.append((str(BUNDLED), "bundled in the wheel"))
    found.append((SONAME, "system SONAME"))
    return found


class Library:
    """A loaded, negotiated plugin: its function table and version."""

    def __init__(self, path=None):
        tried = []
        self._dll = None
        for candidate, how in candidates(path):
            try:
                self._dll = C.CDLL(candidate, mode=os.RTLD_NOW | os.RTLD_LOCAL)
                self.path, self.found_by = candidate, how
                break
            except OSError as exc:
                tried.append(f"{candidate} ({how}): {exc}")
        if self._dll is None:
            raise LibraryNotFoundError(
                "cannot load libfp8moe.so.1; tried " + "; ".join(tried) +
                ". Install the fp8moe wheel or the libfp8moe1 package, or set FP8MOE_LIBRARY")
        try:
            get_api = self._dll.fp8moe_get_api
        except AttributeError:
            raise LibraryNotFoundError(f"{self.path} does not export fp8moe_get_api") from None
        get_api.restype, get_api.argtypes = _abi.GetApiFn
        self._get_api = get_api
        self.negotiation, api = self.negotiate(0, _abi.ABI_VERSION_MINOR)
        if api.contents.struct_size < C.sizeof(_abi.Api):
            raise AbiMismatchError(
                f"{self.path}: function table of {api.contents.struct_size} bytes, ABI 1.0 needs "
                f"{C.sizeof(_abi.Api)}", status=_abi.STATUS_ABI_MISMATCH)
        self.api = api.contents
        self._api_ptr = api  # keeps the pointer object alive with the table it points to
        self.abi_major = self.negotiation.plugin_abi_major
        self.abi_minor = self.negotiation.plugin_abi_minor
        self.agreed_minor = self.negotiation.agreed_minor
        major, minor, patch = C.c_uint32(), C.c_uint32(), C.c_uint32()
        self.api.get_version(C.byref(major), C.byref(minor), C.byref(patch))
        self.version = f"{major.value}.{minor.value}.{patch.value}"

    def negotiate(self, min_minor, max_minor, major=_abi.ABI_VERSION_MAJOR):
        """One negotiation round with an explicit range: (fp8moe_negotiation, api pointer). A refusal raises
        the status's Error (AbiMismatchError for a range refusal) with the plugin's message and `.refusal`."""
        n = _abi.Negotiation()
        n.struct_size = C.sizeof(n)
        n.host_abi_major, n.host_min_minor, n.host_max_minor = major, min_minor, max_minor
        api = C.POINTER(_abi.Api)()
        status = self._get_api(C.byref(n), C.byref(api))
        if status != _abi.STATUS_OK:
            err = error_for(status, n.message.decode(), self.status_string(status) if hasattr(self, "api") else None)
            err.refusal = n.refusal
            raise err
        if not api:
            raise AbiMismatchError("fp8moe_get_api returned OK without a function table",
                                   status=_abi.STATUS_ABI_MISMATCH)
        return n, api

    def status_string(self, status):
        return self.api.status_string(status).decode()

    def raise_for(self, status, buffer):
        """Raises the fp8moe.Error subclass of a non-OK status with the message the plugin wrote."""
        if status != _abi.STATUS_OK:
            raise error_for(status, buffer.value.decode(errors="replace"), self.status_string(status))

    def backend_info(self, backend):
        """fp8moe_backend_info for "cpu" or "cuda"."""
        code = backend_code(backend)
        info = _abi.BackendInfo()
        info.struct_size = C.sizeof(info)
        info.backend = code
        status = self.api.backend_info(C.byref(info))
        if status != _abi.STATUS_OK:
            raise error_for(status, f"backend_info({backend!r})", self.status_string(status))
        return BackendInfo(
            backend=_abi.BACKEND_NAMES[code], name=info.name.decode(), compiled_in=bool(info.compiled_in),
            available=bool(info.available), device_count=info.device_count,
            device_name=info.device_name.decode(), reason=info.reason.decode())

    def __repr__(self):
        return (f"<fp8moe.Library {self.version} ABI {self.abi_major}.{self.abi_minor} "
                f"(agreed 1.{self.agreed_minor}) from {self.path} ({self.found_by})>")


def backend_code(backend):
    if isinstance(backend, int):
        return backend
    for code, name in _abi.BACKEND_NAMES.items():
        if name == str(backend).lower():
            return code
    raise ValueError(f"backend: got {backend!r}; accepted 'auto', 'cpu', 'cuda'")


_lock = threading.Lock()
_loaded = {}


def load(path=None):
    """The Library for `path` (or the lookup order), loaded and negotiated once per process."""
    key = str(path) if path is not None else (os.environ.get("FP8MOE_LIBRARY") or None)
    with _lock:
        lib = _loaded.get(key)
        if lib is None:
            lib = Library(path)
            _loaded[key] = lib
        return lib


def resolve(library):
    """A Library object for `library`: a Library as is, else a path (or None for the lookup order)."""
    return library if isinstance(library, Library) else load(library)
