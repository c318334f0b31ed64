"""Published values in Markdown metadata are shown as text, never rendered (issue 14, "Medium"): the UI renders
``MetadataValue.md``, so an unescaped value ``![x](http://…)`` made the steward's browser fetch a remote URL and
``<img src=x>`` showed as a blank.

The Markdown is rendered here with markdown-it-py (CommonMark with raw HTML on, plus GFM tables, as the UI's renderer
does) and every cell of the rendered table must hold exactly the value, as text."""

from __future__ import annotations

import html
import re

import pandas as pd
import pytest
from markdown_it import MarkdownIt

from pipeline.asset_keys import escape_markdown, markdown_preview

HOSTILE_VALUES = [
    "![x](http://example.invalid/a.png)",
    "<img src=x>",
    "left|right",
    "`code` and ``more``",
    "*em* _u_ **b** ~~s~~",
    "[link](http://example.invalid/) <http://example.invalid/>",
    "&amp; &lt;b&gt; <b>bold</b> <!-- comment -->",
    "# heading \\ backslash",
    "1. list",
    "plain",
]


def _render(markdown: str) -> str:
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


def _cells(rendered: str) -> list[str]:
    return [html.unescape(cell) for cell in re.findall(r"<t[dh]>(.*?)</t[dh]>", rendered, flags=re.S)]


def test_a_preview_shows_every_hostile_value_as_text():
    frame = pd.DataFrame({"a|b": HOSTILE_VALUES, "`c`": ["<i>x</i>"] * len(HOSTILE_VALUES)})
    rendered = _render(markdown_preview(frame, rows=len(HOSTILE_VALUES)).value)
    for markup in ("<img", "<a ", "<code", "<em", "<strong", "<b>", "<i>", "<s>", "<del", "<h1", "<ol", "<!--"):
        assert markup not in rendered, markup
    cells = _cells(rendered)
    assert cells[:2] == ["a|b", "`c`"]  # the header: one cell per column, names as text
    assert cells[2:] == [text for value in HOSTILE_VALUES for text in (value, "<i>x</i>")]


def test_the_check_can_fail_an_unescaped_value_renders_as_an_image():
    assert "<img" in _render("| a |\n|---|\n| ![x](http://example.invalid/a.png) |")


@pytest.mark.parametrize("value", ["line\nbreak", "carriage\rreturn", "tab\there"])
def test_a_line_break_stays_on_its_row_as_a_space(value):
    rendered = _render(markdown_preview(pd.DataFrame({"a": [value, "next"]})).value)
    assert _cells(rendered) == ["a", re.sub(r"[\n\r\t]", " ", value), "next"]


def test_escaped_text_is_rendered_as_exactly_the_text_in_a_paragraph():
    for value in HOSTILE_VALUES:
        rendered = _render(escape_markdown(value)).strip()
        assert rendered.startswith("<p>") and rendered.endswith("</p>"), rendered
        assert html.unescape(rendered[3:-4]) == value
