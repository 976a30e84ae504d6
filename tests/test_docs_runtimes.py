"""docs/runtimes.md prints the rule table of hetopt/runtimes.py, which the search and the exporters read."""

from pathlib import Path

from hetopt.runtimes import markdown

PAGE = Path(__file__).resolve().parents[1] / "docs" / "runtimes.md"


def test_the_page_holds_the_modules_table() -> None:
    text = PAGE.read_text(encoding="utf-8")
    table = text.split("<!-- rules: generated from hetopt.runtimes.markdown() -->\n", 1)[1].split("<!-- end of rules -->")[0]
    assert table == "\n".join(markdown()) + "\n"
