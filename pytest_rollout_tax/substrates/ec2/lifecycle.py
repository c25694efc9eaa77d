"""The ``ec2`` substrate: launch an instance, wait for it and its SSH, terminate, reap.

Cold start runs from ``run_instances`` to the first no-op command over SSH, in the phases
``requested`` (the API call), ``running`` (``describe_instances`` polled at a short interval:
boto3's waiters poll every 15 s and would measure themselves), ``ssh_ready`` (TCP, SSH
handshake, host key, authentication, work directory), ``session`` (the ``session``
transport's shell) and ``first_exec``.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ...core.price import Resources
from ...core.record import PhaseClock
from ...core.sandbox import Handle
from ...core.shell import ShellTransport
from ...core.substrate import ROLLOUT_LABEL, SESSION_LABEL, Substrate
from ...core.transport import Transport
from ...errors import ConfigError, RolloutTaxError, SandboxError, SandboxStartError
from .aws import FAILURES, EC2Api, error_code
from .errors import describe
from .login import Link, Login
from .options import EC2Options, endpoint
from .shell import SSHShell
from .transport import EC2Exec

#: Instance states from which an instance never becomes usable.
GONE_STATES = ("shutting-down", "terminated", "stopping", "stopped")
#: States that ``reap`` terminates.
LIVE_STATES = ("pending", "running", "stopping", "stopped")
#: Seconds to wait for the API to report a terminated instance as shutting down.
TERMINATE_TIMEOUT = 60.0
_ADDRESS_KEYS = {"public_ip": "PublicIpAddress", "private_ip": "PrivateIpAddress"}


@dataclass
class EC2Handle(Handle):
    """A live instance (``id`` is its instance id) and the SSH link to it."""

    link: Link


class EC2Substrate(Substrate):
    """Cloud VMs on EC2 (or an EC2-compatible endpoint) through boto3; SSH through paramiko."""

    kind = "ec2"
    hosted = True
    Options = EC2Options
    transports = ("exec", "session")

    def __init__(self, name: str | None = None, **kwargs: Any) -> None:
        super().__init__(name, **kwargs)
        opts: EC2Options = self.options
        self.fixed_endpoint = endpoint(opts.connect)
        self.api = EC2Api(self.name, opts)
        self.client = self.api.client
        self.region = self.api.region
        self.login = Login(self.name, opts)
        #: Host keys accepted on first contact, per instance id (accept-new, then pinned).
        self.host_keys = self.login.pins.keys
        if opts.ami:
            self.login.load_keys()  # a key that cannot be loaded is a config error now
            self._preflight()

    # -- cold start ----------------------------------------------------------------------------

    @property
    def secrets(self) -> list[str]:
        return self.api.secrets

    def _create(self, *, labels: dict[str, str], clock: PhaseClock) -> EC2Handle:
        opts: EC2Options = self.options
        if not opts.ami:
            raise ConfigError(
                f"{self.name}.ami is not set: name the AMI to boot ({self.name}.ami=ID)"
            )
        self.login.load_keys()  # loaded (or refused) before anything is launched
        if self.login.failure:
            raise SandboxStartError(f"{self.login.failure} (earlier in this session; not retried)")
        response = self.api.call("RunInstances", self.client.run_instances, **self.launch(labels))
        instance_id = response["Instances"][0]["InstanceId"]
        clock.mark("requested")
        deadline = clock.started + opts.ready_timeout
        try:
            instance = self._wait_running(instance_id, deadline)
            clock.mark("running")
            host, port = self._address(instance)
            connection = self.login.connect(instance_id, host, port, deadline, retry=True)
            try:
                workdir = opts.workdir.replace("{instance_id}", instance_id)
                connection.check_call(
                    f"mkdir -p -- {shlex.quote(workdir)}", timeout=60, name=self.name
                )
            except BaseException:
                connection.close()
                raise
            clock.mark("ssh_ready")
        except BaseException as exc:
            note = self._terminate_after_failure(instance_id)
            if isinstance(exc, RolloutTaxError):
                raise type(exc)(f"{exc}; {note}") from None
            if isinstance(exc, Exception):
                raise SandboxStartError(f"{self.name}: {describe(exc)}; {note}") from None
            raise
        link = Link(self.login, instance_id, host, port, connection)
        return EC2Handle(id=instance_id, workdir=workdir, link=link)

    def _transport(self, handle: EC2Handle) -> Transport:
        if self.options.transport == "session":
            name = self.name
            return ShellTransport(
                lambda: SSHShell(handle.link.connection(), substrate=name), substrate=name
            )
        return EC2Exec(handle.link, substrate=self.name)

    def launch(self, labels: dict[str, str]) -> dict[str, Any]:
        """The ``run_instances`` parameters: options plus the ownership tags."""
        opts: EC2Options = self.options
        tags = {"Name": f"rollout-tax-{labels.get(ROLLOUT_LABEL, self.session_id)}"}
        tags |= dict(opts.tags) | labels
        tag_list = [{"Key": k, "Value": v} for k, v in tags.items()]
        params: dict[str, Any] = {
            "ImageId": opts.ami,
            "InstanceType": opts.instance_type,
            "MinCount": 1,
            "MaxCount": 1,
            "TagSpecifications": [
                {"ResourceType": kind, "Tags": tag_list} for kind in ("instance", "volume")
            ],
        }
        if opts.subnet_id:
            params["SubnetId"] = opts.subnet_id
        if opts.security_group_ids:
            params["SecurityGroupIds"] = list(opts.security_group_ids)
        if opts.key_name:
            params["KeyName"] = opts.key_name
        if opts.iam_instance_profile:
            profile = opts.iam_instance_profile
            params["IamInstanceProfile"] = (
                {"Arn": profile} if profile.startswith("arn:") else {"Name": profile}
            )
        if opts.user_data:
            params["UserData"] = opts.user_data
        return params

    def _wait_running(self, instance_id: str, deadline: float) -> dict[str, Any]:
        """Poll ``describe_instances`` until the instance runs (with the address we need)."""
        opts: EC2Options = self.options
        state = "pending"
        while True:
            try:
                response = self.client.describe_instances(InstanceIds=[instance_id])
            except FAILURES as exc:
                if error_code(exc) != "InvalidInstanceID.NotFound":  # eventual consistency
                    raise self.api.error(exc, "DescribeInstances") from None
            else:
                instances = [i for r in response["Reservations"] for i in r["Instances"]]
                if instances:
                    instance = instances[0]
                    state = instance["State"]["Name"]
                    if state == "running" and (
                        self.fixed_endpoint or instance.get(_ADDRESS_KEYS[opts.connect])
                    ):
                        found: dict[str, Any] = instance
                        return found
                    if state in GONE_STATES:
                        reason = instance.get("StateReason", {}).get("Message", "no reason given")
                        raise SandboxStartError(
                            f"{self.name}: instance {instance_id} went {state} while starting: "
                            f"{self.api.redact(reason)}"
                        )
            if time.perf_counter() + opts.poll_interval > deadline:
                what = "running" if state != "running" else f"running with a {opts.connect}"
                raise SandboxStartError(
                    f"{self.name}: instance {instance_id} was not {what} within "
                    f"{opts.ready_timeout:g} s (state {state})"
                )
            time.sleep(opts.poll_interval)

    def _address(self, instance: dict[str, Any]) -> tuple[str, int]:
        if self.fixed_endpoint:
            return self.fixed_endpoint
        return instance[_ADDRESS_KEYS[self.options.connect]], 22

    # -- teardown and reaping ------------------------------------------------------------------

    def destroy(self, handle: EC2Handle) -> None:
        handle.link.close()
        try:
            self.terminate(handle.id)
        except RolloutTaxError as exc:
            raise type(exc)(
                f"{exc}; instance {handle.id} may still be running: it is tagged, and a reap "
                f"of {self.name} removes it"
            ) from None

    def terminate(self, instance_id: str) -> None:
        """Terminate ``instance_id`` and return once the API reports it shutting down."""
        response = self.api.call(
            "TerminateInstances", self.client.terminate_instances, InstanceIds=[instance_id]
        )
        states = [i["CurrentState"]["Name"] for i in response.get("TerminatingInstances", [])]
        deadline = time.perf_counter() + TERMINATE_TIMEOUT
        while not states or states[0] not in ("shutting-down", "terminated"):
            if time.perf_counter() > deadline:
                raise SandboxError(
                    f"{self.name}: instance {instance_id} still {states} {TERMINATE_TIMEOUT:g} s "
                    "after terminate_instances"
                )
            time.sleep(self.options.poll_interval)
            described = self.api.call(
                "DescribeInstances", self.client.describe_instances, InstanceIds=[instance_id]
            )
            states = [i["State"]["Name"] for r in described["Reservations"] for i in r["Instances"]]

    def _terminate_after_failure(self, instance_id: str) -> str:
        """Terminate an instance whose start failed; a note for the error message."""
        try:
            self.terminate(instance_id)
        except Exception as exc:
            return (
                f"could not terminate instance {instance_id} ({exc}); it is tagged, and a reap "
                f"of {self.name} removes it"
            )
        return f"instance {instance_id} terminated"

    def reap(self, session_id: str | None = None) -> int:
        """Terminate live instances tagged with ``session_id`` (any rollout-tax session if None)."""
        if session_id is None:
            owner = {"Name": "tag-key", "Values": [SESSION_LABEL]}
        else:
            owner = {"Name": f"tag:{SESSION_LABEL}", "Values": [session_id]}
        return self._terminate_matching([owner])

    def reap_tagged(self, labels: Mapping[str, str]) -> int:
        """Terminate the live instances (``pending`` ones included) tagged with ``labels``,
        one create's: its RunInstances carried them (TagSpecifications)."""
        return self._terminate_matching(
            [{"Name": f"tag:{key}", "Values": [value]} for key, value in labels.items()]
        )

    def _terminate_matching(self, owner: list[dict[str, Any]]) -> int:
        """Terminate the live instances that match every filter of ``owner``; how many."""
        filters = [*owner, {"Name": "instance-state-name", "Values": list(LIVE_STATES)}]
        ids: list[str] = []
        try:
            for page in self.client.get_paginator("describe_instances").paginate(Filters=filters):
                ids += [i["InstanceId"] for r in page["Reservations"] for i in r["Instances"]]
        except FAILURES as exc:
            raise self.api.error(exc, "DescribeInstances") from None
        for start in range(0, len(ids), 1000):
            self.api.call(
                "TerminateInstances",
                self.client.terminate_instances,
                InstanceIds=ids[start : start + 1000],
            )
        return len(ids)

    @property
    def resources(self) -> Resources:
        return Resources(instance_type=self.options.instance_type)

    @property
    def endpoint(self) -> str:
        return str(self.client.meta.endpoint_url)

    def ping(self) -> None:
        self.client.describe_availability_zones()

    def close(self) -> None:
        self.api.close()

    def _preflight(self) -> None:
        """Check reachability, permissions and launch parameters once, launching nothing."""
        for action, call, params in (
            ("DescribeInstances", self.client.describe_instances, {"MaxResults": 5}),
            ("RunInstances", self.client.run_instances, self.launch({SESSION_LABEL: "dryrun"})),
        ):
            try:
                call(DryRun=True, **params)
            except FAILURES as exc:
                if error_code(exc) != "DryRunOperation":
                    raise self.api.error(exc, action) from None
