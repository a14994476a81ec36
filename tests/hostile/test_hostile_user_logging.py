"""A notebook user converts images with two worker processes, then goes on in the same kernel.
`convert_data` quietened Beam's local job service logger (ERROR) for the run and left it so: every
later Beam run of the notebook hid that logger's warnings. The level it had is now put back when
the conversion ends."""

from __future__ import annotations

import logging

from PIL import Image

from vertex_trainer import api
from vertex_trainer.dataprep.request import Conversion, Runner
from vertex_trainer.settings import Settings

QUIETENED = "apache_beam.runners.portability.local_job_service"


def test_a_conversion_with_worker_processes_leaves_the_logging_as_it_was(tmp_path):
    for name in ("a", "b"):
        (tmp_path / "img" / name).mkdir(parents=True)
        for i in range(3):
            Image.new("RGB", (8, 8), (40 * i, 0, 0)).save(tmp_path / "img" / name / f"{i}.png")
    logger = logging.getLogger(QUIETENED)
    before = logger.level
    result = api.convert_data(
        Conversion(str(tmp_path / "img"), str(tmp_path / "out")),
        Runner(direct_workers=2),
        settings=Settings(),
        log=lambda line: None,
    )
    assert result.manifest is not None  # it ran, with its worker processes
    assert logger.level == before
