"""The systemd unit, its examples and their agreement with the code.

With ``systemd-analyze`` (Debian's ``systemd`` package; on this kind of
machine it comes with the base image): ``verify`` must print nothing and
``security --offline=true`` must score 2.0 or lower. Without it those two
tests skip with the reason, and the unit is still parsed and checked here.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[1]
SYSTEMD = ROOT / "systemd"
UNIT = SYSTEMD / "ledger-indexer.service"
CONFIG_EXAMPLE = SYSTEMD / "config.example.toml"
ENV_EXAMPLE = SYSTEMD / "ledger-indexer.env.example"
MAX_EXPOSURE = 2.0


def parse_unit(path: Path) -> dict[str, list[tuple[str, str]]]:
    """Sections → (key, value) pairs in order; repeated keys kept (systemd semantics)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    pending = ""
    for raw in path.read_text().splitlines():
        line = pending + raw.strip() if pending else raw.strip()
        pending = ""
        if not line or line[0] in "#;":
            continue
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
            continue
        assert current is not None, f"{path}: assignment outside a section: {line!r}"
        key, sep, value = line.partition("=")
        assert sep, f"{path}: not an assignment: {line!r}"
        current.append((key.strip(), value.strip()))
    return sections


def values(unit: dict, section: str, key: str) -> list[str]:
    return [v for k, v in unit.get(section, []) if k == key]


def value(unit: dict, section: str, key: str) -> str:
    found = values(unit, section, key)
    assert found, f"[{section}] {key}= missing"
    return found[-1]


@pytest.fixture(scope="module")
def unit() -> dict:
    return parse_unit(UNIT)


def _systemd_analyze() -> tuple[str, int]:
    exe = shutil.which("systemd-analyze")
    if exe is None:
        pytest.skip("systemd-analyze not installed (Debian package: systemd)")
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"systemd-analyze does not run here: {exc}")
    m = re.match(r"systemd (\d+)", out.stdout)
    if out.returncode != 0 or not m:
        pytest.skip(f"systemd-analyze does not run here: {out.stderr.strip() or out.stdout.strip()}")
    return exe, int(m.group(1))


# --- the unit's contents --------------------------------------------------------


def test_service_type_notify_and_lifecycle(unit):
    assert value(unit, "Service", "Type") == "notify"
    assert value(unit, "Service", "NotifyAccess") == "main"
    assert int(value(unit, "Service", "WatchdogSec")) >= 30
    assert value(unit, "Service", "Restart") == "on-failure"
    assert values(unit, "Service", "RestartSec")
    assert value(unit, "Service", "KillSignal") == "SIGTERM"
    assert value(unit, "Service", "TimeoutStopSec") == "20"
    assert values(unit, "Service", "SuccessExitStatus")
    assert "2" in value(unit, "Service", "RestartPreventExitStatus").split()  # config errors
    assert value(unit, "Install", "WantedBy") == "multi-user.target"


def test_exec_start_runs_the_console_script_with_the_production_config(unit):
    exec_start = value(unit, "Service", "ExecStart").split()
    assert exec_start == [
        "/opt/ledger-indexer/.venv/bin/ledger-indexer", "--config", "/etc/ledger-indexer/config.toml", "run",
    ]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert PurePosixPath(exec_start[0]).name in scripts


def test_user_directories_and_environment(unit):
    assert value(unit, "Service", "User") == "ledger-indexer"
    assert value(unit, "Service", "Group") == "ledger-indexer"
    assert value(unit, "Service", "StateDirectory") == "ledger-indexer"
    assert value(unit, "Service", "ConfigurationDirectory") == "ledger-indexer"
    env = " ".join(values(unit, "Service", "Environment"))
    assert "HF_HUB_OFFLINE=1" in env and "PYTHONUNBUFFERED=1" in env
    assert value(unit, "Service", "EnvironmentFile") == "-/etc/ledger-indexer/ledger-indexer.env"
    assert value(unit, "Service", "MemoryMax")
    assert value(unit, "Service", "MemoryHigh")


def test_hardening_directives_present(unit):
    expected = {
        "ProtectSystem": "strict",
        "ProtectHome": "tmpfs",
        "PrivateTmp": "yes",
        "PrivateDevices": "yes",
        "DevicePolicy": "closed",
        "PrivateUsers": "yes",
        "NoNewPrivileges": "yes",
        "CapabilityBoundingSet": "",
        "RestrictAddressFamilies": "AF_UNIX AF_INET AF_INET6",
        "SystemCallArchitectures": "native",
        "IPAddressDeny": "any",
        "IPAddressAllow": "localhost",
        "ProtectKernelTunables": "yes",
        "ProtectKernelModules": "yes",
        "ProtectKernelLogs": "yes",
        "ProtectControlGroups": "yes",
        "ProtectClock": "yes",
        "ProtectHostname": "yes",
        "RestrictNamespaces": "yes",
        "LockPersonality": "yes",
        "RestrictRealtime": "yes",
        "RestrictSUIDSGID": "yes",
        "MemoryDenyWriteExecute": "yes",
        "UMask": "0077",
        "ProtectProc": "invisible",
    }
    for key, want in expected.items():
        assert value(unit, "Service", key) == want, key
    assert "@system-service" in values(unit, "Service", "SystemCallFilter")
    assert value(unit, "Service", "SystemCallErrorNumber") == "EPERM"


def _filter_groups(exe: str) -> dict[str, set[str]]:
    """Every syscall group systemd-analyze knows, with its members (nested groups as ``@name``)."""
    out = subprocess.run([exe, "syscall-filter"], capture_output=True, text=True, timeout=60)
    groups: dict[str, set[str]] = {}
    name = None
    for line in out.stdout.splitlines():
        if line.startswith("@"):
            name = line.strip()
            groups[name] = set()
        elif name and line.strip() and not line.strip().startswith("#"):
            groups[name].add(line.split()[0])
    return groups


def _expanded(groups: dict[str, set[str]], name: str) -> set[str]:
    members: set[str] = set()
    for m in groups.get(name, ()):
        members |= _expanded(groups, m) if m.startswith("@") else {m}
    return members


def test_the_unit_s_syscall_filter_lets_searches_read_through_io_uring(unit):
    """The searcher reads the index through io_uring where allowed (``index.local_reads = auto``):
    under this unit's filter the three io_uring calls must be allowed (systemd puts them in @aio,
    part of @system-service) — else the daemon would quietly read with lance's threads."""
    exe, _version = _systemd_analyze()
    groups = _filter_groups(exe)
    allowed = set().union(*(_expanded(groups, g) for g in values(unit, "Service", "SystemCallFilter")
                            if not g.startswith("~")))
    denied = set().union(*(_expanded(groups, g[1:]) for g in values(unit, "Service", "SystemCallFilter")
                           if g.startswith("~")), set())
    uring = {"io_uring_setup", "io_uring_enter", "io_uring_register"}
    assert uring <= allowed and not uring & denied


def test_ledger_is_read_only_and_memory_workspaces_are_bound(unit):
    config = tomllib.loads(CONFIG_EXAMPLE.read_text())
    ro = [p.lstrip("-") for v in values(unit, "Service", "ReadOnlyPaths") for p in v.split()]
    ledger = PurePosixPath(config["ledger"]["path"])
    assert any(ledger.is_relative_to(p) for p in ro), (ledger, ro)
    rw = values(unit, "Service", "ReadWritePaths")
    assert not any(ledger.is_relative_to(p.lstrip("-")) for v in rw for p in v.split())
    # Under ProtectHome=tmpfs every [memory] path in /home must be bound in.
    binds = [p.lstrip("-").split(":")[0] for v in values(unit, "Service", "BindReadOnlyPaths") for p in v.split()]
    for paths in config["memory"].values():
        for p in paths:
            if p.startswith("/home/"):
                assert any(PurePosixPath(p).is_relative_to(b) for b in binds), p


def test_config_example_matches_the_unit(unit):
    config = tomllib.loads(CONFIG_EXAMPLE.read_text())
    assert config["index"]["dir"] == "/var/lib/" + value(unit, "Service", "StateDirectory")
    assert config["api"]["host"] in ("127.0.0.1", "::1", "localhost")  # IPAddressAllow=localhost
    conf_dir = "/etc/" + value(unit, "Service", "ConfigurationDirectory")
    assert value(unit, "Service", "ExecStart").split()[2].startswith(conf_dir + "/")
    assert config["api"]["admin_token_file"].startswith(conf_dir + "/")


def test_config_example_loads_with_the_real_loader():
    from indexer.runtime.config import load_config

    config = load_config(CONFIG_EXAMPLE, env={})
    assert str(config.ledger.path) == "/var/lib/nexus/state/data/agents.db"
    assert str(config.index.dir) == "/var/lib/ledger-indexer"
    assert config.api.port == 8765


_SYSTEMD_ENV_PARSER = r"""
import ctypes, glob, sys
libs = sorted(glob.glob("/usr/lib/*/systemd/libsystemd-shared-*.so") + glob.glob("/usr/lib/systemd/libsystemd-shared-*.so"))
if not libs:
    sys.exit(3)
lib = ctypes.CDLL(libs[-1])
try:
    fn = lib.load_env_file
except AttributeError:
    sys.exit(3)
fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.POINTER(ctypes.c_char_p))]
out = ctypes.POINTER(ctypes.c_char_p)()
if fn(None, sys.argv[1].encode(), ctypes.byref(out)) < 0:
    sys.exit(4)
i = 0
while out[i]:
    print(out[i].decode()); i += 1
"""


def _parse_env_file(path: Path) -> tuple[dict[str, str], str]:
    """The env file as systemd reads it (its own parser when reachable), else a close emulation."""
    try:
        res = subprocess.run([sys.executable, "-c", _SYSTEMD_ENV_PARSER, str(path)],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        res = None
    if res is not None and res.returncode == 0:
        return dict(line.split("=", 1) for line in res.stdout.splitlines()), "systemd"
    env = {}
    for line in path.read_text().splitlines():
        if not line.strip() or line.lstrip().startswith(("#", ";")):
            continue
        key, _, raw = line.partition("=")
        raw = raw.strip()
        if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
            raw = raw[1:-1]
        env[key.strip()] = raw
    return env, "emulated"


def test_env_example_every_override_is_accepted(tmp_path):
    from indexer.runtime.config import load_config

    text = ENV_EXAMPLE.read_text()
    uncommented = re.sub(r"(?m)^#(LEDGER_INDEXER_)", r"\1", text)
    path = tmp_path / "ledger-indexer.env"
    path.write_text(uncommented)
    env, how = _parse_env_file(path)
    names = [k for k in env if k.startswith("LEDGER_INDEXER_")]
    assert len(names) >= 15, (how, env)
    config = load_config(CONFIG_EXAMPLE, env=env)
    assert config.ledger.personas == ("atlas", "nova"), how
    assert config.index.sinks == ("lancedb", "qmd")
    assert config.qmd.update_command == ("qmd", "update"), how
    assert [str(p) for p in config.memory["atlas"]] == [
        "/home/atlas/workspace/MEMORY.md", "/home/atlas/workspace/memory"]


# --- systemd-analyze ------------------------------------------------------------


def test_systemd_analyze_verify_is_clean(tmp_path):
    exe, _version = _systemd_analyze()
    # `verify` checks that ExecStart='s binary exists, and /opt/ledger-indexer is
    # not installed here: verify a copy whose ExecStart runs /bin/true with the
    # same arguments. Everything else is verified as written.
    text = UNIT.read_text()
    copy = re.sub(r"(?m)^ExecStart=/opt/ledger-indexer/\.venv/bin/ledger-indexer", "ExecStart=/bin/true", text)
    assert copy != text
    target = tmp_path / UNIT.name
    target.write_text(copy)
    res = subprocess.run([exe, "verify", str(target)], capture_output=True, text=True, timeout=120)
    output = (res.stdout + res.stderr).strip()
    # verify exits 0 even for unknown keys or bad values; any output is a finding.
    assert res.returncode == 0 and output == "", output


def test_systemd_analyze_security_score(tmp_path):
    exe, version = _systemd_analyze()
    if version < 250:
        pytest.skip(f"systemd {version}: `security --offline` needs systemd 250 or later")
    target = tmp_path / UNIT.name
    shutil.copy(UNIT, target)
    res = subprocess.run([exe, "security", "--offline=true", "--no-pager", str(target)],
                         capture_output=True, text=True, timeout=120)
    m = re.search(r"Overall exposure level for \S+: (\d+(?:\.\d+)?)", res.stdout)
    assert m, res.stdout + res.stderr
    score = float(m.group(1))
    failing = [line for line in res.stdout.splitlines() if line.startswith("✗")]
    assert score <= MAX_EXPOSURE, f"exposure {score} > {MAX_EXPOSURE}:\n" + "\n".join(failing)
