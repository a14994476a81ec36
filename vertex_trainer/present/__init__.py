"""The presentation layer: text for people, made from the typed plans and records the API returns
(the CLI prints it; a notebook may too). Nothing here computes a figure or decides anything: it
only formats what it is given (docs/architecture.md)."""
