"""qp_status -> Python exceptions.

Where vLLM raises, the exception is (a subclass of) the class vLLM raises
(qp_status_exception: ValueError, NotImplementedError, RuntimeError) and its
message is vLLM's, so `pytest.raises(ValueError, match=...)` written against
vLLM works here. Every exception is also a qport.Error carrying the C
status, file, JSON key path and layer."""
from __future__ import annotations

import ctypes

from . import _abi


class Error(Exception):
    """A qport C call failed. `status` is the C status name
    ("QP_ERR_VALUE"); `exception` the class vLLM raises ("ValueError",
    "NotImplementedError", "RuntimeError"; None where vLLM has none);
    `message` vLLM's message (or qport's); `file`, `key_path`, `layer` say
    where; `detail` is qp_last_error's one line."""

    status: str = "QP_ERR_INTERNAL"
    exception: str | None = None

    def __init__(self, message: str, *, status: str | None = None, file: str = "", key_path: str = "",
                 layer: str = "", detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        if status:
            self.status = status
        self.file, self.key_path, self.layer = file, key_path, layer
        self.detail = detail or message

    def __str__(self) -> str:
        return self.message


class InvalidArgumentError(Error, ValueError):
    status = "QP_ERR_INVALID_ARGUMENT"


class QportIOError(Error, OSError):
    status = "QP_ERR_IO"

    def __str__(self) -> str:  # OSError's str() would show the args tuple
        return self.message


class ParseError(Error, ValueError):
    status = "QP_ERR_PARSE"


class UnsupportedError(Error):
    status = "QP_ERR_UNSUPPORTED"


class VllmValueError(Error, ValueError):
    """vLLM raises ValueError."""
    status = "QP_ERR_VALUE"
    exception = "ValueError"


class VllmNotImplementedError(Error, NotImplementedError):
    """vLLM raises NotImplementedError."""
    status = "QP_ERR_NOT_IMPLEMENTED"
    exception = "NotImplementedError"


class CapabilityError(Error, RuntimeError):
    """vLLM raises RuntimeError: the GPU's capability is below the scheme's."""
    status = "QP_ERR_CAPABILITY"
    exception = "RuntimeError"


class QportMemoryError(Error, MemoryError):
    status = "QP_ERR_OUT_OF_MEMORY"


class NotFoundError(Error, LookupError):
    status = "QP_ERR_NOT_FOUND"


class DeviceError(Error, RuntimeError):
    status = "QP_ERR_DEVICE"


class InternalError(Error):
    status = "QP_ERR_INTERNAL"


_BY_STATUS = {c.status: c for c in (InvalidArgumentError, QportIOError, ParseError, UnsupportedError, VllmValueError,
                                    VllmNotImplementedError, CapabilityError, QportMemoryError, NotFoundError,
                                    DeviceError, InternalError)}


def exception_for(status: int, ctx: int | None) -> Error:
    """The exception of a failed call, from this thread's last error on ctx
    (the C library keeps it per context and per thread)."""
    name = _abi.s(_abi.lib.qp_status_str(status))
    cls = _BY_STATUS.get(name, InternalError)
    info = _abi.ErrorInfo()
    msg = detail = file = key = layer = ""
    if ctx and _abi.lib.qp_last_error_info(ctx, ctypes.byref(info)) == _abi.QP_OK and info.status == status:
        msg = _abi.s(info.message) or ""
        file, key, layer = (_abi.s(info.file) or "", _abi.s(info.key_path) or "", _abi.s(info.layer) or "")
        detail = _abi.s(_abi.lib.qp_last_error(ctx)) or msg
    if not msg:
        msg = name
    # vLLM's own errors keep vLLM's bare message; qport's get the context line
    if info.exception is None and detail:
        msg = detail
    return cls(msg, status=name, file=file, key_path=key, layer=layer, detail=detail)


def check(status: int, ctx: int | None) -> None:
    if status != _abi.QP_OK:
        raise exception_for(status, ctx)


for _c in (Error, *_BY_STATUS.values()):
    _c.__module__ = "qport"  # tracebacks say qport.CapabilityError, not qport._errors...
