"""The live page (GET /ui): the fabric's links, trees, plans, rounds and jobs drawn by plain
JavaScript and SVG from the REST API, with no build step and nothing fetched from the
internet. Its files lie in ui/ beside this module."""

from pathlib import Path

UI_DIR = Path(__file__).resolve().parent / "ui"
PAGE = ("index.html", "text/html")
UI_ASSETS = {"fabric.js": "text/javascript", "fabric.css": "text/css"}   # the page's files


def page_file(name):
    """The bytes of one of the page's files."""
    return (UI_DIR / name).read_bytes()
