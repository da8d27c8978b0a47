"""``execution=ray``: one run's cells asked by Ray actors, merged into the run's one store, log and MLflow run.

The driver (the ``python -m prism`` process) does everything a local run does except asking: it freezes the
questions, renders the prompts, reads the model's identity, reuses the stored cells, and then, instead of
:func:`prism.run.inference.ask_each`, hands the missing cells to ``execution.workers`` actors a batch at a time
(:meth:`RayExecution.ask_each`). Each actor (:class:`ShardWorker`) owns its backend (an embedded model is loaded
once per actor; a remote one gets its own client and a share of ``model.endpoints``) and a shard store of its
own, into which it puts every completion before it hands it back. The driver writes each completion it gets
into the run's store and ``responses.jsonl`` exactly as a local run does (:func:`prism.run.inference.keep`),
so the scoring, results and MLflow artifacts that follow are the local run's.

Faults. A completion is durable in the actor's shard before the driver sees it, and in the run's store before
it is logged. When the driver is killed its actors die with it; when an actor dies the driver stops the others,
keeps what they deliver and fails the run. Either way the shards stay on disk, and every run that opens the
store (this module's :func:`merge_shards`, local or sharded) first merges the shards no live actor holds, so the
same command asks only for the cells no shard holds. Store keys are content addresses: a cell in the store and
in a shard, or in two shards, is one cell.
"""

from __future__ import annotations

import logging
import os
import pickle
import queue
import socket
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import prism
from prism.errors import PrismError
from prism.run.inference import Cell, completion_fields, dispatch, keep, store_put
from prism.run.store import CompletionStore, ResponseLog

if TYPE_CHECKING:
    from prism.backends.base import Backend
    from prism.config import ExecutionConfig, ModelConfig
    from prism.records import RawRecord
    from prism.types import ModelIdentity

try:  # POSIX only: a live actor's shard is locked so that no merge deletes it
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

SHARD_SUFFIX = ".sqlite"
# How long the driver waits on an actor for results before it looks at the others again.
_TAKE_WAIT_S = 0.5
# How long a closing actor may take to finish its in-flight requests and close its shard.
_CLOSE_TIMEOUT_S = 60.0


class ExecutionError(PrismError, RuntimeError):
    """Ray cannot be used as configured, or an actor failed; the message says what and how to go on."""


def shard_directory(execution: ExecutionConfig, store: CompletionStore) -> Path:
    """Where the actors' shard stores go: ``execution.shard_dir``, else ``<store.path>.shards/`` beside ``store``."""
    if execution.shard_dir:
        return Path(execution.shard_dir)
    return store.path.parent / f"{store.path.name}.shards"


def _lock_of(shard: Path) -> Path:
    return shard.with_name(shard.name + ".lock")


def _held(shard: Path) -> bool:
    """Whether a live actor holds ``shard`` (its lock file is flocked)."""
    lock = _lock_of(shard)
    if fcntl is None or not lock.exists():
        return False
    with lock.open("a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def merge_shards(store: CompletionStore, directory: Path, only: Iterable[Path] | None = None) -> int:
    """Merge the shard stores in ``directory`` (or just ``only``) into ``store``; return the completions added.

    A shard no live actor holds is deleted once merged; a held one (an actor of a run going on now) is merged
    and kept. A cell already in the store is left as it was.

    Raises:
        StoreError: If a shard cannot be opened (damaged: the message names it) or the store cannot be written.
    """
    shards = sorted(only) if only is not None else sorted(directory.glob(f"*{SHARD_SUFFIX}"))
    added = 0
    for shard in shards:
        if not shard.is_file():
            continue
        live = _held(shard)
        source = CompletionStore(shard)
        try:
            new = store.merge_from(source)
        finally:
            source.close()
        added += new
        if new:
            log.info("merged %d completion(s) from the shard %s into %s", new, shard, store.path)
        if not live:
            for leftover in (shard, shard.with_name(shard.name + "-wal"), shard.with_name(shard.name + "-shm"),
                             _lock_of(shard)):
                leftover.unlink(missing_ok=True)
    return added


def actor_model(model: ModelConfig, index: int, workers: int) -> ModelConfig:
    """Actor ``index``'s model settings: its share of ``model.endpoints`` when there are enough to share.

    With at least as many endpoints as actors, actor ``i`` gets endpoints ``i, i + workers, ...``; with fewer,
    every actor gets the whole pool (and ``model.concurrency`` per endpoint of its own).
    """
    endpoints = list(getattr(model, "endpoints", None) or [])
    if len(endpoints) < max(workers, 2):
        return model
    share = endpoints[index::workers]
    changes: dict[str, Any] = {"endpoints": share}
    for address in ("base_url", "host"):  # a single address that is not in the share would be refused
        if getattr(model, address, None) not in (None, *share):
            changes[address] = None
    return replace(model, **changes)


@dataclass(frozen=True)
class WorkerInfo:
    """What an actor reports once its backend and shard are ready."""

    index: int
    host: str
    pid: int
    digest: str
    version: str
    package: str
    concurrency: int
    shard: str | None

    def where(self) -> str:
        """``worker I (pid P on HOST)`` for messages."""
        return f"worker {self.index} (pid {self.pid} on {self.host})"


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling (it crosses to the driver), else a RuntimeError with its text."""
    try:
        pickle.loads(pickle.dumps(exc))
    except Exception:
        return RuntimeError(f"{type(exc).__name__}: {exc}")
    return exc


class ShardWorker:
    """One Ray actor: a backend, a shard store, and a thread that asks the cells it is sent.

    Made a Ray actor class by :meth:`RayExecution.start` (``ray.remote`` with the configured resources), so this
    module imports no Ray. The driver calls :meth:`start`, then :meth:`submit` and :meth:`take` concurrently
    (a threaded actor), then :meth:`finish` and :meth:`close`.
    """

    def __init__(self) -> None:
        """An idle worker; :meth:`start` loads the model."""
        self._queue: queue.Queue[Cell | None] = queue.Queue()
        self._tokens: dict[int, int] = {}
        self._results: list[tuple[int, dict[str, Any], str | None]] = []
        self._cond = threading.Condition()
        self._failure: BaseException | None = None
        self._done = False
        self._run_id: str | None = None
        self._backend: Backend | None = None
        self._store: CompletionStore | None = None
        self._lock_handle: Any = None
        self._thread: threading.Thread | None = None
        self._feed = threading.Lock()
        self._received = 0
        self._expected: int | None = None
        self._ended = False

    def start(self, index: int, model: ModelConfig, shard: str | None, sync_interval_s: float) -> WorkerInfo:
        """Load the backend, read its identity, open the shard store (locked) and start asking.

        Raises:
            PrismError: As the backend or the store raise it (the driver names this worker in its error).
        """
        from prism.backends.registry import create_backend

        if shard is not None:
            path = Path(shard)
            path.parent.mkdir(parents=True, exist_ok=True)
            if fcntl is not None:
                self._lock_handle = _lock_of(path).open("a")
                fcntl.flock(self._lock_handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        backend = create_backend(model)
        self._backend = backend
        identity = backend.identity()
        self._identity = identity
        # SQLite connections belong to the thread that opens them: the asking thread opens the shard, and
        # start() waits to hear that it could.
        opened: queue.Queue[BaseException | None] = queue.Queue()
        self._thread = threading.Thread(target=self._serve, args=(shard, sync_interval_s, opened),
                                        name="prism-shard", daemon=True)
        self._thread.start()
        failure = opened.get()
        if failure is not None:
            raise failure
        return WorkerInfo(index=index, host=socket.gethostname(), pid=os.getpid(), digest=identity.digest,
                          version=prism.__version__, package=str(Path(prism.__file__).resolve().parent),
                          concurrency=backend.concurrency, shard=shard)

    def _cells(self) -> Iterator[Cell]:
        while (cell := self._queue.get()) is not None:
            yield cell

    def _serve(self, shard: str | None, sync_interval_s: float, opened: queue.Queue[BaseException | None]) -> None:
        backend = self._backend
        assert backend is not None
        try:
            self._store = CompletionStore(shard, sync_interval_s) if shard is not None else None
        except BaseException as exc:
            opened.put(exc)
            return
        opened.put(None)
        try:
            for cell, completion in dispatch(backend, self._cells(), backend.concurrency):
                fields = completion_fields(completion)
                # In the shard before the driver hears of it: a driver killed now loses nothing.
                if self._store is not None and completion.error is None:
                    store_put(self._store, cell, self._identity, fields, self._run_id)
                with self._cond:
                    self._results.append((self._tokens.pop(id(cell)), fields, completion.error))
                    self._cond.notify_all()
        except BaseException as exc:  # fatal for this worker: the driver stops the run and says why
            with self._cond:
                self._failure = _portable(exc)
        finally:
            try:
                if self._store is not None:
                    self._store.close()
            except BaseException as exc:
                with self._cond:
                    self._failure = self._failure or _portable(exc)
            with self._cond:
                self._done = True
                self._cond.notify_all()

    def submit(self, cells: list[tuple[int, Cell]], run_id: str | None) -> None:
        """Queue ``cells`` (each with the driver's token for it) to be asked."""
        self._run_id = run_id
        with self._feed:
            for token, cell in cells:
                self._tokens[id(cell)] = token
                self._queue.put(cell)
            self._received += len(cells)
            self._end_if_fed()

    def _end_if_fed(self) -> None:
        # A threaded actor runs calls in any order: the end is queued only after every cell the driver sent.
        if self._expected is not None and self._received >= self._expected and not self._ended:
            self._ended = True
            self._queue.put(None)

    def take(self, wait_s: float) -> tuple[list[tuple[int, dict[str, Any], str | None]], BaseException | None, bool]:
        """The completions finished since the last call (waiting up to ``wait_s`` for one), a failure, done."""
        with self._cond:
            if not self._results and not self._done:
                self._cond.wait(wait_s)
            results, self._results = self._results, []
            return results, self._failure, self._done

    def finish(self, sent: int | None) -> int:
        """No more cells after the ``sent`` the driver sent: ask them, then stop; returns how many were dropped.

        ``sent`` None: stop now (another worker failed); the queued cells are dropped, those in flight finish.
        """
        dropped = 0
        with self._feed:
            if sent is None:
                while True:
                    try:
                        cell = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if cell is not None:
                        self._tokens.pop(id(cell), None)
                        dropped += 1
                self._expected = 0
            else:
                self._expected = sent
            self._end_if_fed()
        return dropped

    def close(self) -> None:
        """Wait for the asking thread, then release the model, the shard store and its lock."""
        if self._thread is not None:
            self.finish(None)
            self._thread.join(_CLOSE_TIMEOUT_S)
        try:
            if self._backend is not None:
                self._backend.close()
        finally:
            if self._lock_handle is not None:
                self._lock_handle.close()  # releases the flock


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ExecutionError("execution=ray needs Ray, which is not installed: pip install -e '.[ray]' (on this "
                             "machine and every node of the cluster), or run with execution=local.") from exc
    return ray


def _check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Refuse a HOST:PORT nobody listens on at once, instead of Ray's long connection retries."""
    host, sep, port = address.rpartition(":")
    host = host.removeprefix("ray://").strip("[]")
    if not sep or not port.isdigit() or not host:
        raise ExecutionError(f"execution.address={address!r} is not HOST:PORT; use the address `ray start --head` "
                             "printed (e.g. 10.0.0.1:6379), auto for the cluster this machine is in, or leave it "
                             "null for a local Ray instance.")
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ExecutionError(f"execution.address={address}: no Ray cluster answers there ({exc.strerror or exc}). "
                             f"Start one with `ray start --head --port={port}` on {host}, check the host and port, "
                             "or leave execution.address null for a local Ray instance.") from exc


def connect(execution: ExecutionConfig) -> bool:
    """Join or start Ray as ``execution`` says; returns whether this call started the connection (to end it).

    A process already connected (a test's shared instance, a Ray task) keeps its connection.

    Raises:
        ExecutionError: Ray is not installed, or no cluster answers at ``execution.address``.
    """
    ray = _import_ray()
    if ray.is_initialized():
        return False
    address = execution.address
    if address not in (None, "auto", "local"):
        _check_reachable(address)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no network here for Ray's usage report
    kwargs: dict[str, Any] = dict(execution.init)
    if address is None:
        kwargs.setdefault("include_dashboard", False)
    # Workers import prism as the driver does: pass its PYTHONPATH (a worktree, a source checkout) to them.
    env_vars = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    if env_vars:
        runtime_env = dict(kwargs.pop("runtime_env", None) or {})
        runtime_env["env_vars"] = {**env_vars, **dict(runtime_env.get("env_vars") or {})}
        kwargs["runtime_env"] = runtime_env
    try:
        ray.init(address=address, logging_level=logging.WARNING, **kwargs)
    except Exception as exc:
        where = "a local Ray instance" if address is None else f"the Ray cluster at execution.address={address}"
        raise ExecutionError(f"could not connect to {where} ({type(exc).__name__}: {exc}). For a cluster run "
                             "`ray start --head` (and `ray start --address=HEAD:6379` on each other node) first; "
                             "for one machine leave execution.address null.") from exc
    return True


def _cause(exc: BaseException) -> BaseException:
    """The error raised inside an actor method (Ray wraps it in a RayTaskError)."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, BaseException) else exc


class RayExecution:
    """The driver's side of a sharded run: the actors, the feeding loop and the merge of their shards."""

    def __init__(self, ray: Any, actors: list[Any], workers: list[WorkerInfo], execution: ExecutionConfig,
                 store: CompletionStore | None, owned: bool) -> None:
        """Use started ``actors`` (see :meth:`start`)."""
        self._ray, self._actors, self.workers = ray, actors, workers
        self._execution, self._store, self._owned = execution, store, owned
        self._closed = False

    @classmethod
    def start(cls, execution: ExecutionConfig, model: ModelConfig, identity: ModelIdentity,
              store: CompletionStore | None) -> RayExecution:
        """Connect to Ray, start ``execution.workers`` actors and check that each loaded the same model.

        Everything here happens before any cell is asked: an unreachable cluster, resources no node has, a
        worker that cannot load the model or open its shard, or one that serves other weights stop the run.

        Raises:
            ExecutionError: Naming the worker and what it could not do.
        """
        if store is None:  # no shards: nothing of the actors is kept beyond the run's own response log
            return cls.launch(execution, model, None, 0.0, identity, store)
        return cls.launch(execution, model, shard_directory(execution, store), store.sync_interval_s, identity, store)

    @classmethod
    def launch(cls, execution: ExecutionConfig, model: ModelConfig, shards: Path | None, sync_interval_s: float,
               identity: ModelIdentity, store: CompletionStore | None) -> RayExecution:
        """:meth:`start` from its parts (the benchmark's way in): shard stores in ``shards``, or none."""
        owned = connect(execution)
        ray = _import_ray()
        actor_class = ray.remote(num_cpus=execution.num_cpus, resources=dict(execution.resources) or None,
                                 max_concurrency=4)(ShardWorker)
        run_token = uuid.uuid4().hex[:12]
        actors = [actor_class.options(name=f"prism-shard-{run_token}-{i}").remote()
                  for i in range(execution.workers)]
        execution_ = cls(ray, actors, [], execution, store, owned)
        try:
            refs = [actor.start.remote(i, actor_model(model, i, execution.workers),
                                       str(shards / f"{run_token}-w{i}{SHARD_SUFFIX}") if shards is not None
                                       else None, sync_interval_s)
                    for i, actor in enumerate(actors)]
            execution_.workers = execution_._started(refs, identity, execution)
        except BaseException:
            execution_.close()
            raise
        log.info("execution=ray: %d worker(s) ready: %s", len(actors),
                 "; ".join(f"{w.where()}, {w.concurrency} in flight" for w in execution_.workers))
        return execution_

    def _started(self, refs: list[Any], identity: ModelIdentity, execution: ExecutionConfig) -> list[WorkerInfo]:
        ray = self._ray
        _, waiting = ray.wait(refs, num_returns=len(refs), timeout=execution.start_timeout_s)
        if waiting:
            needs = {"num_cpus": execution.num_cpus, **dict(execution.resources)}
            raise ExecutionError(
                f"{len(waiting)} of {len(refs)} Ray worker(s) did not start within execution.start_timeout_s="
                f"{execution.start_timeout_s:g}: the cluster has no room for {execution.workers} actor(s) needing "
                f"{needs} each (cluster resources: {ray.cluster_resources()}). Lower execution.workers or "
                "execution.num_cpus, start nodes with the resources (ray start --resources=...), or wait longer.")
        infos: list[WorkerInfo] = []
        for i, ref in enumerate(refs):
            try:
                info: WorkerInfo = ray.get(ref)
            except Exception as exc:
                cause = _cause(exc)
                raise ExecutionError(f"Ray worker {i} could not start its backend or its shard store, so nothing "
                                     f"was asked: {type(cause).__name__}: {cause}") from exc
            infos.append(info)
        here = socket.gethostname()
        package = str(Path(prism.__file__).resolve().parent)
        for info in infos:
            if info.digest != identity.digest:
                raise ExecutionError(
                    f"{info.where()} loaded a model with digest {info.digest}, but this process's model has "
                    f"{identity.digest}: the nodes hold different weights (or a different model.path file) under "
                    "the same settings. Give every node the same model file, or run with execution=local.")
            if info.version != prism.__version__ or (info.host == here and info.package != package):
                raise ExecutionError(
                    f"{info.where()} runs PRISM {info.version} from {info.package}, this process {prism.__version__} "
                    f"from {package}. Install the same commit on every node (pip install -e '.[ray]'), or pass "
                    "the same PYTHONPATH to Ray.")
        return infos

    def describe(self) -> str:
        """``ray workers=N address=A``: the ``prism.execution`` tag's value."""
        return f"ray workers={len(self._actors)} address={self._execution.address or 'local'}"

    def ask_each(self, identity: ModelIdentity, cells: Iterable[Cell], response_log: ResponseLog,
                 store: CompletionStore | None, run_id: str | None) -> Iterator[RawRecord]:
        """Ask for every cell on the actors, yielding each record once it is in the store and the log.

        As :func:`prism.run.inference.ask_each`: ``cells`` is read as the actors take them (at most each
        actor's concurrency plus two batches ahead), and on a failure the completions already answered are
        written before the error is raised.

        Raises:
            ExecutionError: An actor died (naming it); the others' answers are kept first.
            PrismError: As an actor's backend or shard store raised it.
        """
        ray, batch = self._ray, self._execution.batch
        source = iter(cells)
        exhausted = False
        pending: dict[int, Cell] = {}
        outstanding = [0] * len(self._actors)
        target = [w.concurrency + 2 * batch for w in self.workers]
        finished = [False] * len(self._actors)  # finish() was sent
        sent = [0] * len(self._actors)
        done = [False] * len(self._actors)
        takes: dict[Any, int] = {}
        failure: BaseException | None = None
        next_token = 0

        def stop_all() -> None:
            for i, actor in enumerate(self._actors):
                if not finished[i] and not done[i]:
                    actor.finish.remote(None)
                    finished[i] = True

        while not all(done):
            for i, actor in enumerate(self._actors):
                if done[i]:
                    continue
                while failure is None and not exhausted and outstanding[i] < target[i]:
                    chunk: list[tuple[int, Cell]] = []
                    for cell in source:
                        chunk.append((next_token, cell))
                        pending[next_token] = cell
                        next_token += 1
                        if len(chunk) >= batch:
                            break
                    else:
                        exhausted = True
                    if chunk:
                        actor.submit.remote(chunk, run_id)
                        outstanding[i] += len(chunk)
                        sent[i] += len(chunk)
                if (exhausted or failure is not None) and not finished[i]:
                    actor.finish.remote(None if failure is not None else sent[i])
                    finished[i] = True
                if i not in takes.values():
                    takes[actor.take.remote(_TAKE_WAIT_S)] = i
            ready, _ = ray.wait(list(takes), num_returns=1)
            for ref in ready:
                i = takes.pop(ref)
                try:
                    results, worker_failure, worker_done = ray.get(ref)
                except ray.exceptions.RayActorError as exc:
                    done[i] = True
                    if failure is None:
                        failure = ExecutionError(
                            f"{self.workers[i].where()} died mid-run ({_cause(exc)}). Every cell any worker "
                            "answered is kept (in the store, or in the worker's shard, which the next run merges): "
                            "run the same command again and it asks only for the cells no shard holds.")
                        stop_all()
                    continue
                for token, fields, error in results:
                    cell = pending.pop(token)
                    outstanding[i] -= 1
                    yield keep(cell, identity, fields, error, response_log, store, run_id)
                if worker_failure is not None and failure is None:
                    failure = worker_failure
                    log.error("%s failed: %s; stopping the other workers", self.workers[i].where(), worker_failure)
                    stop_all()
                done[i] = done[i] or worker_done
        if failure is not None:
            raise failure
        if pending and not exhausted:
            raise ExecutionError(f"{len(pending)} cell(s) were sent to the workers but never answered")

    def close(self) -> None:
        """Stop and close every actor, merge this run's shards into the store, and leave Ray if this run joined it."""
        if self._closed:
            return
        self._closed = True
        ray = self._ray
        try:
            closing_refs = []
            started = {w.index for w in self.workers}
            for i, actor in enumerate(self._actors):
                if i not in started:  # never placed or never started: nothing to hand in, nothing to wait for
                    continue
                try:
                    actor.finish.remote(None)
                    closing_refs.append(actor.close.remote())
                except Exception as exc:  # an actor already gone
                    log.debug("could not close a Ray worker: %s", exc)
            if closing_refs:
                ray.wait(closing_refs, num_returns=len(closing_refs), timeout=_CLOSE_TIMEOUT_S)
            for actor in self._actors:
                try:
                    ray.kill(actor)
                except Exception as exc:
                    log.debug("could not end a Ray worker: %s", exc)
            shards = [Path(w.shard) for w in self.workers if w.shard]
            if self._store is not None and shards:
                # Ray ends a killed actor's process soon after kill(): wait for its shard lock a moment, so the
                # merged shard can be deleted (a held one is merged now and deleted by the next run).
                deadline = time.monotonic() + 10.0
                while any(_held(s) for s in shards if s.exists()) and time.monotonic() < deadline:
                    time.sleep(0.1)
                merge_shards(self._store, shards[0].parent, only=shards)
        finally:
            if self._owned:
                ray.shutdown()
