"""``write_file`` and ``read_file`` at their edges, the same on every substrate."""

from __future__ import annotations

import errno
import uuid

import pytest

from pytest_rollout_tax import NotRegularFileError


def test_text_and_bytes_round_trip_exactly_in_nested_directories(box, space):
    data = bytes(range(256)) * 4096 * 3  # 3 MiB with every byte value
    box.write_file(f"{space}/a/b/c/blob.bin", data)
    assert box.read_file(f"{space}/a/b/c/blob.bin", binary=True) == data
    box.write_file(f"{space}/ünï cødé.txt", "ünï\ncødé\n")
    assert box.read_file(f"{space}/ünï cødé.txt") == "ünï\ncødé\n"
    assert box.exec(["cat", "ünï cødé.txt"], cwd=space).stdout == "ünï\ncødé\n"


def test_writing_an_empty_file_and_overwriting_replace_the_whole_file(box, space):
    box.write_file(f"{space}/f", "a long first version\n")
    box.write_file(f"{space}/f", "short")
    assert box.read_file(f"{space}/f") == "short"
    box.write_file(f"{space}/f", b"")
    assert box.read_file(f"{space}/f", binary=True) == b""


def test_what_commands_write_is_read_and_what_is_written_is_run(box, space):
    box.exec(f"printf 'made by a command' > {space}/out")
    assert box.read_file(f"{space}/out") == "made by a command"
    box.write_file(f"{space}/run.sh", "echo ran\n")
    assert box.exec(["sh", "run.sh"], cwd=space).stdout == "ran\n"


def test_invalid_utf8_in_a_file_is_replaced_in_text_mode(box, space):
    box.write_file(f"{space}/bad", b"a\xffb")
    assert box.read_file(f"{space}/bad") == "a\ufffdb"


def test_reads_follow_symbolic_links(box, space):
    box.write_file(f"{space}/target", "via link")
    assert box.exec(["ln", "-s", "target", f"{space}/link"]).ok
    assert box.read_file(f"{space}/link") == "via link"


def test_writes_go_through_symbolic_links(box, space):
    """Finding 4: docker exec replaced the link by a file (the target kept its content), and
    so did the e2b stand-in."""
    box.write_file(f"{space}/target", "old")
    assert box.exec(f"cd {space} && ln -s target link && ln -s link chain").ok
    box.write_file(f"{space}/link", "new")
    assert box.read_file(f"{space}/target") == "new"
    box.write_file(f"{space}/chain", "newer")
    assert box.read_file(f"{space}/target") == "newer"
    assert box.exec(f"test -L {space}/link && test -L {space}/chain").ok


def test_writing_through_a_link_to_a_directory_is_is_a_directory_and_keeps_both(box, space):
    """Finding 4: docker exec replaced a link to a directory instead of raising."""
    box.write_file(f"{space}/d/keep", "kept")
    assert box.exec(["ln", "-s", "d", f"{space}/dlink"]).ok
    with pytest.raises(IsADirectoryError):
        box.write_file(f"{space}/dlink", "x")
    assert box.exec(f"test -L {space}/dlink").ok
    assert box.read_file(f"{space}/dlink/keep") == "kept"


def test_absolute_paths_and_paths_leaving_the_workdir_are_allowed(box, space):
    outside = f"/tmp/rollout-tax-contract-{uuid.uuid4().hex[:8]}"
    try:
        box.write_file(f"{outside}/f", "outside")
        assert box.read_file(f"{outside}/f") == "outside"
        relative = "../" * box.workdir.count("/") + outside.lstrip("/") + "/f"
        assert box.read_file(relative) == "outside"
    finally:
        box.exec(["rm", "-rf", outside])


def test_reading_a_missing_file_is_file_not_found(box, space):
    with pytest.raises(FileNotFoundError):
        box.read_file(f"{space}/missing")
    with pytest.raises(FileNotFoundError):
        box.read_file(f"{space}/missing/deeper")


def test_reading_a_directory_is_is_a_directory(box, space):
    with pytest.raises(IsADirectoryError):
        box.read_file(space)
    with pytest.raises(IsADirectoryError):
        box.read_file(".")


def test_a_file_where_a_directory_is_needed_is_not_a_directory(box, space):
    box.write_file(f"{space}/file", "x")
    with pytest.raises(NotADirectoryError):
        box.read_file(f"{space}/file/inner")
    with pytest.raises(NotADirectoryError):
        box.write_file(f"{space}/file/inner", "y")
    with pytest.raises(NotADirectoryError):
        box.write_file(f"{space}/file/deeper/inner", "y")
    assert box.read_file(f"{space}/file") == "x"


def test_writing_over_a_directory_is_is_a_directory_and_keeps_it(box, space):
    box.write_file(f"{space}/d/keep", "kept")
    with pytest.raises(IsADirectoryError):
        box.write_file(f"{space}/d", "x")
    with pytest.raises(IsADirectoryError):
        box.write_file(f"{space}/new/", "x")
    assert box.read_file(f"{space}/d/keep") == "kept"


@pytest.mark.parametrize("path", [".", "./", "sub/..", "WORKDIR", "/"])
def test_writing_over_the_workdir_or_the_root_is_is_a_directory_and_sends_nothing(box, path):
    steps = len(box.rollout.steps)
    with pytest.raises(IsADirectoryError):
        box.write_file(box.workdir if path == "WORKDIR" else path, "x")
    assert len(box.rollout.steps) == steps
    assert box.exec("true").ok


@pytest.mark.parametrize(
    ("path", "data", "error", "message"),
    [
        ("", "x", ValueError, "empty path"),
        ("a\0b", "x", ValueError, "NUL"),
        ("f", 42, TypeError, "expected str or bytes"),
        (None, "x", TypeError, "expected a str"),
    ],
)
def test_invalid_arguments_raise_before_anything_is_sent(box, path, data, error, message):
    steps = len(box.rollout.steps)
    with pytest.raises(error, match=message):
        box.write_file(path, data)
    if data == "x":  # the path is what is wrong
        with pytest.raises(error, match=message):
            box.read_file(path)
    assert len(box.rollout.steps) == steps


def test_file_steps_are_recorded_whether_they_succeed_or_fail(box, space):
    steps = len(box.rollout.steps)
    box.write_file(f"{space}/f", "x")
    box.read_file(f"{space}/f")
    with pytest.raises(FileNotFoundError):
        box.read_file(f"{space}/missing")
    assert [step.kind for step in box.rollout.steps[steps:]] == [
        "write_file",
        "read_file",
        "read_file",
    ]


@pytest.mark.parametrize("path", ["fifo", "/dev/zero", "/dev/null"])
def test_reading_anything_but_a_regular_file_is_one_error_that_never_blocks(box, space, path):
    """Finding 8: local exec hung on a FIFO, /dev/zero gave MemoryError, sessions were lost,
    docker said "Not a regular file" as a plain OSError."""
    assert box.exec(["mkfifo", f"{space}/fifo"]).ok
    target = f"{space}/{path}" if path == "fifo" else path
    with pytest.raises(NotRegularFileError) as raised:
        box.read_file(target)
    assert raised.value.errno == errno.EINVAL and raised.value.filename == box.path(target)
    assert box.exec("echo alive").stdout == "alive\n"


def test_kernel_files_are_read_as_the_kernel_gives_them(box):
    """Finding 8: docker exec could not read /proc/self/status (FileNotFoundError)."""
    assert box.read_file("/proc/self/status").startswith("Name:")
    assert box.read_file("/proc/version").startswith("Linux version")
