"""``make demo``: the main job on the embedded default (no real cluster needed).

For now it decomposes the seed example; later stages place it on the virtual demo fleet.
"""

from __future__ import annotations

import sys
from pathlib import Path

from placer.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    example = ROOT / "examples" / "jobset-demo.yaml"
    print(f"$ placer describe -f {example.relative_to(ROOT)}", flush=True)
    return cli_main(["describe", "-f", str(example)])


if __name__ == "__main__":
    sys.exit(main())
