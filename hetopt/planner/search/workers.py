"""Where parallelizer queries run, and what happens when the workers go away.

* :class:`ProcessPool`: a ``ProcessPoolExecutor`` that replaces itself when a worker process
  dies (a crash, the OOM killer), so lost query batches can be sent again;
* :func:`dask_executor`: a Dask scheduler's executor, after checking the address and that a
  Dask scheduler answers there (a wrong port must fail fast, not hang or allocate exabytes);
* :func:`gather`: submits query batches, waits within a deadline, sends a lost batch again
  at most ``MAX_BATCH_RETRIES`` times, and raises :class:`WorkersLost` (one line) when the
  pool keeps dying or a Dask cluster has no worker left; :class:`Gathering` is the same in
  two steps (submit now, wait later).
"""

from __future__ import annotations

import concurrent.futures as cf
import concurrent.futures.process  # noqa: F401  (cf.process, for the manager thread's class)
import threading
import contextlib
import os
from multiprocessing import connection
import socket
import struct
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, ProcessPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from hetopt.errors import InputError
from hetopt.family import Deadline
from hetopt.interrupt import ignore_interrupt

#: Times a lost batch of queries is sent again before the plan fails: a worker killed once
#: (OOM killer, a preempted machine) is survived; a parallelizer that kills every worker it
#: runs in is not retried forever.
MAX_BATCH_RETRIES = 2
#: Seconds between looks at the deadline and at the workers while waiting for answers.
POLL_S = 0.5
#: Seconds a Dask cluster may have no worker before the plan fails: a nanny restarts a
#: killed worker within a few seconds, an autoscaler within tens of seconds.
NO_WORKER_GRACE_S = 60.0
#: Seconds to connect to a Dask scheduler and receive its handshake.
SCHEDULER_TIMEOUT_S = 10.0
#: Largest handshake a Dask scheduler sends (bytes): its first message is a small dict of
#: versions and options, a few hundred bytes. A larger length prefix is not Dask.
MAX_HANDSHAKE_BYTES = 1 << 20
#: Address schemes ``--scheduler`` takes. TLS needs a security configuration the command line
#: does not carry: pass ``Client(..., security=...).get_executor()`` to ``plan()`` instead.
SCHEMES = ("tcp",)


class WorkersLost(RuntimeError):
    """The executor's workers are gone (a pool that keeps dying, a Dask cluster without workers).

    The message is one line; the command line prints it and exits with code 2.
    """


def _new_pool(max_workers: int) -> ProcessPoolExecutor:
    """A pool whose workers ignore Ctrl-C: the planner hears it, stops at its next clock check
    and abandons the running batches (a worker's KeyboardInterrupt would break the pool)."""
    return ProcessPoolExecutor(max_workers=max_workers, initializer=ignore_interrupt)


class ProcessPool(Executor):
    """A process pool of ``max_workers`` that :func:`gather` can restart when a worker dies.

    Examples
    --------
    >>> with ProcessPool(2) as pool:
    ...     pool.submit(abs, -3).result(), pool.restarts
    (3, 0)
    """

    def __init__(self, max_workers: int) -> None:
        self.max_workers = max_workers
        self.restarts = 0
        self._pool = _new_pool(max_workers)

    def submit(self, fn, /, *args, **kwargs) -> cf.Future:
        return self._pool.submit(fn, *args, **kwargs)

    def restart(self) -> None:
        """Replace a broken pool by a fresh one (the futures of the old one are lost)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = _new_pool(self.max_workers)
        self.restarts += 1

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._pool.shutdown(wait=wait, cancel_futures=cancel_futures)

    def abandon(self) -> None:
        """Stop the work in progress now: terminate the workers and start a fresh pool.

        At a deadline the running batches are no longer wanted, and the executor's own
        shutdown would wait for them (minutes, with a slow parallelizer or few large batches).
        """
        self.close_now()
        self._pool = _new_pool(self.max_workers)

    def close_now(self) -> None:
        """Terminate the workers without waiting for the batches they run (no fresh pool).

        How :func:`executor_for` ends its pool: once a plan is answered (or stopped by Ctrl-C)
        what still runs is unwanted (the next micro-batch size enumerated ahead), and waiting
        for it made a Ctrl-C take 5-6 s on the datacenter plan (issue 46).
        """
        _quiet_cancelled_futures()
        old = self._pool
        workers = list(getattr(old, "_processes", {}).values())  # CPython's ProcessPoolExecutor keeps them here
        # the batches still in its call queue's pipe have no reader once the workers are gone:
        # its feeder thread blocks writing them, and multiprocessing joins that thread at
        # interpreter exit, so the command would print its answer and never return
        call_queue = getattr(old, "_call_queue", None)
        if call_queue is not None:
            call_queue.cancel_join_thread()
        old.shutdown(wait=False, cancel_futures=True)
        for proc in workers:
            if proc.is_alive():
                proc.terminate()
        for proc in workers:
            proc.join()
        # the pool's manager thread reaps terminated workers too (it sees the pool broken); when
        # it wins the waitpid, our join returns before it has recorded the exit code, and
        # is_alive() reads True for a moment. The sentinel says the process has ended.
        settle = time.monotonic() + 1.0
        if workers:
            connection.wait([proc.sentinel for proc in workers], timeout=1.0)
        while any(proc.exitcode is None for proc in workers) and time.monotonic() < settle:
            time.sleep(0.001)


def _quiet_cancelled_futures() -> None:
    """Keep a terminated pool's manager thread from printing a traceback for a cancelled future.

    When its workers are terminated, CPython 3.11's ``ProcessPoolExecutor`` manager thread
    marks every pending work item broken, and one the planner already cancelled at its
    deadline raises ``InvalidStateError`` there (``set_exception`` on a CANCELLED future),
    which the thread prints to stderr. Nothing is lost (the planner no longer waits for that
    future), so exactly that error, from exactly that thread, is dropped; every other
    thread exception reaches the previous hook.
    """
    previous = threading.excepthook
    if getattr(previous, "_hetopt_quiet", False):
        return

    def hook(args: threading.ExceptHookArgs) -> None:
        manager = getattr(cf.process, "_ExecutorManagerThread", None)
        if args.exc_type is cf.InvalidStateError and manager is not None and isinstance(args.thread, manager):
            return
        previous(args)

    hook._hetopt_quiet = True  # type: ignore[attr-defined]
    threading.excepthook = hook


def parse_scheduler(address: str) -> tuple[str, str, int]:
    """``(scheme, host, port)`` of ``tcp://HOST:PORT``.

    Raises
    ------
    InputError
        Naming ``--scheduler`` and what is wrong.

    Examples
    --------
    >>> parse_scheduler("tcp://10.0.0.5:8786")
    ('tcp', '10.0.0.5', 8786)
    """
    head = f"--scheduler {address}"
    try:
        parts = urlsplit(address)
    except ValueError as exc:  # e.g. an unclosed IPv6 bracket
        raise InputError(f"{head}: not an address ({exc}; give tcp://HOST:PORT)") from None
    if parts.scheme not in SCHEMES:
        raise InputError(f"{head}: scheme must be one of {', '.join(SCHEMES)} (give tcp://HOST:PORT)")
    try:
        port = parts.port
    except ValueError:
        raw = parts.netloc.rpartition(":")[2]
        raise InputError(f"{head}: port {raw!r} is not a number from 1 to 65535 (give tcp://HOST:PORT)") from None
    if not parts.hostname:
        raise InputError(f"{head}: no host (give tcp://HOST:PORT)")
    if port is None:
        raise InputError(f"{head}: no port (give tcp://HOST:PORT; Dask's default is 8786)")
    if not 1 <= port <= 65535:
        raise InputError(f"{head}: port {port} is not a number from 1 to 65535 (give tcp://HOST:PORT)")
    return parts.scheme, parts.hostname, port


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(min(n - got, 65536))
        if not chunk:
            raise ConnectionError("the connection was closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def probe_scheduler(address: str, timeout: float | None = None) -> None:
    """Check that a Dask scheduler answers at a ``tcp://`` address, within ``timeout`` seconds.

    A Dask server sends its handshake as soon as it accepts a connection: an 8-byte length,
    then that many bytes. A silent server, a closed port or a length no handshake has
    (an HTTP server's reply read as a length is exabytes) fails here, before Dask's own
    client, which would wait forever or try to allocate the length.

    Raises
    ------
    InputError
        "cannot connect", "no answer from" or "not a Dask scheduler", naming ``--scheduler``.
    """
    _, host, port = parse_scheduler(address)
    timeout = SCHEDULER_TIMEOUT_S if timeout is None else timeout
    head = f"--scheduler {address}"
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        raise InputError(f"{head}: cannot connect ({exc})") from None
    with sock:
        try:
            (size,) = struct.unpack("<Q", _read_exactly(sock, 8))
            if not 0 < size <= MAX_HANDSHAKE_BYTES:
                raise InputError(f"{head}: not a Dask scheduler (its first message does not look like Dask's handshake)")
            body = _read_exactly(sock, size)
            (frames,) = struct.unpack("<Q", body[:8]) if size >= 8 else (0,)
            if not 0 < frames <= size // 8:
                raise InputError(f"{head}: not a Dask scheduler (its first message does not look like Dask's handshake)")
        except TimeoutError:
            raise InputError(f"{head}: no answer from {host}:{port} within {timeout:g} s (is it a Dask scheduler?)") from None
        except (OSError, ConnectionError) as exc:
            raise InputError(f"{head}: not a Dask scheduler (the connection failed: {exc})") from None


@contextlib.contextmanager
def dask_executor(address: str, timeout: float | None = None, *,
                  no_worker_grace_s: float = NO_WORKER_GRACE_S) -> Iterator[Executor]:
    """An executor on the Dask scheduler at ``address``, checked first with :func:`probe_scheduler`,
    each of the two connections waiting at most ``timeout`` seconds (None:
    :data:`SCHEDULER_TIMEOUT_S`; a plan's time limit, when shorter, so the limit holds). A plan
    on it fails once the cluster has had no worker for ``no_worker_grace_s`` seconds.

    Raises
    ------
    InputError
        A malformed address, no Dask scheduler there, or Dask's distributed package missing.
    """
    timeout = SCHEDULER_TIMEOUT_S if timeout is None else min(timeout, SCHEDULER_TIMEOUT_S)
    probe_scheduler(address, timeout)
    try:
        from distributed import Client
    except ImportError:
        raise InputError("scheduler: needs Dask's distributed package: pip install 'hetopt[dask]'", field="scheduler") from None
    try:
        client = Client(address, timeout=f"{timeout}s")
    except (OSError, MemoryError, ValueError, TypeError) as exc:
        raise InputError(f"scheduler {address}: cannot connect ({str(exc).splitlines()[0] if str(exc) else exc!r})",
                         field="scheduler") from None
    try:
        yield DaskExecutor(client, address, no_worker_grace_s)
    finally:
        client.close()


class DaskExecutor(Executor):
    """A Dask client's executor (``pure=False``: a batch sent again runs again) that can say
    whether the cluster still has workers, and how long it may have none (``no_worker_grace_s``)."""

    def __init__(self, client: Any, address: str, no_worker_grace_s: float = NO_WORKER_GRACE_S) -> None:
        self.client, self.address, self.no_worker_grace_s = client, address, no_worker_grace_s
        self._executor = client.get_executor(pure=False)

    def submit(self, fn, /, *args, **kwargs) -> cf.Future:
        return self._executor.submit(fn, *args, **kwargs)

    def workers(self) -> int:
        """Workers the scheduler knows now (0 also when it does not answer)."""
        try:
            info = self.client.sync(self.client.scheduler.identity, n_workers=-1, callback_timeout=SCHEDULER_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - any failure to ask means no usable worker
            return 0
        return len(info.get("workers", {}))

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        self._executor.shutdown(wait=wait)


def _lost(exc: BaseException) -> bool:
    """A batch that did not fail by itself: its worker died, or its task was cancelled."""
    if isinstance(exc, (cf.BrokenExecutor, cf.CancelledError)):
        return True
    return type(exc).__name__ in ("KilledWorker", "FutureCancelledError", "CommClosedError")


def gather(
    executor: Executor,
    fn: Callable[[Any], Any],
    batches: Sequence[Any],
    *,
    deadline: Deadline,
    on_done: Callable[[int], None] | None = None,
) -> list[Any | None]:
    """``fn(batch)`` for every batch on ``executor``, in order; None where the deadline came first.

    A batch whose worker died is sent again (after replacing a broken :class:`ProcessPool`),
    at most ``MAX_BATCH_RETRIES`` times. The same as ``Gathering(...).wait(deadline)``.

    Raises
    ------
    WorkersLost
        A batch lost more often than that, a broken pool that cannot be replaced, or a Dask
        cluster without workers for its ``no_worker_grace_s`` (:data:`NO_WORKER_GRACE_S`).

    Examples
    --------
    >>> with ProcessPool(2) as pool:
    ...     gather(pool, sum, [[1, 2], [3]], deadline=Deadline(None))
    [3, 3]
    """
    return Gathering(executor, fn, batches, on_done=on_done).wait(deadline)


class Gathering:
    """:func:`gather` in two steps: the batches are submitted when it is made, and
    :meth:`wait` collects them (sending lost ones again), so this process can do other work
    in between (the planner composes one micro-batch size while the workers enumerate the next).

    Examples
    --------
    >>> with ProcessPool(2) as pool:
    ...     started = Gathering(pool, sum, [[1, 2], [3]])
    ...     started.wait(Deadline(None))
    [3, 3]
    """

    def __init__(self, executor: Executor, fn: Callable[[Any], Any], batches: Sequence[Any], *,
                 on_done: Callable[[int], None] | None = None) -> None:
        self.executor, self.fn, self.batches, self.on_done = executor, fn, batches, on_done
        self.results: list[Any | None] = [None] * len(batches)
        self.tries = [0] * len(batches)
        self.pending: dict[cf.Future, int] = {}
        self.lost = self._send(range(len(batches)))

    def _send(self, indices: Sequence[int]) -> list[int]:
        """Submit the batches; those a broken pool refused come back."""
        refused = []
        for i in indices:
            try:
                self.pending[self.executor.submit(self.fn, self.batches[i])] = i
            except cf.BrokenExecutor:
                refused.append(i)
        return refused

    def _answered(self, i: int, future: cf.Future) -> None:
        self.results[i] = future.result()
        if self.on_done is not None:
            self.on_done(i)

    def cancel(self) -> None:
        """Drop the batches not started (their answers are no longer wanted); running ones finish unread."""
        for f in self.pending:
            f.cancel()
        self.pending.clear()
        self.lost = []

    def wait(self, deadline: Deadline) -> list[Any | None]:
        """Every batch's answer, in order; None where ``deadline`` came first (see :func:`gather`).

        Raises
        ------
        WorkersLost
            As :func:`gather`.
        """
        executor, pending, results, tries = self.executor, self.pending, self.results, self.tries
        lost = self.lost
        broken = bool(lost)
        no_worker_since: float | None = None
        while pending or lost:
            done: set[cf.Future] = set()
            if not lost:
                if deadline.expired():
                    for f in pending:
                        f.cancel()
                    if any(not f.done() for f in pending) and hasattr(executor, "abandon"):
                        executor.abandon()  # a running batch is not waited for
                    return results
                done, _ = cf.wait(pending, timeout=min(POLL_S, deadline.remaining()), return_when=cf.FIRST_COMPLETED)
            for f in done:
                i = pending.pop(f)
                exc = f.exception()
                if exc is None:
                    self._answered(i, f)
                elif _lost(exc):
                    lost.append(i)
                    broken = broken or isinstance(exc, cf.BrokenExecutor)
                else:
                    raise exc
            if broken:
                # every future of a broken pool fails; keep the answers that made it
                cf.wait(pending, timeout=POLL_S)
                for f, i in pending.items():
                    if f.done() and f.exception() is None:
                        self._answered(i, f)
                    else:
                        f.cancel()
                        lost.append(i)
                pending.clear()
            for i in lost:
                tries[i] += 1
                if tries[i] > MAX_BATCH_RETRIES:
                    raise WorkersLost(
                        f"a batch of {len(self.batches[i])} parallelizer queries lost its worker {tries[i]} times; "
                        f"giving up (does the parallelizer crash its worker process, or run out of memory?)"
                    )
            if broken:
                if not hasattr(executor, "restart"):
                    raise WorkersLost("the process pool broke (a worker process died) and cannot be replaced; "
                                      "pass hetopt.planner.search.workers.ProcessPool to have dead workers replaced")
                executor.restart()
            lost = self._send(lost)
            broken = bool(lost)
            if not done and hasattr(executor, "workers"):
                if executor.workers() > 0:
                    no_worker_since = None
                elif no_worker_since is None:
                    no_worker_since = time.monotonic()
                elif time.monotonic() - no_worker_since > (grace := getattr(executor, "no_worker_grace_s",
                                                                             NO_WORKER_GRACE_S)):
                    raise WorkersLost(f"the Dask cluster at {executor.address} has had no worker for "
                                      f"{grace:g} s; start workers, or plan without --scheduler")
        self.lost = []
        return results


@contextlib.contextmanager
def executor_for(workers: int | None, scheduler: str | None, timeout: float | None = None, *,
                 no_worker_grace_s: float = NO_WORKER_GRACE_S) -> Iterator[Executor | None]:
    """A Dask scheduler's executor (``scheduler``, connecting within ``timeout`` seconds, failing
    a plan after ``no_worker_grace_s`` seconds without a worker: :func:`dask_executor`), a
    process pool of ``workers`` processes that replaces dead workers (``workers`` > 1), or
    None (here).

    Raises
    ------
    InputError
        A malformed scheduler address, no Dask scheduler answering there, ``workers`` < 1.
    """
    if scheduler:
        with dask_executor(scheduler, timeout, no_worker_grace_s=no_worker_grace_s) as executor:
            yield executor
        return
    n = os.cpu_count() or 1 if workers is None else workers
    if n < 1:
        raise InputError(f"workers {workers}: must be >= 1", field="workers")
    if n == 1:
        yield None
        return
    pool = ProcessPool(n)
    try:
        yield pool
    finally:
        pool.close_now()
