"""Maintenance: regenerate the root Dockerfile/.dockerignore from the templates.

python -m vertex_trainer.packaging --write-root-files
"""

import sys
from pathlib import Path

from vertex_trainer.packaging.templates import write_root_files

if sys.argv[1:] != ["--write-root-files"]:
    sys.exit("usage: python -m vertex_trainer.packaging --write-root-files")
write_root_files(Path(__file__).resolve().parents[2])
