"""A report looked at as a person would: Debian's headless Chromium, driven by its chromedriver
through selenium, opens the file offline, and what it shows is read back (tests/report, and the
real-run test in tests/throughput).

There is no skipping: a machine without chromedriver fails the test with the way to install it
(`make browser`, which `make test` runs, installs Debian's chromium and chromium-driver)."""

from __future__ import annotations

import io
import json
import math
import re
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

CHROMEDRIVER = "/usr/bin/chromedriver"
WIDTH, HEIGHT = 1280, 1600


def chromedriver() -> str:
    found = shutil.which("chromedriver") or (CHROMEDRIVER if Path(CHROMEDRIVER).exists() else None)
    if found is None:
        pytest.fail(
            "no chromedriver here: the report's browser test needs Debian's chromium and "
            "chromium-driver: `make browser` (as root), or `apt-get install chromium chromium-driver`",
            pytrace=False,
        )
    return found


@contextmanager
def chromium():
    """A headless Chromium (selenium's webdriver), its browser console log kept; quit at the end."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.add_argument(f"--window-size={WIDTH},{HEIGHT}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(chromedriver()), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@dataclass
class Look:
    """What the browser showed: the screenshot's path and size, the console's errors, the figures
    drawn (figure id -> number of <path> elements in its <svg>), the figures printed
    (data-metric key -> text), the resources the page fetched, and the page's text."""

    screenshot: Path
    size: tuple[int, int]
    viewport: tuple[int, int]
    errors: list[dict]
    figures: dict[str, int]
    printed: dict[str, str]
    fetched: list[str]
    text: str


def look(driver, page: Path, screenshot: Path) -> Look:
    """Open `page` (file://), take a screenshot into `screenshot`, read the page back."""
    from selenium.webdriver.common.by import By

    driver.get(page.resolve().as_uri())
    driver.get_log("browser")  # nothing before this page
    driver.refresh()
    driver.save_screenshot(str(screenshot))
    from PIL import Image

    with Image.open(io.BytesIO(screenshot.read_bytes())) as image:
        size = image.size
    ratio = driver.execute_script("return window.devicePixelRatio")
    w, h = driver.execute_script("return [window.innerWidth, window.innerHeight]")
    figures = {
        f.get_attribute("id").removeprefix("fig-"): len(f.find_elements(By.CSS_SELECTOR, "svg path"))
        for f in driver.find_elements(By.CSS_SELECTOR, "figure")
    }
    printed = {
        e.get_attribute("data-metric"): e.text for e in driver.find_elements(By.CSS_SELECTOR, "[data-metric]")
    }
    fetched = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    errors = [entry for entry in driver.get_log("browser") if entry.get("level") == "SEVERE"]
    return Look(
        screenshot=screenshot,
        size=size,
        viewport=(round(w * ratio), round(h * ratio)),
        errors=errors,
        figures=figures,
        printed=printed,
        fetched=list(fetched),
        text=driver.find_element(By.TAG_NAME, "body").text,
    )


def assert_not_blank(path: Path) -> None:
    """A PNG with a picture in it: many colours, and no colour covering almost all of it."""
    from PIL import Image

    with Image.open(path) as image:
        assert image.format == "PNG"
        rgb = image.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20) or []
    pixels = rgb.size[0] * rgb.size[1]
    assert len(colours) > 50, f"{path}: {len(colours)} colours: blank"
    assert max(count for count, _ in colours) < 0.97 * pixels, f"{path}: one colour covers the image"


def assert_numbers_equal_metrics(printed: dict[str, str], metrics: dict) -> int:
    """Every figure the page printed with data-metric equals metrics.json's, to the digits shown;
    returns how many were compared."""
    compared = 0
    for key, text in printed.items():
        if key not in metrics:
            continue
        value = metrics[key]
        if isinstance(value, bool) or not isinstance(value, int | float):
            assert text == str(value), (key, text, value)
        else:
            shown = text.replace(",", "")
            decimals = len(shown.split(".")[1]) if "." in shown else 0
            assert re.fullmatch(r"-?\d+(\.\d+)?(e-?\d+)?", shown), (key, text)
            assert math.isclose(float(shown), value, abs_tol=0.5 * 10**-decimals + 1e-12), (key, text, value)
        compared += 1
    return compared


def metrics_of(run: Path) -> dict:
    return json.loads((run / "metrics.json").read_text())
