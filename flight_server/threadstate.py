"""Keep the Python thread state of the gRPC threads that call into the server.

pyarrow enters Python from gRPC's own threads (the middleware's ``start_call``, every
Flight handler, every item of a generated stream) with ``PyGILState_Ensure`` and leaves
with ``PyGILState_Release``. On a thread Python did not create, the outermost Release
deletes the thread state, so every entry creates a new one and deletes it again, each
time under the interpreter's global thread-list lock. Under 16 concurrent clients that
churn was the largest single cost of a call we could remove: a pyarrow server that does
nothing answered ~25% more calls per second with the thread states kept (measured with a
no-op server, 16 closed-loop clients; docs/reference/FLIGHT.md "Performance").

:func:`keep_thread_state` takes one more ``PyGILState_Ensure`` on the current thread and
never releases it: the thread's state then lives as long as the thread, and later entries
only take the GIL. This is the documented pattern for long-lived foreign threads (one
state per thread); the Ensure is re-entrant and taken while the GIL is held. The states of
gRPC threads that end are left behind (a few KB each; gRPC keeps its pool's threads).
"""

from __future__ import annotations

import ctypes
import threading

_kept = threading.local()  # per thread state: survives only once the state is kept
_ensure = ctypes.pythonapi.PyGILState_Ensure


def keep_thread_state() -> None:
    """Keep the current thread's Python thread state for the life of the thread (idempotent, cheap)."""
    if not getattr(_kept, "done", False):
        _ensure()
        _kept.done = True
