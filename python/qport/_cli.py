"""The `qport` console script of the Python package: runs the qport tool
built into the package (or QPORT_CLI, or the build tree's), so `qport
inspect ...` works on a venv's PATH after `pip install .`."""
from __future__ import annotations

import os
import sys

from ._lib import cli_path


def main() -> None:
    path = cli_path()
    if path is None:
        sys.stderr.write("qport: the qport tool is not in this installation (set QPORT_CLI to its path)\n")
        sys.exit(127)
    os.execv(path, [path] + sys.argv[1:])


if __name__ == "__main__":
    main()
