"""hvrun.torch's handles: integers, as Horovod's, mapping to the library's handles.

The in-place asynchronous allreduce of a contiguous CPU tensor on the global set (a training
step's call, per tensor) is registered in the extension's table (_table: submitted, waited for
and handed back there, python/src/async_table.h); every other call here. Both draw their
integers from the table's counter and share the set of names in flight.

A name stays in flight from its submission until synchronize() returns its handle's result.
Submitting a name that is in flight raises ValueError at the call, before anything is sent (as
Horovod refuses a duplicate name when it is enqueued). Every rank runs the same program, so
every rank refuses the same call and no peer is left waiting for a tensor that never comes.
"""
import functools
import threading

import torch

from hvrun import _core, _state
from hvrun.exceptions import raise_for_status
from hvrun.torch.tensor_refs import _TORCH_DTYPES


class _Pending:
    __slots__ = ("handles", "finish", "keep_alive", "names")

    def __init__(self, handles, finish, keep_alive, names):
        self.handles = handles
        self.finish = finish
        self.keep_alive = keep_alive  # tensors the library reads or writes until completion
        self.names = names


_handle_map = {}
_in_flight = set()
_lock = threading.Lock()
# The extension's table takes the tensors of the dtypes the library reduces.
_table = _core.AsyncTable(_in_flight, _TORCH_DTYPES)
_new_id = _table.next_id


def _tensor_api(running_version):
    """hvrun.torch._tensor_api's table when it was built against `running_version` of torch
    (its C++ ABI is that version's only), else None: the calls then read tensors through Python.
    The version it was built against is read from a Python file first, so that a module built
    for another torch (a wheel on a machine with any PyTorch 2.x) is never even loaded: loading
    it would resolve its symbols against a libtorch whose layout it does not know."""
    try:
        from hvrun.torch._tensor_api_build import TORCH_VERSION
    except ImportError:  # not built (no torch C++ headers at build time)
        return None
    if TORCH_VERSION != running_version:
        return None
    from hvrun.torch import _tensor_api
    return _tensor_api.api


_api = _tensor_api(torch.__version__)
if _api is not None:
    _table.use_tensor_api(_api)


def check_not_in_flight(names):
    """ValueError when one of `names` (or a name given twice) is still in flight."""
    with _lock:
        busy = [n for n in names if n in _in_flight]
    if not busy and len(set(names)) == len(names):
        return
    shown = busy[0] if busy else next(n for n in names if names.count(n) > 1)
    rank = _state.worker().rank if _state.is_initialized() else "?"
    raise ValueError(
        "rank %s: Requested to allreduce, allgather, or broadcast a tensor with the same name as "
        "another tensor that is currently being processed ('%s': synchronize its handle first). "
        "If you want to request another tensor, use a different tensor name." % (rank, shown))


def check_name_free(name):
    """check_not_in_flight for one name, without the lock when it is free (the common case: a
    set's membership test is atomic under the GIL)."""
    if name in _in_flight:
        check_not_in_flight([name])


def register(names, handles, finish, keep_alive):
    """A new integer handle for library handles submitted under `names`."""
    with _lock:
        handle = _new_id()
        _handle_map[handle] = _Pending(handles, finish, keep_alive, list(names))
        _in_flight.update(names)
    return handle


def register_one(name, handle, finish, tensor):
    """register() for one library handle whose result is finish(tensor), kept as the tuple
    (handle, finish, tensor, name): what the in-place async calls register, without lists or a
    closure. A dict store, a set add and a counter step are each atomic under the GIL, so this
    takes no lock; `tensor` is read and written by the library until completion."""
    number = _new_id()
    _handle_map[number] = (handle, finish, tensor, name)
    _in_flight.add(name)
    return number


def poll(handle):
    """True when the asynchronous operation `handle` finished (successfully or not)."""
    done = _table.poll(handle)
    if done is not NotImplemented:
        return done
    pending = _handle_map.get(handle)
    if pending is None:
        raise ValueError("handle %r was not created or has been synchronized already" % (handle,))
    if type(pending) is tuple:
        return pending[0].poll()
    return all(h.poll() for h in pending.handles)


def synchronize(handle):
    """Waits for `handle` and returns its result; raises HorovodInternalError when it failed.

    The wait goes through the worker (Worker.wait): this thread sends, or runs by agreement
    with the other ranks, what the worker still holds back, instead of waiting for the
    background thread to wake up and do it."""
    result = _table.synchronize(_state._worker, handle, _state._op_timeout_s)
    if result is not NotImplemented:
        if result.__class__ is tuple:
            raise_for_status(*result)
        return result
    pending = _handle_map.pop(handle, None)
    if pending is None:
        return None
    worker = _state.worker()
    timeout = _state.op_timeout_s()
    if type(pending) is tuple:
        handle, finish, tensor, name = pending
        try:
            failed = worker.wait(handle, timeout)
            if failed is not None:
                raise_for_status(*failed)
            return finish(tensor)
        finally:
            _in_flight.discard(name)
    try:
        # Every handle is waited for before one's failure is raised: the others were submitted
        # on every rank, and one left running would hold its name in the library after this
        # rank moved on (a later call of that name would then be refused here only).
        first_failure = None
        for h in pending.handles:
            failed = worker.wait(h, timeout)
            if failed is not None and first_failure is None:
                first_failure = failed
        if first_failure is not None:
            raise_for_status(*first_failure)
        return pending.finish(pending.handles)
    finally:
        with _lock:
            _in_flight.difference_update(pending.names)


def synchronize_all(handles):
    """synchronize() of every handle, in order, even after one failed; then raises the first
    failure, or returns the results. For helpers that submit several collectives at once: a
    handle left unsynchronized after an error keeps its name in flight on this rank only."""
    results, first_error = [], None
    for handle in handles:
        try:
            results.append(handle() if callable(handle) else synchronize(handle))
        except Exception as error:  # noqa: BLE001 - re-raised below, after the others finished
            results.append(None)
            if first_error is None:
                first_error = error
    if first_error is not None:
        raise first_error
    return results


def settle(handles):
    """Waits for every handle, dropping results and errors: when another error is the one to
    raise, what was submitted still completes here rather than staying in flight."""
    try:
        synchronize_all(handles)
    except Exception:  # noqa: BLE001 - the caller raises its own error
        pass


def run_together(submissions):
    """Calls each of `submissions` (each submits one collective and returns its handle), then
    synchronize_all() of their handles. When a submission raises, the handles already made
    are synchronized before the error goes up, so nothing is left in flight."""
    handles = []
    try:
        for submit in submissions:
            handles.append(submit())
    except BaseException:
        settle(handles)
        raise
    return synchronize_all(handles)


def _raise_failure(failed):
    raise_for_status(*failed)


# The steady state's waits (a handle of the extension's table) never enter the Python function.
synchronize = functools.update_wrapper(
    _core.fast_function("synchronize", synchronize, _table, _state,
                        raise_failure=_raise_failure), synchronize)


def clear():
    """shutdown(): every handle is gone (the library failed them)."""
    with _lock:
        _table.clear()
        _handle_map.clear()
        _in_flight.clear()
