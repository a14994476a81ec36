"""Report: a run's whole story (curves, speed, waiting, attempts, cost) as one self-contained
HTML page, or its plots as one PNG (docs/report.md).

    bounded_read.py  what the report reads, bounded and checked
    run_data.py      a run's data gathered from what it left behind (`RunData`)
    cloud_data.py    the same of a job on Vertex AI (or the sandbox's stand-in), and any run's cost
    plots.py         each plot a function drawing a `RunData` on a matplotlib Axes
    page.py          the page (or the PNG) from a `RunData`
"""
