"""The harness that runs the docs' commands: it reads blocks as the pages mean them, and a
command that breaks fails the test (tests/docs/harness.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.docs.harness import (
    DOC_PAGES,
    ROOT,
    DocCommandError,
    PageRun,
    parse_page,
    run_page,
)

PAGE = """\
# A page

```sh
placer definitions                      # the catalog
placer describe -f examples/jobset-demo.yaml \\
    -o json
for name in a b; do
  echo "$name"
done
placer describe jobset/demo --kubeconfig /tmp/none   # exit 1: no such kubeconfig
```

```yaml
not: [a command
```

<!-- illustrative: needs real clusters -->
```sh
kubectl --context hub apply -k deploy/
```
"""


def test_blocks_and_commands_are_read_as_the_page_means_them() -> None:
    first, second = parse_page(PAGE, "page.md")
    assert first.illustrative is None and first.line == 3
    assert [c.line for c in first.commands] == [4, 5, 7, 10]
    assert first.commands[1].text.endswith("    -o json")
    assert first.commands[2].text.startswith("for name") and first.commands[2].text.endswith("done")
    assert [c.expected_exit for c in first.commands] == [0, 0, 0, 1]
    assert second.illustrative == "needs real clusters"


def test_background_commands_are_recognised() -> None:
    (block,) = parse_page(
        "```sh\nplacer fleet up clusters/demo.yaml --kubeconfig-out /tmp/k &   # serve\n"
        "placer get -A && echo done\n```\n",
        "page.md",
    )
    assert [c.background for c in block.commands] == [True, False]


def test_an_unclosed_block_or_command_is_an_error() -> None:
    with pytest.raises(DocCommandError, match=r"page.md:1: a code block is never closed"):
        parse_page("```sh\nplacer definitions\n", "page.md")
    with pytest.raises(DocCommandError, match=r"page.md:2: an incomplete shell command"):
        parse_page("```sh\nfor x in a; do\n```\n", "page.md")


def test_a_command_that_breaks_fails_naming_page_line_and_output(tmp_path: Path) -> None:
    page = "```sh\nplacer definitions\nplacer describe -f examples/no-such-file.yaml\n```\n"
    with pytest.raises(DocCommandError) as failure:
        run_page("page.md", tmp_path, page)
    message = str(failure.value)
    assert message.startswith("page.md:3: exited 1, the page says 0")
    assert "no-such-file.yaml" in message


def test_the_documented_exit_code_is_checked_both_ways(tmp_path: Path) -> None:
    missing = "placer definitions no-such-definition"
    run_page("page.md", tmp_path / "a", f"```sh\n{missing}   # exit 4: unknown name\n```\n")
    with pytest.raises(DocCommandError, match="exited 4, the page says 3"):
        run_page("page.md", tmp_path / "b", f"```sh\n{missing}   # exit 3\n```\n")
    with pytest.raises(DocCommandError, match="exited 0, the page says 1"):
        run_page("page.md", tmp_path / "c", "```sh\nplacer definitions   # exit 1\n```\n")


def test_a_failure_inside_a_pipeline_or_loop_counts(tmp_path: Path) -> None:
    with pytest.raises(DocCommandError, match="exited 1"):
        run_page("page.md", tmp_path / "a", "```sh\nfalse | cat\n```\n")
    with pytest.raises(DocCommandError, match="exited 1"):
        run_page("page.md", tmp_path / "b", "```sh\nfor x in a; do false; echo $x; done\n```\n")


def test_exports_carry_over_and_tmp_is_private(tmp_path: Path) -> None:
    page = (
        "```sh\n"
        "export GREETING=hello-$USER\n"
        "echo $GREETING > /tmp/greeting\n"
        'test "$(cat /tmp/greeting)" = "hello-$USER"\n'
        "```\n"
    )
    run = run_page("page.md", tmp_path, page)
    assert (run.tmp / "greeting").read_text().startswith("hello-")
    assert run.env["GREETING"].startswith("hello-")


def test_a_fleet_served_in_the_background_is_used_and_stopped(tmp_path: Path) -> None:
    page = (
        "```sh\n"
        "placer fleet up clusters/demo.yaml --kubeconfig-out /tmp/demo.kubeconfig &\n"
        "placer fleet show --kubeconfig /tmp/demo.kubeconfig\n"
        "```\n"
    )
    run = run_page("page.md", tmp_path, page)
    assert run.ran[0].background and not run.background
    log = (tmp_path / "background-0.log").read_text()
    assert "serving" in log and "stopping" in log  # Ctrl-C reached it: it stopped cleanly


def test_each_documented_port_is_a_free_port_of_its_own(tmp_path: Path) -> None:
    """Two controllers on one page (8080 and 8081, as docs/reservations.md runs them) each get a
    private port, the same one wherever the page writes it; a controller is waited for on its
    own --metrics-port (it was the page's 8080, which the first controller already answered)."""
    run = PageRun("page.md", tmp_path)
    assert run.rewrite("--metrics-port 8081 && curl localhost:8081/metrics") == (
        f"--metrics-port {run.port_for('8081')} && curl localhost:{run.port_for('8081')}/metrics"
    )
    assert run.port_for("8081") not in (8081, run.port) and run.port_for("8080") == run.port
    assert run.rewrite("curl localhost:8080/v1/fleet") == f"curl localhost:{run.port}/v1/fleet"
    assert run.controller_port("placer controller --metrics-port 8081 &") == run.port_for("8081")
    assert run.controller_port("placer controller --hub-context hub &") == run.port
    assert run.controller_port("placer controller --metrics-port 9100 &") == 9100


def test_a_serving_command_in_the_foreground_is_stopped_with_ctrl_c(tmp_path: Path) -> None:
    page = "```sh\nplacer fleet up clusters/demo.yaml --kubeconfig-out /tmp/k.yaml\n```\n"
    run = run_page("page.md", tmp_path, page)
    assert (run.tmp / "k.yaml").exists()


def test_a_background_command_the_harness_cannot_wait_for_is_refused(tmp_path: Path) -> None:
    with pytest.raises(DocCommandError, match="cannot tell when the background command is ready"):
        run_page("page.md", tmp_path, "```sh\nsleep 30 &\n```\n")


def test_every_page_with_shell_blocks_is_run() -> None:
    """A new page with commands cannot escape the test."""
    skipped = {".git", ".venv", "node_modules"}
    pages = {
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*.md")
        if not skipped.intersection(path.relative_to(ROOT).parts)
        and not str(path.relative_to(ROOT)).startswith(("tests/data/", "simulations/data/"))
        and any(block.commands for block in parse_page(path.read_text(), path.name))
    }
    assert pages <= set(DOC_PAGES), sorted(pages - set(DOC_PAGES))
    assert {"README.md", "deploy/README.md", "docs/submit.md"} <= set(DOC_PAGES)


def test_few_blocks_are_only_illustrative() -> None:
    blocks = [block for page in DOC_PAGES for block in parse_page((ROOT / page).read_text(), page)]
    illustrative = [f"{b.page}:{b.line}" for b in blocks if b.illustrative]
    run = [b for b in blocks if not b.illustrative]
    assert sum(len(b.commands) for b in run) >= 60
    assert len(illustrative) <= 12, illustrative


def test_the_harness_leaves_no_process_behind(tmp_path: Path) -> None:
    page = "```sh\nplacer fleet up clusters/demo.yaml --kubeconfig-out /tmp/k &\nfalse\n```\n"
    with pytest.raises(DocCommandError):
        run_page("page.md", tmp_path, page)
    log = (tmp_path / "background-0.log").read_text()
    assert "stopping" in log
    assert not any(
        "--kubeconfig-out" in _cmdline(pid) and str(tmp_path) in _cmdline(pid)
        for pid in os.listdir("/proc")
        if pid.isdigit()
    )


def _cmdline(pid: str) -> str:
    try:
        return (Path("/proc") / pid / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""
