"""The EC2 API of one substrate: a boto3 client, and every AWS failure as one clear line.

Credentials come from boto3's standard chain and are loaded once, here; messages never carry
them: text that comes back from AWS is scrubbed of them, and endpoint URLs of any userinfo.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

import boto3
import botocore.exceptions as aws_errors
import botocore.loaders
import botocore.session
from botocore.config import Config as BotoConfig

from ...core.transport import one_line
from ...core.urls import redact_text, redact_url
from ...errors import (
    ConfigError,
    CredentialsMissing,
    RolloutTaxError,
    SandboxStartError,
    SubstrateUnavailable,
    redact,
)
from .errors import describe
from .options import EC2Options

_CAPACITY_CODES = {
    "InsufficientInstanceCapacity",
    "InsufficientCapacity",
    "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity",
    "InstanceLimitExceeded",
    "VcpuLimitExceeded",
    "MaxSpotInstanceCountExceeded",
    "Unsupported",
}
_BAD_CREDENTIAL_CODES = {
    "AuthFailure",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "UnrecognizedClientException",
    "RequestExpired",
    "ExpiredToken",
    "ExpiredTokenException",
    "OptInRequired",
}
#: Failures to reach the API at all.
_UNREACHABLE = (
    aws_errors.EndpointConnectionError,
    aws_errors.ConnectTimeoutError,
    aws_errors.ReadTimeoutError,
    aws_errors.ConnectionClosedError,
)
#: Everything boto3 raises for a failed call.
FAILURES = (aws_errors.ClientError, aws_errors.BotoCoreError, *_UNREACHABLE)
_loader: botocore.loaders.Loader | None = None
#: The region variable the AWS SDKs read before AWS_DEFAULT_REGION and the profile (boto3
#: reads only the latter two).
REGION_VARIABLE = "AWS_REGION"


class EC2Api:
    """A boto3 EC2 client for substrate ``name``, built from its options."""

    def __init__(self, name: str, options: EC2Options) -> None:
        self.name = name
        self.options = options
        try:
            session = boto3.Session(
                botocore_session=_botocore_session(),
                profile_name=options.profile,
                region_name=options.region or os.environ.get(REGION_VARIABLE) or None,
            )
        except aws_errors.ProfileNotFound:
            raise ConfigError(f"{name}.profile={options.profile}: no such AWS profile") from None
        self._secrets = _load_secrets(name, session)
        self.region = session.region_name
        if not self.region:
            raise ConfigError(
                f"{name}: no AWS region configured; set AWS_REGION (or AWS_DEFAULT_REGION), "
                f"a region in the profile, or {name}.region=REGION"
            )
        config = BotoConfig(connect_timeout=10, read_timeout=60, retries={"mode": "standard"})
        try:
            self.client = session.client("ec2", endpoint_url=options.endpoint_url, config=config)
        except ValueError as exc:
            reason = redact_text(str(exc), options.endpoint_url or "")
            raise ConfigError(f"{name}.endpoint_url: {reason}") from None
        #: The endpoint, for messages (without any user:password part).
        self.url = redact_url(self.client.meta.endpoint_url)

    def call(
        self, action: str, method: Callable[..., dict[str, Any]], **params: Any
    ) -> dict[str, Any]:
        """``method(**params)``, with every AWS failure turned into one clear error."""
        try:
            return method(**params)
        except FAILURES as exc:
            raise self.error(exc, action) from None

    def error(self, exc: BaseException, action: str) -> RolloutTaxError:
        """A one-line error for an AWS failure of ``action``, naming what to fix."""
        opts, name = self.options, self.name
        if isinstance(exc, _UNREACHABLE):
            return SubstrateUnavailable(
                f"{name}: cannot reach the EC2 API at {self.url} ({type(exc).__name__} on "
                f"{action}); check the network or {name}.endpoint_url"
            )
        if isinstance(exc, aws_errors.NoCredentialsError | aws_errors.PartialCredentialsError):
            return CredentialsMissing(f"{name}: AWS credentials are missing or incomplete")
        if isinstance(exc, aws_errors.ParamValidationError):
            return ConfigError(f"{name}: invalid {action} parameters: {self.redact(str(exc))}")
        if not isinstance(exc, aws_errors.ClientError):
            return SubstrateUnavailable(f"{name}: {action} failed: {self.redact(describe(exc))}")
        code = error_code(exc) or "Unknown"
        text = exc.response.get("Error", {}).get("Message", "").strip()
        message = self.redact(one_line(text.splitlines()[0])) if text else "no message"
        where = f"in {self.region} at {self.url}"
        if code == "UnauthorizedOperation" or code.startswith("AccessDenied"):
            return SubstrateUnavailable(
                f"{name}: not authorized to perform ec2:{action} ({code}); grant it to the "
                "caller's IAM policy (docs/substrates/ec2.md, 'IAM permissions')"
            )
        if code in _BAD_CREDENTIAL_CODES:
            return SubstrateUnavailable(f"{name}: AWS rejected the credentials ({code}) {where}")
        if code.startswith("InvalidAMIID"):
            return ConfigError(f"{name}.ami={opts.ami}: AMI not found {where} ({code})")
        if code.startswith("InvalidInstanceType") or (
            code == "InvalidParameterValue" and "instancetype" in message.lower()
        ):
            return ConfigError(
                f"{name}.instance_type={opts.instance_type}: not available {where} ({code})"
            )
        if code.startswith("InvalidKeyPair"):
            return ConfigError(f"{name}.key_name={opts.key_name}: key pair not found {where}")
        if code.startswith("InvalidSubnet"):
            return ConfigError(f"{name}.subnet_id={opts.subnet_id}: {code}: {message}")
        if code.startswith("InvalidGroup") or code.startswith("InvalidSecurityGroup"):
            return ConfigError(f"{name}.security_group_ids: {code}: {message}")
        if code in _CAPACITY_CODES:
            return SandboxStartError(
                f"{name}: insufficient capacity for {opts.instance_type} {where} ({code}): "
                f"{message}"
            )
        return SandboxStartError(f"{name}: {action} failed ({code}): {message}")

    @property
    def secrets(self) -> list[str]:
        """The credentials in use."""
        return list(self._secrets)

    def redact(self, text: str) -> str:
        """``text`` without the credentials in use."""
        return redact(text, self._secrets)

    def close(self) -> None:
        self.client.close()


def error_code(exc: BaseException) -> str | None:
    """The AWS error code of a call the API refused (``Unknown`` if it names none); None for
    any other failure."""
    if not isinstance(exc, aws_errors.ClientError):
        return None
    return str(exc.response.get("Error", {}).get("Code", "Unknown"))


def _load_secrets(name: str, session: boto3.Session) -> list[str]:
    """Load the credentials (assume-role, SSO and process credentials are fetched here, on
    first use) and return the strings messages must never show."""
    try:
        # A failure is reported below in one line; botocore's warning would add a traceback.
        with _quiet_in_this_thread("botocore.credentials"):
            credentials = session.get_credentials()
            frozen = None if credentials is None else credentials.get_frozen_credentials()
    except (aws_errors.ClientError, aws_errors.BotoCoreError) as exc:
        raise SubstrateUnavailable(
            f"{name}: cannot load the configured AWS credentials: {_credentials_failure(exc)}"
        ) from None
    if frozen is None:
        raise CredentialsMissing(
            f"{name}: no AWS credentials found (environment, shared credentials or "
            "config file, SSO, container or instance role); configure them to run on ec2"
        )
    return [s for s in (frozen.secret_key, frozen.token, frozen.access_key) if s]


def _botocore_session() -> botocore.session.Session:
    """A new botocore session sharing one data loader, so the EC2 service model (megabytes
    of JSON) is parsed once per process, not once per substrate."""
    global _loader
    if _loader is None:
        _loader = botocore.loaders.create_loader()
    session = botocore.session.get_session()
    session.register_component("data_loader", _loader)
    return session


@contextlib.contextmanager
def _quiet_in_this_thread(logger_name: str) -> Iterator[None]:
    """Drop what ``logger_name`` logs from this thread while the block runs."""
    thread = threading.get_ident()
    logger = logging.getLogger(logger_name)

    def other_threads(record: logging.LogRecord) -> bool:
        return record.thread != thread

    logger.addFilter(other_threads)
    try:
        yield
    finally:
        logger.removeFilter(other_threads)


def _credentials_failure(exc: BaseException) -> str:
    """Why the credentials could not be loaded, in one line that carries no secret."""
    if isinstance(exc, aws_errors.ClientError):  # e.g. AssumeRole refused: the code says why
        return f"{exc.operation_name} failed ({error_code(exc)})"
    if isinstance(exc, aws_errors.CredentialRetrievalError):  # its text may be a process's
        return f"{type(exc).__name__} from {exc.kwargs.get('provider', 'a provider')}"
    return describe(exc)
