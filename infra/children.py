"""Child processes that die with rollcheck, however rollcheck dies.

Every child (a Spark driver, a JVM, TLC, a Flink job) runs in a :class:`ProcessGroup` of its own,
killed at interpreter exit (:func:`kill_all`), by a watchdog on the parent's pipe when rollcheck
itself is killed, and on Linux by the parent-death signal. :func:`run` and :func:`spawn` start
children this way. See docs/internals/infra.md#children.

Examples
--------
>>> import sys
>>> r = run([sys.executable, "-c", "print('hi')"], capture_output=True, text=True, timeout=30)
>>> r.returncode, r.stdout.strip()
(0, 'hi')
>>> with ProcessGroup() as g:
...     p = g.spawn(["sleep", "60"])
...     g.alive
True
>>> p.returncode  # killed with its group when the block ended
-9

References
----------
Linux ``prctl(2)`` (``PR_SET_PDEATHSIG``), POSIX ``setpgid(2)`` and ``kill(2)``;
``specs/cli.md`` ("Faults the commands survive").
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

__all__ = [
    "PDEATHSIG_AVAILABLE",
    "ProcessGroup",
    "Child",
    "spawn",
    "run",
    "kill_all",
    "die_with_parent",
    "live_groups",
]

_PR_SET_PDEATHSIG = 1
#: The watchdog: read standard input to its end (the parent died or closed the pipe), then
#: SIGKILL the process group it is in (itself included). Ctrl-C at a terminal does not reach it.
_WATCHDOG = "trap '' INT HUP; cat >/dev/null 2>&1; kill -9 0"


def _load_prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.prctl
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]


_PRCTL = _load_prctl()
#: True where ``prctl(PR_SET_PDEATHSIG)`` is available (Linux).
PDEATHSIG_AVAILABLE = _PRCTL is not None

_GROUPS: weakref.WeakSet[ProcessGroup] = weakref.WeakSet()
_GROUPS_LOCK = threading.Lock()


def die_with_parent(sig: int = signal.SIGKILL, parent: int | None = None) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent dies (Linux).

    Returns False where the parent-death signal is unavailable. ``parent`` is the pid the parent
    is known to have (e.g. passed down by it): if this process's parent is another one by now (it
    was re-parented: the parent already died), the signal is sent at once. Without ``parent``
    only a death during this call is detected (pid 1 may be a legitimate parent in a container).

    Parameters
    ----------
    sig : int, optional
        The signal to receive.
    parent : int, optional
        The parent's known pid; None: the current parent.

    Returns
    -------
    bool
        True when the signal is set up.
    """
    if _PRCTL is None:
        return False
    expected = os.getppid() if parent is None else parent
    if _PRCTL(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) != 0:
        return False
    if os.getppid() != expected:
        os.kill(os.getpid(), sig)
    return True


def _pdeathsig_hook(parent: int, user_hook: Callable[[], Any] | None) -> Callable[[], None]:
    """The hook run in the child between fork and exec (no allocation-heavy work here)."""
    prctl = _PRCTL

    def hook() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the prctl took effect
            os.kill(os.getpid(), signal.SIGKILL)
        if user_hook is not None:
            user_hook()

    return hook


class ProcessGroup:
    """A process group whose members all die when this process dies or :meth:`kill` is called.

    The group is led by a watchdog process (module docstring); ``pgid`` is its id. Pass
    ``process_group=group.pgid`` to any :class:`subprocess.Popen` (or use :meth:`spawn`) to start
    a member. Members are never in a new session, so ``setpgid`` into the group is allowed.

    Raises
    ------
    OSError
        The watchdog could not be started (no ``/bin/sh``, no processes left).
    """

    def __init__(self) -> None:
        r, w = os.pipe()  # both ends close-on-exec: no other child inherits the write end
        try:
            self._watchdog = subprocess.Popen(
                ["/bin/sh", "-c", _WATCHDOG], stdin=r, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, process_group=0, close_fds=True)
        except BaseException:
            os.close(w)
            raise
        finally:
            os.close(r)
        self.pgid: int = self._watchdog.pid
        self._pipe: int | None = w
        self._members: list[subprocess.Popen[Any]] = []
        self._lock = threading.Lock()
        self._owner = os.getpid()  # a forked copy of this process does not own the group
        with _GROUPS_LOCK:
            _GROUPS.add(self)

    @property
    def alive(self) -> bool:
        """Whether the group has not been killed yet (its watchdog is running)."""
        return self._pipe is not None and self._watchdog.poll() is None

    def spawn(self, args: Sequence[str] | str, **kwargs: Any) -> Child:
        """Start ``args`` as a member of this group (keyword arguments as :class:`subprocess.Popen`).

        Parameters
        ----------
        args : sequence of str or str
            The command.
        **kwargs
            As :class:`subprocess.Popen` (not ``start_new_session`` or ``process_group``).

        Returns
        -------
        Child
            The started member.
        """
        return Child(args, group=self, **kwargs)

    def _adopt(self, proc: subprocess.Popen[Any]) -> None:
        with self._lock:
            self._members = [p for p in self._members if p.returncode is None]
            self._members.append(proc)

    def kill(self) -> None:
        """SIGKILL every member (and the watchdog), then reap the processes this group started.

        Safe to call more than once and from any thread.
        """
        if os.getpid() != self._owner:
            return
        with self._lock:
            pipe, self._pipe = self._pipe, None
            members = list(self._members)
        if pipe is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, signal.SIGKILL)
        os.close(pipe)  # the watchdog would do the same on end-of-file
        for p in [self._watchdog, *members]:
            with contextlib.suppress(Exception):
                p.wait(timeout=10)
        with _GROUPS_LOCK:
            _GROUPS.discard(self)

    close = kill

    def __enter__(self) -> ProcessGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()

    def __del__(self) -> None:  # a forgotten group still ends with its owner
        with contextlib.suppress(Exception):
            self.kill()


class Child(subprocess.Popen):  # type: ignore[type-arg]
    """A :class:`subprocess.Popen` in a :class:`ProcessGroup` that dies with this process.

    Parameters
    ----------
    args, **kwargs
        As :class:`subprocess.Popen`; ``start_new_session`` and ``process_group`` are refused (the
        group is this class's business). A ``preexec_fn`` runs after the parent-death hook.
    group : ProcessGroup, optional
        Join this group (default: a new group of its own, killed by :meth:`kill_group`).
    pdeathsig : bool, optional
        Set ``PR_SET_PDEATHSIG`` (default: when starting from the main thread, see the module
        docstring; the watchdog covers the other cases).
    """

    def __init__(self, args: Sequence[str] | str, *, group: ProcessGroup | None = None,
                 pdeathsig: bool | None = None, **kwargs: Any) -> None:
        for bad in ("start_new_session", "process_group"):
            if kwargs.get(bad):
                raise ValueError(f"Child manages its process group itself; do not pass {bad}")
            kwargs.pop(bad, None)
        if pdeathsig is None:
            pdeathsig = threading.current_thread() is threading.main_thread()
        own = group is None
        self.group = ProcessGroup() if group is None else group
        if not self.group.alive:
            raise ValueError("the process group was already killed")
        hook = kwargs.pop("preexec_fn", None)
        if pdeathsig:
            hook = _pdeathsig_hook(os.getpid(), hook)
        try:
            super().__init__(args, process_group=self.group.pgid, preexec_fn=hook, **kwargs)
        except BaseException:
            if own:
                self.group.kill()
            raise
        self.group._adopt(self)

    def kill_group(self) -> None:
        """SIGKILL the whole group (this child, its descendants, the watchdog) and reap them."""
        self.group.kill()
        with contextlib.suppress(Exception):
            self.wait(timeout=10)

    def __exit__(self, *exc: Any) -> None:
        try:
            self.kill_group()
        finally:
            super().__exit__(*exc)


def spawn(args: Sequence[str] | str, **kwargs: Any) -> Child:
    """Start ``args`` in a new group of its own that dies with this process (see :class:`Child`).

    Parameters
    ----------
    args : sequence of str or str
        The command.
    **kwargs
        As :class:`Child`.

    Returns
    -------
    Child
        The started child.
    """
    return Child(args, **kwargs)


def run(args: Sequence[str] | str, *, input: Any = None, capture_output: bool = False,
        timeout: float | None = None, check: bool = False, group: ProcessGroup | None = None,
        **kwargs: Any) -> subprocess.CompletedProcess[Any]:
    """Run ``args`` to its end like :func:`subprocess.run`, in a group that dies with us.

    The group is SIGKILLed on a timeout (then :class:`subprocess.TimeoutExpired` is raised, as
    :func:`subprocess.run` does), on any exception (``KeyboardInterrupt``, SIGTERM unwinding), and
    after the child ended (its descendants do not outlive it). With ``group=`` the child joins
    that group instead and only the child itself is waited for.

    Parameters
    ----------
    args : sequence of str or str
        The command.
    input : object, optional
        Sent to the child's stdin (bytes, or str in text mode).
    capture_output : bool, optional
        Capture stdout and stderr.
    timeout : float, optional
        Seconds before the group is killed; None: no limit.
    check : bool, optional
        Raise :class:`subprocess.CalledProcessError` on a non-zero exit.
    group : ProcessGroup, optional
        The group to join; None: a new one of its own.
    **kwargs
        As :class:`subprocess.Popen`.

    Returns
    -------
    subprocess.CompletedProcess
        The exit code and what was captured.
    """
    if input is not None:
        if kwargs.get("stdin") is not None:
            raise ValueError("stdin and input arguments may not both be used")
        kwargs["stdin"] = subprocess.PIPE
    if capture_output:
        if kwargs.get("stdout") is not None or kwargs.get("stderr") is not None:
            raise ValueError("stdout and stderr arguments may not be used with capture_output")
        kwargs["stdout"] = kwargs["stderr"] = subprocess.PIPE
    proc = Child(args, group=group, **kwargs)
    own = group is None
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:  # poll: the run ends when the child ends, even if a descendant holds its pipes
            step = 0.2 if deadline is None else max(0.0, min(0.2, deadline - time.monotonic()))
            try:
                out, err = proc.communicate(input, timeout=step)
                break
            except subprocess.TimeoutExpired:
                input = None  # communicate() keeps what it has sent and read so far
                if proc.poll() is not None:
                    if own:
                        proc.kill_group()
                    out, err = proc.communicate()
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    if own:
                        proc.kill_group()
                    else:
                        proc.kill()
                    out, err = proc.communicate()
                    raise subprocess.TimeoutExpired(proc.args, float(timeout or 0), output=out, stderr=err) from None
    finally:
        if own:
            proc.kill_group()
        elif proc.poll() is None:
            proc.kill()
            proc.wait()
        for s in (proc.stdin, proc.stdout, proc.stderr):
            if s is not None:
                with contextlib.suppress(OSError):
                    s.close()
    rc = proc.returncode
    if check and rc:
        raise subprocess.CalledProcessError(rc, proc.args, output=out, stderr=err)
    return subprocess.CompletedProcess(proc.args, rc, out, err)


def live_groups() -> list[ProcessGroup]:
    """The groups started by this process and not killed yet."""
    with _GROUPS_LOCK:
        return [g for g in _GROUPS if g.alive]


def kill_all() -> int:
    """Kill every group this process started that is still alive; return how many."""
    with _GROUPS_LOCK:
        groups = list(_GROUPS)
    n = 0
    for g in groups:
        if g._pipe is not None:
            n += 1
        g.kill()
    return n


atexit.register(kill_all)
