"""The browser tests' own setup: a missing Chromium skips them with the reason, or fails them when required.

These tests start no browser: they point the fixture's paths away from the real binaries.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.report import conftest as browser_setup


@pytest.fixture
def no_chromedriver(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> str:
    missing = str(tmp_path / "chromedriver")
    monkeypatch.setattr(browser_setup, "CHROMEDRIVER", missing)
    return missing


def test_a_missing_driver_skips_with_the_install_command(
    no_chromedriver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(browser_setup.REQUIRE_BROWSER_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception) as skipped:
        browser_setup.start_chromium()
    reason = str(skipped.value)
    assert "chromium-driver not installed" in reason
    assert no_chromedriver in reason
    assert "apt-get install chromium chromium-driver" in reason


def test_a_missing_driver_fails_when_the_browser_is_required(
    no_chromedriver: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(browser_setup.REQUIRE_BROWSER_ENV, "1")
    with pytest.raises(pytest.fail.Exception) as failed:
        browser_setup.start_chromium()
    assert "LLM_CONNECT_REQUIRE_BROWSER=1 but chromium-driver not installed" in str(failed.value)


def test_both_missing_are_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(browser_setup, "CHROMIUM", str(tmp_path / "chromium"))
    monkeypatch.setattr(browser_setup, "CHROMEDRIVER", str(tmp_path / "chromedriver"))
    reason = browser_setup.browser_missing()
    assert reason is not None and reason.startswith("chromium and chromium-driver not installed")


def test_a_file_that_is_not_executable_counts_as_missing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    driver = tmp_path / "chromedriver"
    driver.write_text("#!/bin/sh\n")
    driver.chmod(0o644)
    monkeypatch.setattr(browser_setup, "CHROMEDRIVER", str(driver))
    assert "chromium-driver not installed" in (browser_setup.browser_missing() or "")
