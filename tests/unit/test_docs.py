"""The documentation agrees with the code: generated tables and command reference are up to
date, every subcommand is documented, README's links lead to pages that exist."""

from __future__ import annotations

import re
import sys

from tests.support.paths import REPO

DOCS = REPO / "docs"


def _generator():
    """docs/generate.py as a module."""
    sys.path.insert(0, str(DOCS))
    try:
        import generate
    finally:
        sys.path.remove(str(DOCS))
    return generate


def test_generated_parts_of_the_docs_match_the_code(capsys):
    assert _generator().main(["--check"]) == 0, capsys.readouterr().err


def test_every_generated_part_has_a_page_and_every_page_part_a_generator():
    generate = _generator()
    names = {match.group("name") for page in generate.pages()
             for match in generate.BLOCK.finditer(page.read_text())}
    assert names == set(generate.GENERATORS)


def test_a_page_whose_table_lost_a_row_is_rendered_whole_again():
    """The check compares real tables: a page whose table lost a row differs."""
    page = (DOCS / "experiments.md").read_text()
    damaged = re.sub(r"\| `timeout` \|[^\n]*\n", "", page)
    assert damaged != page
    generate = _generator()
    assert generate.rendered(damaged) == page


def test_every_subcommand_is_in_the_command_reference():
    from scalebench.cli import COMMANDS

    reference = (DOCS / "cli.md").read_text()
    for name in COMMANDS:
        assert f"## `scalebench {name}`" in reference, name


def test_readme_links_lead_to_existing_pages():
    readme = (REPO / "README.md").read_text()
    links = re.findall(r"\]\((docs/[\w./-]+\.md)(?:#[\w-]+)?\)", readme)
    assert links, "README links no docs page"
    assert [link for link in links if not (REPO / link).is_file()] == []
    pages = {f"docs/{page.name}" for page in DOCS.glob("*.md")}
    assert pages <= set(links), f"pages README does not link: {sorted(pages - set(links))}"
