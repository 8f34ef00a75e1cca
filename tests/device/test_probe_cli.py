"""`edgepilot probe` and `edgepilot snapshot save` through the click app."""

from __future__ import annotations

import json

from click.testing import CliRunner

from edgepilot.device.snapshot import OUT_FIX as FIX

runner = CliRunner()


def test_probe_json_on_this_machine(cli_app):
    res = runner.invoke(cli_app, ["probe", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert {"cpu", "memory", "android", "gpus", "thermal", "battery", "storage"} <= set(data)


def test_probe_table_on_a_tree(cli_app, devices):
    res = runner.invoke(cli_app, ["probe", "--root", str(devices / "sd8gen2-xiaomi13pro")])
    assert res.exit_code == 0, res.output
    assert "Cortex-X3" in res.stdout and "prime" in res.stdout and "3187" in res.stdout
    assert "SLOW" in res.stdout  # /sdcard on FUSE


def test_probe_json_on_a_tree(cli_app, devices):
    res = runner.invoke(cli_app, ["probe", "--root", str(devices / "exynos990-galaxy-s20"), "--json"])
    assert res.exit_code == 0
    data = json.loads(res.stdout)
    assert data["gpus"][0]["vulkan_usable"] is False
    assert data["cpu"]["clusters"][0]["core"] == "Exynos M5"


def test_bad_root_is_one_line_and_exit_2(cli_app, tmp_path):
    res = runner.invoke(cli_app, ["probe", "--root", str(tmp_path / "missing"), "--json"])
    assert res.exit_code == 2
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("edgepilot: error: --root")
    assert "Traceback" not in res.output and res.stdout == ""


def test_snapshot_save_then_replay(cli_app, tmp_path):
    out = tmp_path / "me.tar.gz"
    res = runner.invoke(cli_app, ["snapshot", "save", str(out), "--json"])
    assert res.exit_code == 0, res.output
    saved = json.loads(res.stdout)
    assert saved["archive"] is True and saved["path"] == str(out)
    res = runner.invoke(cli_app, ["probe", "--root", str(out), "--json"])
    assert res.exit_code == 0
    assert json.loads(res.stdout) == saved["probe"]
    res = runner.invoke(cli_app, ["snapshot", "save", str(out)])
    assert res.exit_code == 2 and "already exists" in res.stderr


def test_snapshot_save_under_a_regular_file_is_one_line(cli_app, tmp_path):
    # Before: NotADirectoryError traceback (partial.unlink in the handler raised again).
    (tmp_path / "file").write_text("x")
    for out in ("file/snap.tar.gz", "file/snap", "file/deeper/snap.tar.gz"):
        res = runner.invoke(cli_app, ["snapshot", "save", str(tmp_path / out)])
        assert res.exit_code == 2, res.output
        err = res.stderr.strip().splitlines()
        assert len(err) == 1, err
        assert (
            err[0]
            == f"edgepilot: error: cannot write the snapshot in {tmp_path / 'file'}: not a directory; {FIX}"
        )
    assert (tmp_path / "file").read_text() == "x"
    res = runner.invoke(cli_app, ["snapshot", "save", str(tmp_path / "missing/snap.tar.gz")])
    assert res.exit_code == 2
    assert f"cannot write the snapshot in {tmp_path / 'missing'}: no such folder; {FIX}" in res.stderr


def test_snapshot_archive_never_follows_a_stale_partial_link(cli_app, devices, tmp_path):
    """OUT.partial was the archive's fixed temporary name: a link there to a file elsewhere had that file
    truncated and written. Now the archive goes through a fresh temporary file; nothing else is touched."""
    import tarfile

    victim = tmp_path / "elsewhere.bin"
    victim.write_bytes(b"precious bytes")
    out = tmp_path / "snaps" / "phone.tar.gz"
    out.parent.mkdir()
    (out.parent / "phone.tar.gz.partial").symlink_to(victim)
    root = str(devices / "sd8gen2-xiaomi13pro")
    res = runner.invoke(cli_app, ["snapshot", "save", str(out), "--root", root, "--json"])
    assert res.exit_code == 0, res.output
    assert victim.read_bytes() == b"precious bytes"
    with tarfile.open(out) as tar:
        assert "snapshot.json" in tar.getnames()
    assert sorted(p.name for p in out.parent.iterdir()) == ["phone.tar.gz", "phone.tar.gz.partial"]
    # a dangling link at OUT itself: the link is replaced, the file it names is not created
    dangling = tmp_path / "snaps" / "other.tar"
    dangling.symlink_to(tmp_path / "never-made")
    res = runner.invoke(cli_app, ["snapshot", "save", str(dangling), "--root", root])
    assert res.exit_code == 0, res.output
    assert not (tmp_path / "never-made").exists() and not dangling.is_symlink()
    assert tarfile.is_tarfile(dangling)


def test_snapshot_over_a_device_node_is_one_line(cli_app, devices, tmp_path):
    import os
    import stat

    node = tmp_path / "null.tar.gz"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except OSError:
        node = tmp_path / "pipe.tar.gz"
        os.mkfifo(node)
    root = str(devices / "pixel6a-tensor-g1")
    res = runner.invoke(cli_app, ["snapshot", "save", str(node), "--root", root])
    assert res.exit_code == 2 and len(res.stderr.strip().splitlines()) == 1, res.output
    assert not stat.S_ISREG(os.stat(node).st_mode)
