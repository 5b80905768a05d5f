"""A package whose __init__ is deferred: submodules import, __init__ runs once on the first
read of a name it defines; and lancedb's REST client's API classes stay unloaded."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from indexer.runtime.deferred_import import defer_package_init


@pytest.fixture
def package(tmp_path: Path, monkeypatch):
    """``deferpkg``: its __init__ defines ``VALUE`` and logs each completed run (start, end) in ``runs.txt``."""
    root = tmp_path / "deferpkg"
    root.mkdir()
    (root / "__init__.py").write_text(textwrap.dedent(f"""
        import time
        started = time.monotonic()
        time.sleep(0.2)  # a window for other threads to arrive while this runs
        from deferpkg.models import Model
        VALUE = 42
        with open({str(tmp_path / "runs.txt")!r}, "a") as f:
            f.write(f"run {{started}} {{time.monotonic()}}\\n")
    """))
    (root / "models.py").write_text("class Model:\n    pass\n")
    (tmp_path / "plainmod.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [m for m in sys.modules if m == "deferpkg" or m.startswith("deferpkg.") or m == "plainmod"]:
        del sys.modules[name]


def _runs(tmp_path: Path) -> int:
    f = tmp_path / "runs.txt"
    return len(f.read_text().splitlines()) if f.exists() else 0


def test_submodules_import_without_running_init(package: Path) -> None:
    assert defer_package_init("deferpkg") is True
    from deferpkg.models import Model

    assert Model.__name__ == "Model"
    assert _runs(package) == 0
    import deferpkg

    assert deferpkg.__spec__.name == "deferpkg" and _runs(package) == 0  # dunders never run it
    assert deferpkg.VALUE == 42
    assert _runs(package) == 1
    assert deferpkg.Model is Model and _runs(package) == 1
    with pytest.raises(AttributeError, match="has no attribute 'missing'"):
        deferpkg.missing  # noqa: B018
    assert _runs(package) == 1


def test_init_runs_once_for_concurrent_readers(package: Path) -> None:
    defer_package_init("deferpkg")
    import deferpkg

    got: list[tuple[float, int]] = []

    def read() -> None:
        asked = time.monotonic()
        got.append((asked, deferpkg.VALUE))

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
        time.sleep(0.03)
    for t in threads:
        t.join()
    assert [value for _, value in got] == [42, 42, 42, 42]
    assert _runs(package) == 1
    _, started, ended = (package / "runs.txt").read_text().split()
    # The race happened: readers asked while __init__ was running in another thread.
    assert sum(float(started) < asked < float(ended) for asked, _ in got) >= 2


def test_a_failing_init_raises_and_runs_again_on_the_next_read(package: Path) -> None:
    init = package / "deferpkg" / "__init__.py"
    good = init.read_text()
    init.write_text(good.replace("VALUE = 42", "raise RuntimeError('broken on purpose')"))
    defer_package_init("deferpkg")
    import deferpkg

    with pytest.raises(RuntimeError, match="broken on purpose"):
        deferpkg.VALUE  # noqa: B018
    init.write_text(good)
    # Python caches bytecode by mtime and source size; the size differs, so the fixed file is read.
    assert deferpkg.VALUE == 42
    assert _runs(package) == 1  # written when __init__ completes: the second run did


def test_nothing_is_deferred_when_imported_missing_or_a_plain_module(package: Path) -> None:
    import deferpkg  # noqa: F401  (a normal import: __init__ runs; that is what is counted)

    assert _runs(package) == 1
    assert defer_package_init("deferpkg") is False
    assert defer_package_init("no_such_package_here") is False
    assert defer_package_init("plainmod") is False
    assert "plainmod" not in sys.modules


def test_lancedb_loads_without_its_rest_client_api_which_still_works_when_read() -> None:
    code = textwrap.dedent("""
        import sys, tempfile
        import exporters.lancedb
        import lancedb, pyarrow as pa
        db = lancedb.connect(tempfile.mkdtemp())
        t = db.create_table("t", pa.table({"x": [1, 2, 3]}))
        assert t.count_rows() == 3
        api = sorted(m for m in sys.modules if m.startswith("lance_namespace_urllib3_client.api"))
        print("before", len(api))
        from lance_namespace_urllib3_client import ApiClient, Configuration, TableApi
        api = sorted(m for m in sys.modules if m.startswith("lance_namespace_urllib3_client.api"))
        print("after", len(api) > 5, ApiClient.__name__, TableApi.__name__, Configuration.__name__)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["before 0", "after True ApiClient TableApi Configuration"]
