"""Check and setup: is the project ready for the job, asked of Google, and make what is missing
that the tool may create (docs/check.md; issue 33).

    permissions.py        what each command needs of a project: APIs and IAM permissions
    project_check.py      `check [SPEC]`: APIs, permissions, buckets, quota, the service agent
    tensorboard_check.py  `check` and `setup` for the spec's TensorBoard
    project_setup.py      `setup SPEC`: the fixes `check` found that the tool may make
    check_text.py         `check` and `setup` for people
"""
