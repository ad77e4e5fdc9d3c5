"""fp8moe.Error and one subclass per status code. Each carries the plugin's own message (the argument's
name, what was received, what is accepted) and the numeric status."""
from . import _abi


class Error(Exception):
    """A non-OK status from the plugin (or a library that cannot be loaded)."""

    status = None  # FP8MOE_STATUS_* of the subclass

    def __init__(self, message, status=None, status_name=None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status
        self.status_name = status_name

    def __str__(self):
        return f"{self.status_name}: {self.message}" if self.status_name else self.message


class InvalidArgumentError(Error, ValueError):
    status = _abi.STATUS_INVALID_ARGUMENT


class UnsupportedDtypeError(Error, TypeError):
    status = _abi.STATUS_UNSUPPORTED_DTYPE


class UnsupportedError(Error, ValueError):
    status = _abi.STATUS_UNSUPPORTED


class AbiMismatchError(Error):
    status = _abi.STATUS_ABI_MISMATCH


class BackendUnavailableError(Error, RuntimeError):
    status = _abi.STATUS_BACKEND_UNAVAILABLE


class WorkspaceTooSmallError(Error, ValueError):
    status = _abi.STATUS_WORKSPACE_TOO_SMALL


class WrongDeviceError(Error, ValueError):
    status = _abi.STATUS_WRONG_DEVICE


class OutOfMemoryError(Error, MemoryError):
    status = _abi.STATUS_OUT_OF_MEMORY


class DeviceError(Error, RuntimeError):
    status = _abi.STATUS_DEVICE_ERROR


class InternalError(Error, RuntimeError):
    status = _abi.STATUS_INTERNAL


class DataError(Error, ValueError):
    status = _abi.STATUS_DATA_ERROR


class LibraryNotFoundError(Error, OSError):
    """No libfp8moe.so.1 could be loaded from any place in the lookup order."""


_BY_STATUS = {cls.status: cls for cls in (
    InvalidArgumentError, UnsupportedDtypeError, UnsupportedError, AbiMismatchError, BackendUnavailableError,
    WorkspaceTooSmallError, WrongDeviceError, OutOfMemoryError, DeviceError, InternalError, DataError)}


def error_for(status, message, status_name=None):
    """The exception for a non-OK status; an unknown (newer) status is a plain Error, never success."""
    cls = _BY_STATUS.get(status, Error)
    return cls(message, status=status, status_name=status_name)
