"""Lifetimes of C handles.

A Handle owns one C object. Calls borrow it (`with h.use() as p:`) so that
close() from one thread never frees an object another thread is inside:
the destroy runs when the last borrower leaves. A closed handle raises
ValueError("... is closed") instead of passing a dangling pointer to C.
Objects keep their parents (context, device, model) alive by reference, so
the C library's ownership rules (devices live as long as their context)
hold whatever order Python collects them in."""
from __future__ import annotations

import ctypes
import threading
from contextlib import contextmanager
from typing import Callable, Iterator

from . import _abi
from ._errors import check


class Handle:
    __slots__ = ("_ptr", "_destroy", "_what", "_lock", "_users", "_closed", "__weakref__")

    def __init__(self, ptr: int | None, destroy: Callable[[int], None] | None, what: str) -> None:
        self._ptr: int | None = ptr
        self._destroy = destroy
        self._what = what
        self._lock = threading.Lock()
        self._users = 0
        self._closed = False

    @contextmanager
    def use(self) -> Iterator[int]:
        with self._lock:
            if self._closed or not self._ptr:
                raise ValueError(f"{self._what} is closed")
            self._users += 1
        try:
            yield self._ptr  # type: ignore[misc]  # checked above
        finally:
            with self._lock:
                self._users -= 1
                last = self._closed and self._users == 0
            if last:
                self._free()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            idle = self._users == 0
        if idle:
            self._free()

    @property
    def closed(self) -> bool:
        return self._closed

    def _free(self) -> None:
        ptr, self._ptr = self._ptr, None
        if ptr and self._destroy:
            self._destroy(ptr)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class Context:
    """A qp_context: the loaded backends and their devices, and the
    per-thread last error. One default context serves the whole process
    (`qport.context()`); devices belong to it for the life of the process."""

    def __init__(self) -> None:
        p = ctypes.c_void_p()
        check(_abi.lib.qp_context_create(ctypes.byref(p)), None)
        # never destroyed: at interpreter exit, layers and devices may still
        # be collected after it, and backends are process-lifetime anyway
        self._h = Handle(p.value, None, "qport context")

    @property
    def ptr(self) -> int:
        # the default context is never closed; objects made from a context
        # keep it alive, so a raw pointer is safe while they exist
        with self._h.use() as p:
            return p

    def check(self, status: int) -> None:
        check(status, self.ptr)


_default: Context | None = None
_default_lock = threading.Lock()


def context() -> Context:
    """The process-wide context every qport object is made in."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Context()
        return _default
