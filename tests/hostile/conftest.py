"""Fixtures the hostile tests of runs in Cloud Storage share (a module may define its own)."""

from __future__ import annotations

import uuid

import pytest

from vertex_trainer.emulators.gcs import GcsEmulator


@pytest.fixture(scope="module")
def emulator():
    """One GCS emulator for the module's tests."""
    with GcsEmulator() as emu:
        yield emu


@pytest.fixture
def bucket(emulator) -> str:
    """A new, empty bucket of the module's emulator, for one test."""
    name = f"t-{uuid.uuid4().hex[:12]}"
    emulator.create_bucket(name)
    return name
