"""Every command shown in the documentation runs, against the demo fleet, and exits as the page
says (tests/docs/harness.py explains the rules and the markers)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.docs.harness import DOC_PAGES, missing_programs, run_page


@pytest.mark.slow
@pytest.mark.parametrize("page", DOC_PAGES)
def test_every_command_of_the_page_runs(page: str, tmp_path: Path) -> None:
    missing = missing_programs(page)
    if missing:
        pytest.skip(f"{page} runs {', '.join(missing)}, which is not installed")
    run_page(page, tmp_path)
