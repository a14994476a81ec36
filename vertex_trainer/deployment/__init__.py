"""Deploy and serve: a finished job's model registered and served on an endpoint, what is
deployed and what it costs an hour, one taken off (docs/serving.md; docs/contract.md section 5).

    deploy_request.py  a finished job (or a model directory) and the spec's `deploy:` -> DeployRequest
    deploy_text.py     `deploy` for people: the requests a dry run would send, the result
    endpoints_text.py  `endpoints` and `undeploy` for people

The Vertex AI clients it drives are vertex/model_deploy.py (register and deploy, at most once per
job), vertex/models.py and vertex/deployed.py; the `deploy:` block is spec/deploy_block.py. The
model served locally is the trainer's (trainer_image/trainer/serve.py). Other capabilities use
the names below only.
"""

from typing import TYPE_CHECKING

from vertex_trainer import interface

if TYPE_CHECKING:
    from vertex_trainer.deployment.deploy_request import DeployRequest, request

__all__ = ["DeployRequest", "request"]
if not TYPE_CHECKING:  # mypy sees the imports above; the names resolve on first use
    __getattr__, __dir__ = interface.exports(
        __name__, {"DeployRequest": "deploy_request", "request": "deploy_request"}
    )
