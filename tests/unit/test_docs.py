"""The README is a front page that fits on a few screens, and every file the README and
docs/ name in backticks is there, so the docs move with the code."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
NAMED_PATH = re.compile(r"`((?:apps|syncfabric|experiments|mininet_topos|tests|docs)/[\w./-]*)`")


def test_the_readme_is_a_front_page():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_named_file_exists(page):
    missing = [path for path in NAMED_PATH.findall(page.read_text())
               if not (ROOT / path.rstrip("/")).exists()]
    assert not missing


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_linked_page_exists(page):
    links = re.findall(r"\]\(([\w./-]+\.(?:md|png))\)", page.read_text())
    assert all((page.parent / link).exists() for link in links), links
