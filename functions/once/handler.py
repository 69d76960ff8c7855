"""``make_handler``: turns a business function into an SQS batch handler for Lambda.

It resolves the configuration at the first invocation (arguments first, then environment
variables, then the defaults in ``constants``), so that a module-level handler can be
imported before its environment exists. It creates the AWS clients once per handler
(``_client``: from which session, and configured how; SQS and SNS only when first used),
is primed before a SnapStart snapshot and closes its connections after a restore
(``once.snapstart``), returns the partial batch response (``Handler.handle`` returns each
record's result beside it), and sets when the records it reports failed come back
(``visibility.py``). What a cold start needs of it is kept to what the first record needs:
it reads the SQS records itself (``once.sqsrecord``), and the botocore session of its own
asks for once's services by name (``once.botoloader``). The handler raises only for a broken
configuration; a record-level problem always becomes an entry in ``batchItemFailures`` (or
an acknowledgment). ``Handler.bind`` runs it with a
record store or quarantine of the caller's choosing instead of the ones built from the
configuration.
"""

from __future__ import annotations

import inspect
import os
import sys
import threading
import traceback
from dataclasses import dataclass
from typing import Any, Literal

from botocore.config import Config

from once import constants as c
from once import snapstart
from once.backoff import Backoff, from_env, to_env
from once.botoloader import named_service_loader
from once.invocation import Process, Settings
from once.models import BatchResult, Outcome, RecordResult
from once.observability import log_safely, logger, name_service, publish, subsegment
from once.outbox import Outbox
from once.payload import WHOLE_BODY, BodyReader, describe_error
from once.powertools import PowertoolsBridge
from once.processor import BatchProcessor
from once.quarantine import Quarantine
from once.sqsrecord import SqsRecord
from once.store import RecordStore, Store
from once.visibility import Visibility

_FROM_ENV: Any = object()
#: The backoff of a handler given none, in an environment that declares none.
_DEFAULT_BACKOFF = Backoff(c.DEFAULT_BACKOFF_BASE_S, c.DEFAULT_BACKOFF_MAX_S)
#: What business code may do (``make_handler(effects=)``).
EffectsMode = Literal["any", "staged"]
#: An AWS call that hangs gives up after seconds (botocore waits 60 s), so a slow DynamoDB or
#: SQS call cannot eat the invocation's time; the standard retries then try again.
_CONNECT_TIMEOUT_S = 2
_READ_TIMEOUT_S = 5


@dataclass(frozen=True)
class _Config:
    """Where the handler's resources are, resolved from arguments, then the environment."""

    table_name: str | None
    dlq_url: str | None
    retention_s: int
    key_prefix: str | None


class Handler:
    """The Lambda entry point made by ``make_handler``: call it with (event, context), or
    ``handle`` it for each record's result."""

    def __init__(
        self,
        process: Process,
        *,
        reader: BodyReader,
        table_name: str | None,
        dlq_url: str | None,
        retention_s: int | None,
        key_prefix: str | None,
        lease_margin_s: int,
        lock_timeout_s: int,
        max_workers: int,
        min_remaining_ms: int,
        quarantine_takeovers: bool,
        backoff: tuple[Any, Any],
        effects: EffectsMode = "any",
        powertools: PowertoolsBridge | None = None,
    ) -> None:
        self._process = process
        # A handler function's name, as decorators that wrap a handler read it (Powertools'
        # Tracer.capture_lambda_handler names its subsegment after ``__name__``).
        self.__name__ = self.__qualname__ = getattr(process, "__name__", type(process).__name__)
        self._reader = reader
        self._table_name = table_name
        self._dlq_url = dlq_url
        self._retention_s = retention_s
        self._key_prefix = key_prefix
        self._lease_margin_s = lease_margin_s
        self._lock_timeout_s = lock_timeout_s
        self._max_workers = max_workers
        self._min_remaining_ms = min_remaining_ms
        self._quarantine_takeovers = quarantine_takeovers
        #: ``make_handler``'s (backoff_base_s, backoff_max_s), each ``_FROM_ENV`` if not given:
        #: resolved at the first invocation (``_resolved_backoff``).
        self._backoff_args = backoff
        self._backoff: Backoff | None = None
        self._effects: EffectsMode = effects
        self._powertools = powertools
        self._visibility: Visibility | None = None
        self._config: _Config | None = None
        self._store: Store | None = None
        self._quarantine: Quarantine | None = None
        self._outbox: Outbox | None = None
        self._processor: BatchProcessor | None = None
        self._clients: _ClientsFor | None = None

    def bind(
        self,
        *,
        store: Store | None = None,
        quarantine: Quarantine | None = None,
        outbox: Outbox | None = None,
    ) -> None:
        """Run the next invocations with this record store, quarantine and/or outbox.

        ``bind()`` with nothing drops what was bound and the built processor: the next
        invocation builds them again from the configuration and the environment. The
        previous processor's threads end.
        """
        if self._processor is not None:
            self._processor.close()
        self._store = store
        self._quarantine = quarantine
        self._outbox = outbox
        self._processor = None
        self._config = None

    def prime(self) -> bool:
        """Build now what the first invocation would build (the configuration, the clients,
        the processor), calling no AWS API: what a SnapStart snapshot should hold
        (``once.snapstart``). False, with nothing built, when the configuration is incomplete:
        the first invocation then raises, saying what is missing."""
        try:
            self._resolved_for_build()
        except RuntimeError:
            return False
        _ = self.processor
        return True

    def refresh(self) -> None:
        """After a SnapStart restore: close what the snapshot holds connected or running
        (every connection of once's clients, the processor's threads), keeping what was
        built; the next calls connect again and the next batch starts its threads again, in
        this environment."""
        if self._processor is not None:
            self._processor.close()
        if self._clients is not None:
            self._clients.close()

    @property
    def process(self) -> Process:
        """The business code this handler runs (``make_handler``'s ``process``)."""
        return self._process

    @property
    def effects(self) -> EffectsMode:
        """``"staged"``: business code runs first and one write commits it, no claim
        (``make_handler(effects=)``); ``"any"``: the two-phase protocol."""
        return self._effects

    @property
    def table_name(self) -> str | None:
        return self._resolved().table_name

    @property
    def dlq_url(self) -> str | None:
        return self._resolved().dlq_url

    @property
    def retention_s(self) -> int:
        return self._resolved().retention_s

    @property
    def key_prefix(self) -> str | None:
        return self._resolved().key_prefix

    def _resolved(self) -> _Config:
        """The configuration as the first invocation froze it, or as it would be now."""
        if self._config is not None:
            return self._config
        retention = self._retention_s
        if retention is None:
            retention = _env_retention_s()
        return _Config(
            table_name=self._table_name or os.getenv(c.ENV_TABLE_NAME) or None,
            dlq_url=(os.getenv(c.ENV_DLQ_URL) or None)
            if self._dlq_url is _FROM_ENV
            else self._dlq_url,
            retention_s=retention,
            key_prefix=self._key_prefix or os.getenv(c.ENV_SERVICE_NAME) or None,
        )

    def _resolved_backoff(self) -> Backoff | None:
        """The backoff this handler runs: what ``make_handler`` was given; else what the
        construct declared (``ONCE_BACKOFF``, the backoff it derived the DLQ's
        ``maxReceiveCount`` from); else once's default. An argument wins over the environment
        (the code is what a test ran), with a warning when they differ: the DLQ then comes
        earlier or later than the construct derived."""
        text = os.getenv(c.ENV_BACKOFF)
        declared = from_env(text) if text is not None else _DEFAULT_BACKOFF
        base, most = self._backoff_args
        if base is _FROM_ENV:  # neither given (make_handler completes a pair given half)
            return declared
        given = None if base is None or most is None else Backoff(base, most)
        if text is not None and given != declared:
            log_safely(
                logger,
                "warning",
                "make_handler's backoff differs from the one the construct declared and "
                "derived the DLQ's maxReceiveCount from: make_handler's applies, so messages "
                "reach the DLQ earlier or later than derived; declare it once (OnceConsumer("
                "backoff=...), and make_handler without backoff arguments)",
                make_handler=to_env(given),
                declared=f"{c.ENV_BACKOFF}={text}",
            )
        return given

    def _resolved_for_build(self) -> _Config:
        """The configuration a processor is built from; RuntimeError for what is missing."""
        config = self._resolved()
        if not config.key_prefix:
            raise RuntimeError(
                f"no key prefix: pass key_prefix= to make_handler or set "
                f"{c.ENV_SERVICE_NAME} (a stable service name, not the function name)"
            )
        if self._store is None and not config.table_name:
            raise RuntimeError(
                f"no idempotency table: pass table_name= to make_handler or set {c.ENV_TABLE_NAME}"
            )
        return config

    @property
    def processor(self) -> BatchProcessor:
        """Built at the first invocation, so that importing a handler needs no AWS."""
        if self._processor is None:
            config = self._resolved_for_build()
            self._config = config
            name_service()
            self._backoff = self._resolved_backoff()
            clients = self._clients = _ClientsFor(_client_config(self._max_workers))
            store: Store | None = self._store
            if store is None:
                assert config.table_name is not None
                store = RecordStore(
                    clients("dynamodb"), config.table_name, retention_s=config.retention_s
                )
            quarantine = self._quarantine
            # SQS is called only for a record that fails or is quarantined, or an outbox's
            # send: a batch without any builds no SQS client.
            needs_sqs = self._backoff is not None or (quarantine is None and config.dlq_url)
            sqs = _OnFirstUse(clients, "sqs") if needs_sqs else None
            outbox = self._outbox or Outbox(clients)
            if quarantine is None:
                quarantine = Quarantine(sqs if config.dlq_url else None, config.dlq_url)
            if self._backoff is not None:
                self._visibility = Visibility(sqs, self._backoff, logger)
            assert config.key_prefix is not None
            settings = Settings(
                key_prefix=config.key_prefix,
                lease_margin_ms=self._lease_margin_s * 1000,
                lock_timeout_ms=self._lock_timeout_s * 1000,
                min_remaining_ms=self._min_remaining_ms,
                max_workers=self._max_workers,
                quarantine_takeovers=self._quarantine_takeovers,
                staged=self._effects == "staged",
                powertools=self._powertools,
            )
            self._processor = BatchProcessor(
                self._process, store, quarantine, outbox, self._reader, settings
            )
        return self._processor

    def handle(self, event: dict[str, Any], context: Any) -> BatchResult:
        """Run one SQS batch and say how each record ended.

        This is what Lambda runs (``__call__`` returns ``handle(...).response``). It is
        public for code that needs more than the partial batch response: ``once.testing``
        reads each record's outcome from it, and a team that wraps the handler to add its
        own logic around a batch (its own metrics or audit per outcome, say) calls it and
        returns ``.response`` to Lambda. ``records`` are in the order of the event's records.
        """
        logger.append_keys(request_id=getattr(context, "aws_request_id", None))
        records = [SqsRecord(record) for record in event["Records"]]
        processor = self.processor
        try:
            with subsegment("## once batch") as segment:
                handled = processor.run(records, context)
                if segment is not None:
                    segment.put_annotation("records", len(handled))
        except Exception as error:
            # A bug in once outside any one record (each record's own errors are confined
            # to it): acknowledge nothing, let SQS redeliver. The log names the error's class
            # and where it was raised; its message may quote a body.
            log_safely(
                logger,
                "error",
                "batch aborted; every record will be redelivered",
                error=describe_error(error),
                stack=traceback.format_tb(error.__traceback__),
            )
            handled = [
                RecordResult(
                    r.message_id, Outcome.FAILED, reason=describe_error(error), internal_error=True
                )
                for r in records
            ]
        self._after(records, handled, context)
        return BatchResult(tuple(handled))

    def _after(self, records: list[Any], handled: list[RecordResult], context: Any) -> None:
        """The batch's metrics, then the retry backoff. Neither may cost the batch response:
        an error in either is logged and the response goes back to Lambda as it is."""
        try:
            publish(handled)
        except Exception as error:
            log_safely(logger, "error", "metrics not published", error=describe_error(error))
        if self._visibility is None:
            return
        try:
            # Visibility.delay checks the time left before each call, keeping the batch
            # response's reserve: a timeout would lose the response and redeliver every
            # record, acknowledged ones included.
            self._visibility.delay(
                records,
                handled,
                time_left_ms=None if context is None else context.get_remaining_time_in_millis,
                reserve_ms=self._min_remaining_ms,
            )
        except Exception as error:
            log_safely(
                logger,
                "error",
                "visibility not changed: the records come back after the queue's timeout",
                error=describe_error(error),
            )

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, list[dict[str, str]]]:
        """The Lambda entry point: the partial batch response of ``handle``."""
        return self.handle(event, context).response


class _ClientsFor:
    """once's clients, one per service and handler, each built at its first use (a function
    that never sends, fails or quarantines a record builds no SQS or SNS client)."""

    def __init__(self, config: Config) -> None:
        self._config = config
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __call__(self, service: str) -> Any:
        with self._lock:
            if service not in self._clients:
                self._clients[service] = _client(service, self._config)
            return self._clients[service]

    def close(self) -> None:
        """Close every connection of the clients built so far; each client reconnects at
        its next call."""
        with self._lock:
            for client in self._clients.values():
                client.close()


class _OnFirstUse:
    """Stands for ``clients(service)``: the client is built when an attribute of it is first
    read, and every attribute is the client's."""

    def __init__(self, clients: _ClientsFor, service: str) -> None:
        self._clients = clients
        self._service = service

    def __getattr__(self, name: str) -> Any:
        return getattr(self._clients(self._service), name)


#: The botocore session of once's own clients when boto3 is not loaded (``_session``).
_own_session: Any = None
_session_lock = threading.Lock()


def _session() -> Any:
    """The botocore session once's clients are built from.

    With boto3 loaded, boto3's default session (the one ``boto3.client`` uses): whatever a
    program sets or hooks there (its region, a test's moto, a benchmark's counters) reaches
    once's clients as it reaches its own. Without it, a botocore session of once's own, made
    once per process: the clients, credentials, endpoints and retries are botocore's either
    way, and a function that never imports boto3 does not load it (and s3transfer, which
    boto3 imports with it) for once's sake at its cold start.
    """
    global _own_session
    boto3 = sys.modules.get("boto3")
    if boto3 is not None:
        if boto3.DEFAULT_SESSION is None:
            boto3.setup_default_session()
        return boto3.DEFAULT_SESSION._session
    with _session_lock:
        if _own_session is None:
            import botocore.session

            session = botocore.session.get_session()
            loader = named_service_loader(session)
            if loader is not None:
                session.register_component("data_loader", loader)
            _own_session = session
        return _own_session


def _client_config(max_workers: int) -> Config:
    """The configuration of every client once builds."""
    return Config(
        # Requests are built here, so botocore's client-side validation only costs CPU.
        parameter_validation=False,
        retries={"mode": "standard", "max_attempts": 3},
        connect_timeout=_CONNECT_TIMEOUT_S,
        read_timeout=_READ_TIMEOUT_S,
        max_pool_connections=max(10, max_workers),
    )


def _fixed_user_agent(session: Any, config: Config) -> Config:
    """``config`` with its User-Agent header computed once, here.

    botocore builds the header for every request, twice (when it serializes the request and
    again just before it signs it), from the session, the client's configuration and the
    features the request used. ``Config(user_agent=...)`` makes it send a given string
    instead (followed by the session's own extra, as botocore appends it): the string it
    would build, less the per-request feature list (``m/...``). On botocore releases that
    cache nothing of it, building it is about a fifth of the CPU botocore spends on a
    DynamoDB call; on those that cache its fixed parts, a few percent. Any trouble building
    it leaves botocore's own.
    """
    try:
        from botocore.useragent import UserAgentString

        # AWS_SDK_UA_APP_ID or the profile's sdk_ua_app_id, which botocore reads for a client.
        appid = session.get_config_variable("user_agent_appid")
        described = (
            config.merge(Config(user_agent_appid=appid))  # type: ignore[call-arg]
            if appid
            else config
        )
        user_agent = (
            UserAgentString.from_environment()
            .set_session_config(session.user_agent_name, session.user_agent_version, "")
            .with_client_config(described)
            .to_string()
        )
    except Exception:
        return config
    return config.merge(Config(user_agent=user_agent))


def _client(service: str, config: Config) -> Any:
    """A client of ``service`` from ``_session()``, configured by ``config``, its User-Agent
    header computed once."""
    session = _session()
    return session.create_client(service, config=_fixed_user_agent(session, config))


def _env_retention_s() -> int:
    text = os.getenv(c.ENV_RETENTION_S)
    if text is None:
        return c.DEFAULT_RETENTION_S
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(
            f"{c.ENV_RETENTION_S} must be a positive whole number of seconds (got {text!r}); "
            f"unset, records are kept {c.DEFAULT_RETENTION_S} s"
        )
    return value


def _unrunnable(process: object) -> str | None:
    """Why ``process`` would return work it did not do (an ``async def``, a generator or
    an async generator function, or a callable object whose ``__call__`` is one), or None.
    What a plain function returns is checked at each record (``invocation.returned``)."""
    call = getattr(process, "__call__", None)  # noqa: B004 (a callable object's own method)
    for candidate in (process, call):
        if inspect.iscoroutinefunction(candidate):
            return "process is a coroutine function (async def)"
        if inspect.isasyncgenfunction(candidate):
            return "process is an async generator function"
        if inspect.isgeneratorfunction(candidate):
            return "process is a generator function (it yields)"
    return None


def make_handler(
    process: Process,
    *,
    key: str,
    table_name: str | None = None,
    validate: str | None = WHOLE_BODY,
    dlq_url: str | None = _FROM_ENV,
    key_prefix: str | None = None,
    lease_margin_s: int = c.DEFAULT_LEASE_MARGIN_S,
    lock_timeout_s: int = c.DEFAULT_LOCK_TIMEOUT_S,
    retention_s: int | None = None,
    max_workers: int = c.DEFAULT_MAX_WORKERS,
    min_remaining_ms: int = c.DEFAULT_MIN_REMAINING_MS,
    envelope: str | None = None,
    on_expired_lease: Literal["run", "quarantine"] = "run",
    backoff_base_s: int | None = _FROM_ENV,
    backoff_max_s: int | None = _FROM_ENV,
    effects: EffectsMode = "any",
    powertools: PowertoolsBridge | None = None,
) -> Handler:
    """Wrap ``process(body, attempt)`` into a Lambda handler for SQS batches: each record is
    run through the fenced protocol keyed on ``key`` (a JMESPath expression over the parsed
    body, or ``SOURCE_KEY``), its result stored on its record, and the batch answered with
    ``batchItemFailures``. ``effects="staged"`` runs business code first and commits what it
    staged with one write. ``powertools``: while a team moves from Powertools' idempotency
    utility, its records are honoured and kept (``once.powertools``, docs/migrating.md).
    Every argument, its default and what it does (``validate``,
    ``envelope``, ``on_expired_lease``, the backoff, the environment each falls back to):
    docs/handler.md, "`make_handler`'s arguments"; the protocol: docs/design.md."""
    if not callable(process):
        raise TypeError(
            f"make_handler: process={process!r} is not callable: pass the business function, "
            "process(body, attempt)"
        )
    refused = _unrunnable(process)
    if refused:
        raise TypeError(
            f"make_handler: {refused}: once calls business code and uses what it returns, and "
            "the body of such a function runs only when it is awaited or iterated, which once "
            "never does. Pass a plain function (def, no yield); run asynchronous code inside it "
            "with asyncio.run and return its result"
        )
    if on_expired_lease not in ("run", "quarantine"):
        raise ValueError(
            f'on_expired_lease must be "run" or "quarantine" (got {on_expired_lease!r})'
        )
    if effects not in ("any", "staged"):
        raise ValueError(
            f'effects must be "any" (business code may change anything) or "staged" (every '
            f"effect is staged on the attempt) (got {effects!r})"
        )
    if effects == "staged" and on_expired_lease == "quarantine":
        raise ValueError(
            'effects="staged" takes no lease, so there is no expired lease to quarantine: '
            'on_expired_lease="quarantine" is for effects that cannot be fenced, which '
            'effects="staged" rules out'
        )
    for name, value, least, why in (
        ("lease_margin_s", lease_margin_s, 0, "a lease shorter than the invocation lets a "
         "second claim in while the first still runs"),
        ("lock_timeout_s", lock_timeout_s, 1, "the lease outside Lambda must last"),
        ("max_workers", max_workers, 1, "a batch needs at least one thread to run"),
        ("min_remaining_ms", min_remaining_ms, 0, "it is the time kept for the batch response"),
    ):  # fmt: skip
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ValueError(
                f"{name} must be a whole number of at least {least} (got {value!r}): {why}"
            )
    # One argument given is a backoff given: the other is once's default, never mixed with
    # the construct's (which may not go with it), and the pair is refused now, not at the
    # first invocation.
    if (backoff_base_s is _FROM_ENV) != (backoff_max_s is _FROM_ENV):
        if backoff_base_s is _FROM_ENV:
            backoff_base_s = c.DEFAULT_BACKOFF_BASE_S
        else:
            backoff_max_s = c.DEFAULT_BACKOFF_MAX_S
    if isinstance(backoff_base_s, int) and isinstance(backoff_max_s, int):
        Backoff(backoff_base_s, backoff_max_s)
    if powertools is not None and not isinstance(powertools, PowertoolsBridge):
        raise ValueError(
            f"powertools must be a once.powertools.PowertoolsBridge (got {powertools!r})"
        )
    if retention_s is not None and retention_s <= 0:
        raise ValueError(
            f"retention_s must be a positive number of seconds (got {retention_s}): a record "
            "must outlive the source queue and the DLQ for a late redrive to be deduplicated"
        )
    handler = Handler(
        process,
        reader=BodyReader(key, validate, envelope),
        table_name=table_name,
        dlq_url=dlq_url,
        retention_s=retention_s,
        key_prefix=key_prefix,
        lease_margin_s=lease_margin_s,
        lock_timeout_s=lock_timeout_s,
        max_workers=max_workers,
        min_remaining_ms=min_remaining_ms,
        quarantine_takeovers=on_expired_lease == "quarantine",
        effects=effects,
        backoff=(backoff_base_s, backoff_max_s),
        powertools=powertools,
    )
    snapstart.register(handler)
    return handler
