"""A notebook user refreshes the prices and prices a job in the same kernel. The shipped snapshot
was read once per process (an lru_cache), so after `vt.refresh_prices()` rewrote it, `vt.cost`,
a submit's budget check and every estimate went on with the old prices until the kernel
restarted, without a word. The snapshot is now read again once its file has changed."""

from __future__ import annotations

import shutil

import pytest

from tests.cli_support import edge_env
from vertex_trainer import api, pricing
from vertex_trainer.emulators.billing import FakeBilling
from vertex_trainer.settings import Settings

H100 = "Vertex AI: Training on Nvidia H100 80GB GPU running in Americas"


def test_prices_refreshed_in_a_notebook_are_the_prices_it_prices_with_next(tmp_path, monkeypatch):
    shipped = tmp_path / "snapshot.json"  # the package's snapshot, copied: the suite never rewrites it
    shutil.copyfile(str(pricing.shipped_path()), shipped)
    monkeypatch.setattr(pricing, "shipped_path", lambda: shipped)
    before = pricing.load_snapshot().accelerator("NVIDIA_H100_80GB", "us-central1", "standard")
    assert before != pytest.approx(31.5)
    with FakeBilling() as billing:
        billing.set_price(H100, 31.5)
        settings = Settings.from_environ(edge_env(tmp_path, VERTEX_TRAINER_BILLING_ENDPOINT=billing.url))
        assert api.refresh_prices(settings=settings)["path"] == str(shipped)
    after = pricing.load_snapshot().accelerator("NVIDIA_H100_80GB", "us-central1", "standard")
    assert after == pytest.approx(31.5)
