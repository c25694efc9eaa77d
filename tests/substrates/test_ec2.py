"""The ec2 substrate against moto (EC2 API, server mode, over HTTP) and a real sshd container.

Faults moto does not model are injected by the HTTP proxy in front of it
(tests/support/ec2_moto.py); the substrate only ever sees an ``endpoint_url`` and a
``connect=HOST:PORT``. What every substrate does (exec, files, timeouts) is proved by
tests/contract/; here is what is particular to ec2: SSH and SFTP, instances, tags, errors.
"""

from __future__ import annotations

import json
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest
from support.ec2_moto import (
    ACCESS_KEY,
    REPO,
    SECRET_KEY,
    SECRETS,
    auth_failures,
    ec2_client,
    free_port,
    set_pids_limit,
    start_sshd,
    substrate_opt_args,
    wait_until,
)
from support.substrates import SESSION_SHELL_PID

from pytest_rollout_tax.core.substrate import ROLLOUT_LABEL, SESSION_LABEL
from pytest_rollout_tax.errors import (
    ConfigError,
    CredentialsMissing,
    SandboxError,
    SandboxStartError,
    StepTimeout,
    SubstrateUnavailable,
)
from pytest_rollout_tax.substrates.ec2 import EC2Substrate, SSHError, endpoint

PHASES = ["requested", "running", "ssh_ready", "first_exec"]
SESSION_PHASES = ["requested", "running", "ssh_ready", "session", "first_exec"]
GONE = ("shutting-down", "terminated")


def state(moto_server, instance_id: str) -> str:
    """The instance's state, asked of moto directly (not through the fault proxy)."""
    reservations = ec2_client(moto_server.url).describe_instances(InstanceIds=[instance_id])
    return reservations["Reservations"][0]["Instances"][0]["State"]["Name"]


def instances(moto_server, **filters: str) -> list[dict]:
    """Instances matching ``tag:KEY=VALUE``-style filters (given as KEY=VALUE)."""
    spec = [{"Name": k, "Values": [v]} for k, v in filters.items()]
    pages = ec2_client(moto_server.url).describe_instances(Filters=spec)["Reservations"]
    return [i for r in pages for i in r["Instances"]]


def live_tagged(moto_server) -> set[str]:
    """Ids of live instances that carry the session tag."""
    found = instances(moto_server, **{"tag-key": SESSION_LABEL})
    return {i["InstanceId"] for i in found if i["State"]["Name"] not in GONE}


@pytest.fixture
def sandbox_ec2(make_ec2):
    sandbox = make_ec2().start()
    yield sandbox
    sandbox.close()


# -- exec over SSH --------------------------------------------------------------------------------


def test_a_timeout_never_shows_the_command_and_keeps_the_connection(sandbox_ec2):
    sb = sandbox_ec2
    connection = sb.exec("echo $SSH_CONNECTION").stdout
    with pytest.raises(StepTimeout) as info:
        sb.exec("TOKEN=hunter2-secret; sleep 300 & wait # tok3n", timeout=2)
    assert str(info.value) == "ec2: step ran past its 2 s timeout; killed"  # no command line
    assert sb.rollout.steps[-1].exit_code is None
    assert sb.exec("echo $SSH_CONNECTION").stdout == connection  # the same connection


def test_the_login_shell_execs_the_command_itself(sandbox_ec2):
    """Like a docker exec, a command costs one process: no ``sh -c`` between it and sshd."""
    assert sandbox_ec2.exec("cat /proc/$PPID/comm").stdout == "sshd\n"
    pid, session = sandbox_ec2.exec("echo $$ $(ps -o sid= -p $$)").stdout.split()
    assert pid == session  # the command is the session leader sshd started


def test_a_refused_command_on_a_live_connection_fails_in_one_line(sandbox_ec2, sshd_target):
    sb = sandbox_ec2
    assert sb.exec("true").ok
    set_pids_limit(sshd_target.container, 1)  # sshd cannot fork: it refuses the exec request
    try:
        with pytest.raises(SandboxError) as info:
            sb.exec("echo never")
    finally:
        set_pids_limit(sshd_target.container, -1)
    message = str(info.value)
    assert message.startswith(f"ec2: SSH command on {sb.id} failed: SSHException")
    assert "\n" not in message
    assert sb.exec("echo ok").stdout == "ok\n"  # the connection stayed up and usable


# -- files over SFTP ------------------------------------------------------------------------------


def test_a_file_step_that_gets_no_sftp_answer_times_out(make_ec2, sshd_target):
    container = sshd_target.container
    sb = make_ec2().start(timeout=2)
    pool = ThreadPoolExecutor(1)
    try:
        sb.write_file("a.txt", "first")  # the SFTP session is open
        container.exec_run(["pkill", "-STOP", "-x", "sftp-server"])  # it stops answering
        read = pool.submit(sb.read_file, "a.txt")
        error = read.exception(timeout=120)  # a guard against hanging forever, not a measure
    finally:
        container.exec_run(["pkill", "-KILL", "-x", "sftp-server"])
        pool.shutdown()
    assert isinstance(error, StepTimeout)
    assert (
        str(error) == "ec2: file step got no SFTP answer within its 2 s timeout; connection dropped"
    )
    assert sb.read_file("a.txt") == "first"  # a new connection, a new SFTP session
    assert sb.exec("echo ok").stdout == "ok\n"
    sb.close()


def test_write_recreates_a_directory_removed_behind_its_back(sandbox_ec2):
    sb = sandbox_ec2
    sb.write_file("gone/a.txt", "1")
    sb.exec("rm -rf gone")
    sb.write_file("gone/b.txt", "2")
    assert sb.exec("cat gone/b.txt").stdout == "2"


# -- one multiplexed connection per sandbox -------------------------------------------------------


def test_every_step_of_a_sandbox_uses_one_connection(make_ec2):
    substrate = make_ec2()
    with substrate.start() as first, substrate.start() as second:
        seen = set()
        for i in range(5):
            seen.add(first.exec("echo $SSH_CONNECTION").stdout)
            first.write_file(f"f{i}", str(i))
            first.read_file(f"f{i}")
        assert len(seen) == 1
        assert second.exec("echo $SSH_CONNECTION").stdout not in seen


def test_a_dropped_connection_is_reopened(sandbox_ec2, sshd_target):
    sb = sandbox_ec2
    before = sb.exec("echo $SSH_CONNECTION").stdout
    sshd_target.container.exec_run(["pkill", "-KILL", "-f", "sshd: root@notty"])
    after = sb.exec("echo $SSH_CONNECTION")
    assert after.exit_code == 0 and after.stdout != before
    sb.write_file("x.txt", "ok")
    assert sb.read_file("x.txt") == "ok"


def test_a_changed_host_key_is_refused(make_ec2, docker_client, sshd_image, ec2_keys, tmp_path):
    target = start_sshd(docker_client, sshd_image, ec2_keys["good"])
    try:
        known_hosts = tmp_path / "known_hosts"
        substrate = make_ec2(connect=target.connect, known_hosts=str(known_hosts))
        sb = substrate.start()
        try:
            line = known_hosts.read_text().splitlines()[0]
            assert line.startswith(f"{sb.id} ssh-")
            assert sb.id in substrate.host_keys
            regenerate = "rm -f /etc/ssh/ssh_host_* && ssh-keygen -q -t ed25519 -N '' -f "
            target.container.exec_run(["sh", "-c", regenerate + "/etc/ssh/ssh_host_ed25519_key"])
            target.container.exec_run(["pkill", "-KILL", "-f", "sshd: root@notty"])
            with pytest.raises(SSHError, match=r"host key of instance .* changed") as info:
                sb.exec("true")
            assert target.connect in str(info.value) and "refusing" in str(info.value)
        finally:
            sb.close()
        # A new instance is a new host: its first key is accepted (and recorded).
        with substrate.start() as fresh:
            assert fresh.exec("echo hi").stdout == "hi\n"
        assert len(known_hosts.read_text().splitlines()) == 2
    finally:
        target.container.remove(force=True)


# -- the session transport: one SSH channel running sh ------------------------------------------


def channels_opened(sandbox) -> int:
    """How many channels the sandbox's SSH connection has opened so far."""
    return sandbox.handle.link.connection().channels_opened


def test_session_cold_start_opens_the_shell_as_its_own_phase(make_ec2):
    with make_ec2(transport="session").start() as sb:
        assert sb.rollout.transport == "session"
        assert list(sb.rollout.phases) == SESSION_PHASES
        assert sb.rollout.cold_start_s == pytest.approx(sum(sb.rollout.phases.values()))


def test_every_step_of_a_session_sandbox_uses_one_channel(make_ec2):
    substrate = make_ec2(transport="session")
    with substrate.start() as sb:
        opened = channels_opened(sb)
        shells, connections = set(), set()
        for i in range(5):
            shells.add(sb.exec(SESSION_SHELL_PID).stdout)
            connections.add(sb.exec("echo $SSH_CONNECTION").stdout)
            sb.write_file(f"f{i}", str(i))
            assert sb.read_file(f"f{i}") == str(i)
        with pytest.raises(StepTimeout, match="ec2: step ran past its 1 s timeout; killed"):
            sb.exec("sleep 300", timeout=1)
        shells.add(sb.exec(SESSION_SHELL_PID).stdout)
        assert (len(shells), len(connections)) == (1, 1)
        assert channels_opened(sb) == opened  # no channel per step, no SFTP
    with make_ec2().start() as exec_sb:  # the count is real: exec opens one per step
        before = channels_opened(exec_sb)
        for _ in range(3):
            exec_sb.exec("true")
        assert channels_opened(exec_sb) == before + 3


def lost_session_step(sb) -> SandboxError:
    """The error of the step after the session was cut; fails (not hangs) if none comes."""
    pool = ThreadPoolExecutor(1)
    try:
        error = pool.submit(sb.exec, "echo never").exception(timeout=60)  # a hang guard only
    finally:
        pool.shutdown(wait=False)
    assert isinstance(error, SandboxError), error
    return error


def test_a_session_whose_shell_dies_fails_the_next_step_in_one_line(
    make_ec2, sshd_target, moto_server
):
    sb = make_ec2(transport="session").start()  # no step timeout: nothing bounds a hang
    try:
        shell = sb.exec(SESSION_SHELL_PID).stdout.strip()
        sshd_target.container.exec_run(["kill", "-KILL", shell])
        assert str(lost_session_step(sb)) == "ec2: session lost: the shell ended"
        with pytest.raises(SandboxError) as info:
            sb.read_file("anything")
        assert str(info.value) == "ec2: the session is closed"
    finally:
        sb.close()
    assert state(moto_server, sb.id) in GONE


def test_a_session_whose_connection_dies_fails_the_next_step_in_one_line(make_ec2, sshd_target):
    with make_ec2(transport="session").start() as sb:
        assert sb.exec("true").ok
        sshd_target.container.exec_run(["pkill", "-KILL", "-f", "sshd: root@notty"])
        message = str(lost_session_step(sb))
        assert message.startswith("ec2: session lost: ") and "\n" not in message


# -- cold start, tags, teardown, reaping ----------------------------------------------------------


def test_cold_start_phases(make_ec2):
    with make_ec2().start() as sb:
        assert list(sb.rollout.phases) == PHASES
        assert sb.rollout.cold_start_s == pytest.approx(sum(sb.rollout.phases.values()))


def test_instances_carry_ownership_and_user_tags(make_ec2, moto_server, ec2_world):
    substrate = make_ec2(
        tags='{"team": "rl", "rollout-tax.io/session": "spoofed"}', instance_type="t3.small"
    )
    with substrate.start() as sb:
        (instance,) = instances(moto_server, **{"instance-id": sb.id})
        tags = {t["Key"]: t["Value"] for t in instance["Tags"]}
        assert tags[SESSION_LABEL] == substrate.session_id
        assert tags["team"] == "rl"
        assert tags["Name"] == f"rollout-tax-{tags[ROLLOUT_LABEL]}"
        assert instance["ImageId"] == ec2_world["ami"]
        assert instance["InstanceType"] == "t3.small"
        assert instance["KeyName"] == ec2_world["key_name"]
        assert state(moto_server, sb.id) == "running"
    assert state(moto_server, sb.id) in GONE
    assert substrate.rate.instance_type == "t3.small" and substrate.rate.min_billed_s == 60


def test_reap_terminates_tagged_leftovers_only(make_ec2, moto_server, ec2_world):
    client = ec2_client(moto_server.url)

    def launch(tags: dict[str, str]) -> str:
        spec = [
            {"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in tags.items()]}
        ]
        kwargs = {"TagSpecifications": spec} if tags else {}
        response = client.run_instances(
            ImageId=ec2_world["ami"], InstanceType="t3.micro", MinCount=1, MaxCount=1, **kwargs
        )
        return response["Instances"][0]["InstanceId"]

    substrate = make_ec2()
    crashed = [launch({SESSION_LABEL: "crashed-session"}) for _ in range(2)]
    other = launch({SESSION_LABEL: "other-session"})
    untagged = launch({})
    try:
        assert substrate.reap("crashed-session") == 2
        assert {state(moto_server, i) for i in crashed} <= set(GONE)
        assert state(moto_server, other) == "running"
        assert substrate.reap("crashed-session") == 0
        assert substrate.reap(None) >= 1
        assert state(moto_server, other) in GONE
        assert state(moto_server, untagged) == "running"
    finally:
        client.terminate_instances(InstanceIds=[untagged, other])


def test_rollout_reap_option(pytester, ec2_opts, moto_server, ec2_world):
    client = ec2_client(moto_server.url)
    tags = [{"Key": SESSION_LABEL, "Value": "left-by-a-crash"}]
    leftover = client.run_instances(
        ImageId=ec2_world["ami"],
        InstanceType="t3.micro",
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )["Instances"][0]["InstanceId"]
    result = pytester.runpytest("--rollout-reap", "--substrate=ec2", *substrate_opt_args(ec2_opts))
    assert result.ret == 0
    result.stdout.re_match_lines([r"rollout-tax: ec2: removed [1-9]\d* leftover sandbox\(es\)"])
    assert state(moto_server, leftover) in GONE


# -- errors ---------------------------------------------------------------------------------------


def test_no_credentials_means_credentials_missing(ec2_aws_env, monkeypatch, ec2_opts):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    with pytest.raises(CredentialsMissing, match="no AWS credentials found"):
        EC2Substrate(**ec2_opts)


def test_no_region_is_a_config_error(ec2_aws_env, monkeypatch, ec2_opts):
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    with pytest.raises(ConfigError, match="no AWS region configured"):
        EC2Substrate(**ec2_opts)
    assert EC2Substrate(**ec2_opts, region="eu-west-1").region == "eu-west-1"


def test_aws_region_is_honoured_before_aws_default_region(ec2_aws_env, monkeypatch, ec2_opts):
    """Decision finding 11: AWS_REGION, as the AWS SDKs read it (boto3 alone does not)."""
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    assert EC2Substrate(**ec2_opts).region == "us-east-1"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert EC2Substrate(**ec2_opts).region == "us-east-1"
    assert EC2Substrate(**ec2_opts, region="ap-south-1").region == "ap-south-1"


@pytest.fixture
def role_profile(ec2_aws_env, ec2_proxy, monkeypatch, tmp_path) -> str:
    """An assume-role profile whose credentials come from STS (moto, through the proxy) only
    when first used, as with SSO or a role; its name."""
    config = tmp_path / "aws-config"
    config.write_text(
        "[profile base]\n"
        f"aws_access_key_id = {ACCESS_KEY}\n"
        f"aws_secret_access_key = {SECRET_KEY}\n"
        "[profile rollout-tax-role]\n"
        "role_arn = arn:aws:iam::123456789012:role/rollout-tax-test\n"
        "source_profile = base\n"
    )
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", ec2_proxy.url)
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    return "rollout-tax-role"


def test_lazily_fetched_credentials_that_fail_are_one_line(
    make_ec2, role_profile, ec2_faults, monkeypatch
):
    assert make_ec2(profile=role_profile, ami="").region  # the role's credentials work...
    assert ec2_faults.actions.count("AssumeRole") == 1  # ...and are fetched from STS
    monkeypatch.setenv("AWS_ENDPOINT_URL_STS", f"http://127.0.0.1:{free_port()}")
    with pytest.raises(SubstrateUnavailable) as info:
        make_ec2(profile=role_profile)
    message = str(info.value)
    assert message.startswith(
        "ec2: cannot load the configured AWS credentials: EndpointConnectionError"
    )
    assert "\n" not in message and not any(secret in message for secret in SECRETS)


def test_a_refused_assume_role_fails_every_rollout_in_one_line(
    pytester, ec2_opts, role_profile, ec2_faults
):
    ec2_faults.fail("AssumeRole", "AccessDenied", f"not authorized; key {ACCESS_KEY}", status=403)
    pytester.makepyfile(test_workload=WORKLOAD)
    opts = ec2_opts | {"profile": role_profile}
    result = pytester.runpytest("--substrate=ec2", *substrate_opt_args(opts))
    result.assert_outcomes(errors=3)
    result.stdout.fnmatch_lines(
        ["*ec2: cannot load the configured AWS credentials: AssumeRole failed (AccessDenied)*"]
    )
    output = result.stdout.str() + result.stderr.str()
    assert "Traceback" not in output and not any(secret in output for secret in SECRETS)
    assert ec2_faults.actions.count("AssumeRole") == 1  # remembered: not retried per rollout


def test_unreachable_endpoint_is_named(make_ec2):
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(SubstrateUnavailable) as info:
        make_ec2(endpoint_url=url)
    assert f"cannot reach the EC2 API at {url}" in str(info.value)


def test_unknown_ami_and_instance_type(make_ec2, ec2_faults):
    substrate = make_ec2(ami="ami-0000000000000dead")
    with pytest.raises(ConfigError, match=r"ec2\.ami=ami-0000000000000dead: AMI not found"):
        substrate.start()
    substrate = make_ec2(instance_type="x9.nonexistent")
    with pytest.raises(ConfigError, match=r"ec2\.instance_type=x9\.nonexistent: not available"):
        substrate.start()
    assert "TerminateInstances" not in ec2_faults.actions  # nothing was launched


@pytest.mark.parametrize("action", ["RunInstances", "DescribeInstances"])
def test_unauthorized_is_reported_once_naming_the_action(make_ec2, ec2_faults, action):
    ec2_faults.fail(
        action,
        "UnauthorizedOperation",
        "You are not authorized to perform this operation. Encoded authorization failure "
        "message: ENCODEDBLOB123",
        status=403,
    )
    with pytest.raises(SubstrateUnavailable) as info:
        make_ec2()  # the DryRun pre-flight, before anything is launched
    message = str(info.value)
    assert f"not authorized to perform ec2:{action}" in message
    assert "ENCODEDBLOB123" not in message
    assert not any(a == "RunInstances" for a in ec2_faults.actions)  # no real launch


def test_unauthorized_terminate_is_named_at_teardown(make_ec2, ec2_faults, moto_server):
    substrate = make_ec2()
    sb = substrate.start()
    ec2_faults.fail("TerminateInstances", "UnauthorizedOperation", "denied", status=403)
    with pytest.raises(
        SubstrateUnavailable, match="not authorized to perform ec2:TerminateInstances"
    ) as info:
        sb.close()
    assert "it is tagged, and a reap of ec2 removes it" in str(info.value)
    assert state(moto_server, sb.id) == "running"
    ec2_faults.clear()
    assert substrate.reap(substrate.session_id) == 1


def test_failed_start_that_cannot_terminate_says_how_to_reap(make_ec2, ec2_faults, moto_server):
    substrate = make_ec2(connect=f"127.0.0.1:{free_port()}", ready_timeout="0.5")
    ec2_faults.fail("TerminateInstances", "UnauthorizedOperation", "denied", status=403)
    with pytest.raises(SandboxStartError) as info:
        substrate.start()
    assert "could not terminate instance" in str(info.value)
    assert "it is tagged, and a reap of ec2 removes it" in str(info.value)
    ec2_faults.clear()
    assert substrate.reap(substrate.session_id) == 1


def test_insufficient_capacity(make_ec2, ec2_faults, moto_server):
    substrate = make_ec2(instance_type="c7i.large")
    before = live_tagged(moto_server)
    ec2_faults.fail(
        "RunInstances",
        "InsufficientInstanceCapacity",
        "We currently do not have sufficient c7i.large capacity in the Availability Zone "
        "you requested (us-east-1a).",
        status=500,
        dry_run=False,
    )
    with pytest.raises(SandboxStartError) as info:
        substrate.start()
    message = str(info.value)
    assert "insufficient capacity for c7i.large in us-east-1" in message
    assert "(InsufficientInstanceCapacity)" in message and "us-east-1a" in message
    assert live_tagged(moto_server) == before


def test_instance_stuck_pending_is_terminated(make_ec2, ec2_faults, moto_server):
    substrate = make_ec2(ready_timeout="0.5")
    ec2_faults.rewrite("DescribeInstances", "<name>running</name>", "<name>pending</name>")
    with pytest.raises(
        SandboxStartError, match=r"was not running within 0\.5 s \(state pending\)"
    ) as info:
        substrate.start()
    instance_id = str(info.value).split("instance ")[1].split()[0]
    ec2_faults.clear()
    assert "terminated" in str(info.value) and state(moto_server, instance_id) in GONE


def test_instance_that_dies_while_starting(make_ec2, ec2_faults):
    substrate = make_ec2()
    ec2_faults.rewrite("DescribeInstances", "<name>running</name>", "<name>terminated</name>")
    with pytest.raises(SandboxStartError, match="went terminated while starting"):
        substrate.start()


def test_ssh_never_ready_names_host_and_port_and_terminates(make_ec2, moto_server):
    port = free_port()
    substrate = make_ec2(connect=f"127.0.0.1:{port}", ready_timeout="2")
    with pytest.raises(SandboxStartError) as info:
        substrate.start()
    message = str(info.value)
    assert f"SSH on 127.0.0.1:{port}" in message and "not ready within 2 s" in message
    assert "ConnectionRefusedError" in message
    instance_id = message.split("(instance ")[1].split(")")[0]
    assert f"instance {instance_id} terminated" in message
    assert state(moto_server, instance_id) in GONE


def test_ssh_authentication_failure(make_ec2, ec2_keys, ec2_faults, moto_server, sshd_target):
    substrate = make_ec2(ssh_key=str(ec2_keys["wrong"].private), ready_timeout="2")
    with pytest.raises(SandboxStartError) as info:
        substrate.start()
    message = str(info.value)
    assert f"SSH authentication as 'root' with key {ec2_keys['wrong'].private} failed" in message
    assert f"on {sshd_target.connect}" in message and "until the 2 s ready_timeout" in message
    instance_id = message.split("(instance ")[1].split(")")[0]
    assert state(moto_server, instance_id) in GONE
    launches = ec2_faults.actions.count("RunInstances")
    with pytest.raises(SandboxStartError, match="earlier in this session; not retried"):
        substrate.start()
    assert ec2_faults.actions.count("RunInstances") == launches  # no second paid launch


def test_authentication_is_retried_while_the_key_is_not_installed_yet(
    make_ec2, docker_client, sshd_image, ec2_keys
):
    """As on an AMI where cloud-init installs the user's key after sshd has started."""
    target = start_sshd(docker_client, sshd_image, ec2_keys["wrong"])  # not our key, yet
    pool = ThreadPoolExecutor(1)
    try:
        substrate = make_ec2(connect=target.connect)
        starting = pool.submit(substrate.start)
        wait_until(
            lambda: starting.done() or auth_failures(target.container) > 0,
            60,
            "no SSH authentication failed",
        )
        install = f"printf '%s\\n' '{ec2_keys['good'].public}' > /root/.ssh/authorized_keys"
        target.container.exec_run(["sh", "-c", install])
        with starting.result(timeout=120) as sb:
            assert sb.exec("echo hi").stdout == "hi\n"
        assert auth_failures(target.container) >= 1
        with substrate.start() as again:  # no session-wide "authentication failed" verdict
            assert again.exec("true").ok
    finally:
        pool.shutdown()
        target.container.remove(force=True)


def test_configuration_errors(make_ec2, tmp_path, ec2_keys):
    with pytest.raises(ConfigError, match=r"ec2\.ssh_key=/no/such/key: no such file"):
        make_ec2(ssh_key="/no/such/key")
    public = tmp_path / "key.pub"
    public.write_text(ec2_keys["good"].public)
    with pytest.raises(ConfigError, match="not a private key"):
        make_ec2(ssh_key=str(public))
    with pytest.raises(ConfigError, match="connect="):
        make_ec2(connect="host:notaport")
    with pytest.raises(ConfigError, match="workdir"):
        make_ec2(workdir="relative/dir")
    no_ami = make_ec2(ami="")
    with pytest.raises(ConfigError, match=r"ec2\.ami is not set"):
        no_ami.start()
    assert no_ami.reap("nothing-here") == 0  # reaping needs no AMI
    assert make_ec2(price_per_hour="0.0416").rate.sandbox_hour == 0.0416


def test_connect_values():
    assert endpoint("public_ip") is None and endpoint("private_ip") is None
    assert endpoint("10.0.0.5:2222") == ("10.0.0.5", 2222)
    assert endpoint("bastion.example.com") == ("bastion.example.com", 22)
    assert endpoint("[::1]:2222") == ("::1", 2222)
    assert endpoint("[fe80::1]") == ("fe80::1", 22)
    with pytest.raises(ValueError):
        endpoint("host:0")


# -- through pytest: the user's workload, skips, errors without tracebacks or secrets -------------

WORKLOAD = textwrap.dedent(
    """
    import pytest

    @pytest.mark.trajectory(steps=150, rounds=2)
    def test_bugfix_loop(sandbox):
        sandbox.write_file("calc.py", "def add(a, b):\\n    return a - b\\n")
        r = sandbox.exec("python3 -c 'import calc; print(calc.add(2, 2))'")
        assert r.exit_code == 0 and r.stdout.strip() == "0"
        sandbox.write_file("calc.py", "def add(a, b):\\n    return a + b  # fixed\\n")
        r = sandbox.exec("python3 -c 'import calc; print(calc.add(2, 2))'")
        assert r.stdout.strip() == "4"

    @pytest.mark.trajectory(steps=150)
    def test_agent_loop(sandbox, rollout):
        for i in range(20):
            sandbox.write_file(f"notes/{i}.txt", f"step {i}")
            assert sandbox.read_file(f"notes/{i}.txt") == f"step {i}"
            assert sandbox.exec(["cat", f"notes/{i}.txt"]).stdout == f"step {i}"
        assert len(rollout.steps) == 60
    """
)


@pytest.mark.parametrize(("transport", "phases"), [("exec", PHASES), ("session", SESSION_PHASES)])
def test_user_workload_passes_on_ec2(pytester, ec2_opts, moto_server, transport, phases):
    before = live_tagged(moto_server)
    pytester.makepyfile(test_workload=WORKLOAD)
    result = pytester.runpytest(
        "--substrate=ec2",
        *substrate_opt_args(ec2_opts | {"transport": transport}),
        "--rollout-probes=3",
        "--rollout-json=report.json",
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*rollout tax*", "ec2 *3*"])
    report = json.loads((pytester.path / "report.json").read_text())
    ec2 = report["substrates"]["ec2"]
    assert (ec2["rollouts"], ec2["failures"]) == (3, 0)
    assert (ec2["transport"], list(ec2["phases"])) == (transport, phases)
    assert ec2["action"]["n"] == 9
    assert all(len(r["action_probes_s"]) == 3 for r in report["rollouts"])
    assert live_tagged(moto_server) == before  # every instance terminated


def test_example_suite_passes_on_ec2(pytester, ec2_opts, moto_server):
    before = live_tagged(moto_server)
    for path in sorted((REPO / "example_suite").glob("test_*.py")):
        pytester.makepyfile(**{path.stem: path.read_text()})
    result = pytester.runpytest(
        "--substrate=ec2", *substrate_opt_args(ec2_opts), "--rollout-json=report.json"
    )
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 2 and set(outcomes) <= {"passed"}, outcomes
    report = json.loads((pytester.path / "report.json").read_text())
    ec2 = report["substrates"]["ec2"]
    assert (ec2["rollouts"], ec2["failures"]) == (outcomes["passed"], 0)
    assert live_tagged(moto_server) == before


def test_rollouts_skip_without_credentials(pytester, ec2_opts, monkeypatch):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    pytester.makepyfile(test_workload=WORKLOAD)
    result = pytester.runpytest("--substrate=ec2", *substrate_opt_args(ec2_opts), "-rs")
    result.assert_outcomes(skipped=3)
    result.stdout.fnmatch_lines(["*SKIPPED*ec2: no AWS credentials found*"])


def test_errors_carry_no_traceback_and_no_secret(pytester, ec2_opts, ec2_faults):
    pytester.makepyfile(test_workload=WORKLOAD)
    args = ["--substrate=ec2", *substrate_opt_args(ec2_opts), "--rollout-json=report.json"]
    ok = pytester.runpytest(*args, "-k", "agent_loop")
    ok.assert_outcomes(passed=1)
    ec2_faults.fail("RunInstances", "UnauthorizedOperation", "denied", status=403)
    failed = pytester.runpytest_subprocess(*args[:-1], "--rollout-json=failed.json")
    failed.assert_outcomes(errors=3)
    failed.stdout.fnmatch_lines(["*ec2: not authorized to perform ec2:RunInstances*"])
    assert "Traceback" not in failed.stdout.str() + failed.stderr.str()
    outputs = [ok.stdout.str(), ok.stderr.str(), failed.stdout.str(), failed.stderr.str()]
    outputs += [(pytester.path / name).read_text() for name in ("report.json", "failed.json")]
    for secret in SECRETS:
        assert all(secret not in text for text in outputs)
    options = EC2Substrate(**ec2_opts | {"ami": "", "user_data": "password=hunter2"}).options
    assert "hunter2" not in repr(options)


def test_price_per_hour_puts_dollars_next_to_worker_hours(pytester, ec2_opts):
    pytester.makepyfile(test_workload=WORKLOAD)
    result = pytester.runpytest(
        "--substrate=ec2",
        *substrate_opt_args(ec2_opts | {"price_per_hour": "0.0416"}),
        "--rollout-json=report.json",
        "-k",
        "agent_loop",
    )
    result.assert_outcomes(passed=1)
    ec2 = json.loads((pytester.path / "report.json").read_text())["substrates"]["ec2"]
    assert ec2["price_per_hour"] == 0.0416
    # the launch's 60 s minimum is billed on top of the worker-hours at the price
    assert ec2["cost_usd"] >= ec2["worker_hours"] * 0.0416
    assert ec2["cost_usd"] == pytest.approx(ec2["cost"]["dollars"])
    assert ec2["rate"]["min_billed_s"] == 60 and ec2["rate"]["source"] == "yours"
    result.stdout.fnmatch_lines(["*worker*", "ec2 dollars: $* for 1,000,000 rollouts*"])


def test_missing_sdk_names_the_extra(monkeypatch):
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, "paramiko", None)
    monkeypatch.delitem(sys.modules, "pytest_rollout_tax.substrates.ec2")
    with pytest.raises(SubstrateUnavailable, match=r"pip install 'pytest-rollout-tax\[aws\]'"):
        importlib.import_module("pytest_rollout_tax.substrates.ec2")


def test_a_teardown_error_is_one_line_and_fails_the_rollout(pytester, ec2_opts, ec2_faults):
    pytester.makepyfile(test_w="def test_a(sandbox):\n    sandbox.exec('true')\n")
    ec2_faults.fail("TerminateInstances", "UnauthorizedOperation", "denied", status=403)
    try:
        result = pytester.runpytest("--substrate=ec2", *substrate_opt_args(ec2_opts))
    finally:
        ec2_faults.clear()
    assert "Traceback" not in result.stdout.str()
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*ec2: teardown: ec2: not authorized to perform ec2:TerminateInstances*"]
    )


def test_an_xdist_worker_that_finishes_first_leaves_the_others_sandboxes_alone(
    pytester, ec2_opts, moto_server
):
    """Workers share one session id; only the controller may reap the session."""
    pytester.makepyfile(
        test_w=textwrap.dedent(
            f"""
            import time, boto3

            def test_fast(sandbox):
                sandbox.exec("true")

            def test_slow(sandbox):
                time.sleep(3)  # outlive the other worker's session (ordering, not a timing check)
                client = boto3.client("ec2", endpoint_url="{moto_server.url}")
                found = client.describe_instances(InstanceIds=[sandbox.id])
                assert found["Reservations"][0]["Instances"][0]["State"]["Name"] == "running"
            """
        )
    )
    result = pytester.runpytest_subprocess(
        "-p", "xdist", "-n", "2", "--substrate=ec2", *substrate_opt_args(ec2_opts)
    )
    result.assert_outcomes(passed=2)
