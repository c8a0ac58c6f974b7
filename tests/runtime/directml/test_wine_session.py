"""Wine's session is kept between commands: the prefix's wineserver (and the Windows services it
runs) is started persistent (wine.keep_session), so a host started after the previous one closed
finds it up instead of booting Wine again; it exits by itself once idle."""
from __future__ import annotations

import os
import sys
import time

import pytest

from onnx_dml_lowering.runtime.directml import wine
from onnx_dml_lowering.runtime.directml.home import DirectMLUnavailable


def wineservers(prefix: str) -> "set[int]":
    """The pids of the wineservers serving `prefix`."""
    found = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as cmd, open(f"/proc/{pid}/environ", "rb") as env:
                if b"wineserver" in cmd.read() and f"WINEPREFIX={prefix}".encode() in env.read().split(b"\0"):
                    found.add(int(pid))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("text, seconds", [("", wine.DEFAULT_PERSIST), ("0", 0), (" 45 ", 45)])
def test_persist_seconds_reads_the_environment(monkeypatch, text, seconds):
    monkeypatch.setenv(wine.PERSIST_ENV, text)
    assert wine.persist_seconds() == seconds


def test_a_persist_time_that_is_not_seconds_is_one_line(monkeypatch):
    monkeypatch.setenv(wine.PERSIST_ENV, "soon")
    with pytest.raises(DirectMLUnavailable, match=f"{wine.PERSIST_ENV}='soon' is not a whole number of seconds"):
        wine.persist_seconds()


@pytest.mark.directml
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Wine and /proc: Linux only")
def test_the_next_host_finds_the_session_its_predecessor_left(monkeypatch):
    from onnx_dml_lowering.runtime.directml.dml_host import DmlHost
    monkeypatch.setenv(wine.PERSIST_ENV, "20")
    with DmlHost() as first:
        assert first.hello.startswith("ok")
        prefix = str(first.process.home.prefix)
        servers = wineservers(prefix)
    assert servers, "no wineserver serves the prefix while a host runs"
    time.sleep(4)                      # past Wine's own 3 s: only a kept session is still up
    assert wineservers(prefix) == servers
    with DmlHost() as second:
        assert second.hello.startswith("ok")
        assert wineservers(prefix) == servers      # the same server, not a new one


@pytest.mark.directml
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Wine and /proc: Linux only")
@pytest.mark.parametrize("wait", [True, False], ids=["close", "close-at-exit"])
def test_closing_a_host_ends_its_stderr_reader(monkeypatch, wait):
    """The services of the host's Wine session hold its stderr pipe open; the reader must end all
    the same, or the command's fast exit (cli.program.entry) is lost to a live thread."""
    from onnx_dml_lowering.runtime.directml.dml_host import DmlHost
    monkeypatch.setenv("DML_LOWER_HOST_TIMING", "1")
    host = DmlHost()
    assert host.hello.startswith("ok")
    reader = host.process._stderr_thread
    assert reader is not None and reader.is_alive()
    host.close(wait=wait)
    reader.join(1)
    assert not reader.is_alive()
    if wait:                           # what the host wrote before it exited was read
        assert host.process.stderr_line().startswith("dml_host start-up: device")


@pytest.mark.parametrize("given, expected", [
    ("", "mutable_single_set"),
    ("vk_debug", "vk_debug,mutable_single_set"),
    ("single_queue;mutable_single_set", "single_queue,mutable_single_set"),
    ("mutable_single_set,,force_static_cbv", "mutable_single_set,force_static_cbv"),
])
def test_vkd3d_config_keeps_the_users_flags_and_adds_ours_once(given, expected):
    assert wine.vkd3d_config(given) == expected


def test_the_hosts_environment_carries_vkd3d_config(monkeypatch, tmp_path):
    from onnx_dml_lowering.runtime.directml.home import DirectMLHome
    monkeypatch.setenv(wine.VKD3D_ENV, "vk_debug")
    env = wine.wine_environment(DirectMLHome(tmp_path, {}), ":9", "run")
    assert env[wine.VKD3D_ENV].split(",") == ["vk_debug", *wine.VKD3D_FLAGS]


@pytest.mark.directml
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Wine and /proc: Linux only")
def test_the_running_host_has_our_vkd3d_flags(dml_host):
    """Every directml test (DirectML's answers against the emulator's, bit for bit) runs on a host
    that vkd3d-proton sees with VKD3D_FLAGS: the process itself, not only the dict we built."""
    dml_host.start()
    with open(f"/proc/{dml_host.process.pid}/environ", "rb") as env:
        entries = dict(e.split(b"=", 1) for e in env.read().split(b"\0") if b"=" in e)
    flags = entries[wine.VKD3D_ENV.encode()].decode().split(",")
    assert set(wine.VKD3D_FLAGS) <= set(flags)
