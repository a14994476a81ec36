"""Vertex AI online prediction prices: what a deployed model's nodes cost an hour.

A deployed model is billed per node hour for as long as it is deployed, its min replicas at least,
whether or not it takes traffic. Prediction nodes have list prices of their own (they are not
the custom-training prices), and the shipped snapshot holds custom-training prices only
(skus.py leaves prediction SKUs out). So where the book has no `prediction` section the answer
is None with that reason; a training price is never shown in its place. A book with a
`prediction` section (the training shape: `families` core and RAM per region, `accelerators`
per region, usage "standard") is read as the training prices are.

Pure data and rules, like the package: no I/O, no heavy imports.
"""

from __future__ import annotations

from vertex_trainer.pricing import Price, PriceBook, machine_price

PRICES_PAGE = "https://cloud.google.com/vertex-ai/pricing#prediction-prices"


def node_price(
    book: PriceBook,
    *,
    machine_type: str,
    accelerator_type: str | None,
    accelerator_count: int,
    region: str | None,
) -> Price:
    """The hourly list price of one prediction node of this shape in `region`.

    Args:
        book: the prices.
        machine_type, accelerator_type, accelerator_count: the deployed model's machineSpec.
        region: the endpoint's region.
    Returns:
        A Price, or None with the reason (the book holds no prediction prices, or not this
        machine's)."""
    section = book.data.get("prediction")
    if not section:
        return Price(
            None,
            f"Vertex AI prediction prices are not in the price snapshot (it holds custom-training "
            f"prices, as of {book.as_of}); see {PRICES_PAGE}",
        )
    prediction = PriceBook({**section, "as_of": book.as_of, "source": book.where}, source=book.source)
    price = machine_price(
        prediction,
        machine_type=machine_type,
        accelerator_type=accelerator_type,
        accelerator_count=accelerator_count,
        region=region,
        strategy="standard",
    )
    if price.hourly is None:
        return Price(None, (price.reason or "not priced").replace("price snapshot", "prediction prices"))
    return price
