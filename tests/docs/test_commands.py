"""Every command shown in the documentation runs, against the demo fleet, and exits as the page
says (tests/docs/harness.py explains the rules and the markers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.harness import COMMAND_TIMEOUT, DOC_PAGES, missing_programs, run_page

#: A page runs several commands, each allowed COMMAND_TIMEOUT: pytest's default per-test limit
#: (300 s) stopped docs/simulate.md, whose five simulations take over 300 s on a loaded 2-core
#: machine although none comes near its own limit.
PAGE_TIMEOUT = 3 * COMMAND_TIMEOUT


@pytest.mark.slow
@pytest.mark.timeout(PAGE_TIMEOUT)
@pytest.mark.parametrize("page", DOC_PAGES)
def test_every_command_of_the_page_runs(page: str, tmp_path: Path) -> None:
    missing = missing_programs(page)
    if missing:
        pytest.skip(f"{page} runs {', '.join(missing)}, which is not installed")
    run_page(page, tmp_path)
