"""Python stacks for hvrun's autopsies.

When a job looks stuck (a stall warning, SIGUSR1 to hvrun), every rank reports what it is doing;
importing hvrun registers `python_stacks` with the worker library, which calls it on a thread of
its own with the GIL taken (bounded: a thread that never releases the GIL leaves the report with
native stacks only). Nothing is asked of the trainer."""
import atexit
import sys
import threading

_MAX_FRAMES = 64


def python_stacks():
    """[(native thread id, name, [(function, file, line), ... innermost first]), ...]"""
    threads = {t.ident: t for t in threading.enumerate()}
    stacks = []
    for ident, frame in sys._current_frames().items():
        thread = threads.get(ident)
        frames = []
        while frame is not None and len(frames) < _MAX_FRAMES:
            code = frame.f_code
            frames.append((code.co_name, code.co_filename, frame.f_lineno or 0))
            frame = frame.f_back
        native_id = getattr(thread, "native_id", None) if thread is not None else None
        stacks.append((native_id or 0, thread.name if thread is not None else "", frames))
    return stacks


def register(core):
    core._set_stack_provider(python_stacks)
    # No call into the interpreter once it is finalising.
    atexit.register(core._set_stack_provider, None)
