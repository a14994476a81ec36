"""The training code that runs inside the vertex-trainer image: `python -m trainer.task`."""
