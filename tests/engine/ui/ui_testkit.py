"""The UI tests' tooling: headless Chromium through selenium, a store with small analyzed tables,
and the screenshots (docs/ui/*.png are made by ``METASTORE_UI_SCREENSHOTS=docs/ui pytest tests/engine/ui``).
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from pathlib import Path

CHROMIUM = os.environ.get("METASTORE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("METASTORE_CHROMEDRIVER", "/usr/bin/chromedriver")
SCREENSHOTS_ENV = "METASTORE_UI_SCREENSHOTS"
WINDOW = (1400, 1000)

#: Chromium without anything that reaches out to the network (the machine has none, and a
#: test must not depend on it), a fresh profile each time.
CHROMIUM_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    f"--window-size={WINDOW[0]},{WINDOW[1]}",
)


def find_chromium() -> tuple[str, str]:
    chromium = CHROMIUM if os.path.exists(CHROMIUM) else shutil.which("chromium")
    driver = CHROMEDRIVER if os.path.exists(CHROMEDRIVER) else shutil.which("chromedriver")
    if not chromium or not driver:
        raise RuntimeError(
            "the UI tests need Debian's chromium and chromium-driver: run scripts/bootstrap.sh (apt-get install chromium chromium-driver)"
        )
    return chromium, driver


def start_browser(profile: str):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver = find_chromium()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    return webdriver.Chrome(service=Service(driver), options=options)


def screenshot(driver, name: str, full_page: bool = False) -> Path:
    """A PNG of the window (``full_page``: the page's whole height, up to 4,000 px) into
    $METASTORE_UI_SCREENSHOTS (docs/ui) or a temporary folder; its path."""
    folder = Path(os.environ.get(SCREENSHOTS_ENV) or tempfile.mkdtemp(prefix="metastore-ui-shots-"))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    if full_page:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support.ui import WebDriverWait

        def fit() -> None:  # the window's viewport as tall as the page (the window has a frame)
            page, frame = driver.execute_script("return [document.documentElement.scrollHeight, window.outerHeight - window.innerHeight]")
            driver.set_window_size(WINDOW[0], max(WINDOW[1], min(4000, int(page)) + int(frame)))

        fit()
        driver.execute_script("window.scrollTo(0, 0)")
        WebDriverWait(driver, 30).until(lambda d: not d.find_elements(By.CSS_SELECTOR, ".ms-lazy"))  # every card loaded
        fit()  # loaded cards are taller
    try:
        path.write_bytes(driver.get_screenshot_as_png())
    finally:
        if full_page:
            driver.set_window_size(*WINDOW)
    return path


def colour_stats(png: bytes) -> tuple[int, float]:
    """(distinct colours, share of the most common colour) of a PNG: a blank page has one colour."""
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    colours = img.getcolors(maxcolors=1 << 24) or []
    total = img.width * img.height
    return len(colours), max(c for c, _ in colours) / total
