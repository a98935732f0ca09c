"""The package a user installs: a wheel and an sdist that install into a clean virtualenv and run.

The repository's own checkout hides packaging mistakes (a data file missing from
``package-data``, a module outside ``packages.find``, a dependency only the dev
extras bring): these tests build both distributions with ``python -m build``,
install each into a fresh virtualenv with nothing else in it, and run
``otel-ctx demo`` there, from a directory that is not the checkout.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from support import missing

from otel_ctx import __version__
from otel_ctx.demo import SUPPORT_DESK

ROOT = Path(__file__).resolve().parents[2]
#: The children must not see the checkout: a PYTHONPATH pointing at it makes pip take the
#: checkout's otel_ctx.egg-info for an installed otel-ctx and skip the distribution under test.
CLEAN_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    try:
        import build  # noqa: F401
    except ImportError:
        missing("the 'build' package (test extra) is not installed")
    out = tmp_path_factory.mktemp("dist")
    subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(out), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    wheels = list(out.glob("otel_ctx-*.whl"))
    sdists = list(out.glob("otel_ctx-*.tar.gz"))
    assert len(wheels) == 1 and len(sdists) == 1, sorted(p.name for p in out.iterdir())
    return {"wheel": wheels[0], "sdist": sdists[0]}


@pytest.mark.parametrize("kind", ["wheel", "sdist"])
def test_distribution_installs_into_a_clean_venv_and_runs_the_demo(
    kind: str, dists: dict[str, Path], tmp_path: Path
) -> None:
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(dists[kind])],
        check=True,
        capture_output=True,
        env=CLEAN_ENV,
        timeout=600,
    )
    proc = subprocess.run(
        [str(env_dir / "bin" / "otel-ctx"), "demo", "--tickets", "20", "--json"],
        capture_output=True,
        env=CLEAN_ENV,
        text=True,
        timeout=300,
        cwd=tmp_path,  # not the checkout: only the installed package can be imported
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["tickets"] == 20
    assert {t["task_type"] for t in report["task_types"]} <= set(SUPPORT_DESK)
    version = subprocess.run(
        [str(env_dir / "bin" / "otel-ctx"), "--version"],
        capture_output=True,
        text=True,
        check=True,
        env=CLEAN_ENV,
    ).stdout
    assert __version__ in version
    # Without the dashboards extra: the shipped files export, and equal the repository's.
    exported = tmp_path / "exported"
    proc = subprocess.run(
        [str(env_dir / "bin" / "otel-ctx"), "dashboards", "export", str(exported)],
        capture_output=True,
        env=CLEAN_ENV,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    expected = {f"dashboards/{p.name}": p for p in (ROOT / "dashboards").iterdir() if p.is_file()}
    expected["otelcol.yaml"] = ROOT / "stack" / "otelcol.yaml"
    got = {str(p.relative_to(exported)): p for p in exported.rglob("*") if p.is_file()}
    assert set(got) == set(expected)
    for name, path in expected.items():
        assert got[name].read_bytes() == path.read_bytes(), name
    # build needs the extra: a one-line hint, as push gives, not a traceback.
    for command in ("build", "push"):
        proc = subprocess.run(
            [
                str(env_dir / "bin" / "otel-ctx"),
                "dashboards",
                command,
                "--out" if command == "build" else "--url",
                str(tmp_path / "built") if command == "build" else "http://127.0.0.1:9",
                *(("--token", "t") if command == "push" else ()),
            ],
            capture_output=True,
            env=CLEAN_ENV,
            text=True,
            timeout=120,
            cwd=tmp_path,
        )
        assert proc.returncode == 2, (command, proc.stderr)
        assert "pip install 'otel-ctx[dashboards]'" in proc.stderr, (command, proc.stderr)
        assert "Traceback" not in proc.stderr, (command, proc.stderr)
