"""A non-editable install (a built wheel, not the source tree) migrates a fresh ledger."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, llm_connect
from llm_connect.ledger import QualityLedger, head_revision
from llm_connect.ledger._migrate import migrations_dir
with QualityLedger("sqlite:///fresh.db") as ledger:
    revision = ledger.revision
with QualityLedger("sqlite:///fresh.db") as ledger:  # at head: known from the packaged scripts' text
    reopened = ledger.revision
print(json.dumps({"package": llm_connect.__file__, "migrations": str(migrations_dir()),
                  "revision": revision, "reopened": reopened, "head": head_revision()}))
"""


@pytest.mark.slow
def test_installed_wheel_migrates_a_fresh_sqlite_ledger(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # Dependencies come from the dev environment's site-packages (a plain path entry:
    # its .pth files, including the editable install of this checkout, are not processed).
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    build = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build-isolation",
            "--target",
            str(site),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr
    work = tmp_path / "work"
    work.mkdir()
    run = subprocess.run(
        [str(venv / "bin" / "python"), "-c", SCRIPT],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    import json

    info = json.loads(run.stdout.strip().splitlines()[-1])
    assert Path(info["package"]).is_relative_to(site), info
    assert Path(info["migrations"]) == site / "llm_connect" / "_migrations"
    from llm_connect.ledger import head_revision

    assert info["revision"] == info["head"] == head_revision()  # every migration script was packaged
    assert info["reopened"] == info["head"]
    assert (work / "fresh.db").exists()
