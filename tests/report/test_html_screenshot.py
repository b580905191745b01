"""The HTML report renders in headless Chromium."""

import shutil
import struct
import subprocess
import zlib

import pytest

from gpuplan.capacity import capacity
from gpuplan.report.html import render_html
from tests.report.helpers import SCENARIO, resolved

CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)), None)


def png_pixels(data: bytes) -> tuple[int, int, bytes]:
    """(width, height, raw scanlines incl. filter bytes) of a PNG, with the stdlib only."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height = struct.unpack(">II", body[:8])
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return width, height, zlib.decompress(idat)


@pytest.mark.slow
def test_screenshot(tmp_path):
    if CHROMIUM is None:  # the README's test command installs it
        pytest.fail("chromium is not installed: apt-get install chromium (see the README's test command)")
    html = tmp_path / "capacity.html"
    html.write_text(render_html(capacity(resolved(tmp_path, SCENARIO))), encoding="utf-8")
    png = tmp_path / "capacity.png"
    profile = tmp_path / "profile"
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={profile}", f"--screenshot={png}", "--window-size=1280,2000", html.as_uri()],
        capture_output=True, text=True, timeout=180)
    assert png.is_file(), proc.stderr[-2000:]
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000  # a blank page compresses to a few kB
    width, height, raw = png_pixels(data)
    assert (width, height) == (1280, 2000)
    # not one flat colour: many distinct byte values across the image
    assert len(set(raw[::7])) > 40
