"""The README a newcomer reads in one minute, and the pages it leads to: what the app shows with a
screenshot, the lesson, the two set-up commands (the test command is what CI runs), and links
that stay true."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
#: [text](target) and ![alt](target); the target up to a space or the closing parenthesis.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # code blocks hold no links
    return LINK.findall(text)


def _local(target: str) -> bool:
    return not re.match(r"^[a-z][a-z0-9+.-]*:", target) and not target.startswith("#")


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def test_every_relative_link_and_image_in_the_readme_and_docs_points_at_a_file():
    broken = []
    for page in _pages():
        for target in _links(page):
            if _local(target):
                path = (page.parent / target.split("#", 1)[0]).resolve()
                if not path.exists():
                    broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == [], "\n".join(broken)


def test_every_docs_page_is_linked_from_the_readme():
    linked = {(ROOT / t.split("#", 1)[0]).resolve() for t in _links(README) if _local(t)}
    orphans = [p.name for p in sorted(DOCS.glob("*.md")) if p.resolve() not in linked]
    assert orphans == []


def test_the_readme_opens_with_a_screenshot_the_lesson_and_the_two_commands():
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= 80, "a newcomer reads it in a minute"
    setup = text.index("## Set up")
    first_image = text.index("![")
    assert first_image < text.index("## The lesson in five lines") < setup
    lesson = text[text.index("## The lesson in five lines") : setup]
    assert len(re.findall(r"^\d\. ", lesson, flags=re.M)) == 5
    image = next(t for t in _links(README) if t.endswith(".png"))
    assert (ROOT / image).is_file()


def _command(marker: str) -> str:
    """The ```sh block after `marker`, as .ci/run extracts the test command."""
    text = README.read_text()
    assert text.count(marker) == 1, marker
    block = text.split(marker, 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return block.strip()


def test_the_app_and_test_commands_are_one_line_each_and_say_what_they_do():
    app = _command("<!-- app-command -->")
    test = _command("<!-- test-command -->")
    assert "\n" not in app and "\n" not in test
    assert "pip install -e ." in app and app.endswith("main.py")
    assert 'pip install -e ".[test]"' in test and "pytest" in test
    # what the real-display tests need, so CI runs them instead of skipping
    for package in ("xvfb", "openbox", "xdotool"):
        assert f" {package} " in test
