"""The options of the ``ec2`` substrate, and the ``connect`` values they accept."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...core.price import MAX_DOLLARS_PER_HOUR
from ...core.substrate import SubstrateOptions


@dataclass
class EC2Options(SubstrateOptions):
    #: AMI id to launch (required to create sandboxes; not needed for ``--rollout-reap``).
    ami: str | None = None
    instance_type: str = "t3.micro"
    subnet_id: str | None = None
    security_group_ids: list[str] = field(default_factory=list)
    #: EC2 key pair whose public key the AMI installs for ``ssh_user``.
    key_name: str | None = None
    #: Instance profile name, or its ARN.
    iam_instance_profile: str | None = None
    user_data: str | None = field(default=None, repr=False)
    #: Extra tags for instances and volumes (the ownership tags always win).
    tags: dict[str, str] = field(default_factory=dict)
    ssh_user: str = "ec2-user"
    #: Private key file matching ``key_name``; unset: the keys ssh-agent offers.
    ssh_key: str | None = None
    #: ``public_ip``, ``private_ip``, or a fixed ``host:port`` (bastion tunnel, tests).
    connect: str = "public_ip"
    #: Seconds from ``run_instances`` until SSH must answer; else the instance is terminated.
    ready_timeout: float = 600.0
    endpoint_url: str | None = None
    #: Absolute working directory of each sandbox; ``{instance_id}`` is replaced.
    workdir: str = "/tmp/rollout-tax/{instance_id}"
    #: Region and profile; unset: the standard resolution (AWS_REGION, AWS_PROFILE, config).
    region: str | None = None
    profile: str | None = None
    #: Seconds between ``describe_instances`` polls and between SSH connection attempts.
    poll_interval: float = 0.25
    #: Optional known_hosts file: accepted keys are appended under the instance id.
    known_hosts: str | None = None
    #: Dollars per instance-hour: ``price.instance_hour`` by its older name.
    price_per_hour: float | None = None

    def check(self) -> None:
        endpoint(self.connect)
        if self.ready_timeout <= 0:
            raise ValueError(f"ready_timeout={self.ready_timeout}: must be > 0")
        if self.poll_interval <= 0:
            raise ValueError(f"poll_interval={self.poll_interval}: must be > 0")
        if not self.workdir.startswith("/"):
            raise ValueError(f"workdir={self.workdir!r}: must be an absolute path")
        if self.price_per_hour is not None:
            if not 0 <= self.price_per_hour <= MAX_DOLLARS_PER_HOUR:
                raise ValueError(f"price_per_hour={self.price_per_hour}: must be >= 0")
            if self.price.instance_hour is not None:
                raise ValueError("price_per_hour: give price.instance_hour alone")
            self.price.instance_hour = self.price_per_hour


def endpoint(connect: str) -> tuple[str, int] | None:
    """``(host, port)`` of a fixed ``connect`` value, None for ``public_ip``/``private_ip``."""
    if connect in ("public_ip", "private_ip"):
        return None
    host, sep, port = connect.rpartition(":")
    if not sep or (":" in host and not host.startswith("[")) or connect.endswith("]"):
        host, port = connect, "22"  # no port: a name, an IPv4 address or a bare IPv6 address
    host = host.strip("[]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"connect={connect!r}: expected public_ip, private_ip or HOST:PORT")
    return host, int(port)
