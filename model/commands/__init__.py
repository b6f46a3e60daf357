"""The command-line tools, one module each, and their registry (registry.py), which both
`transformer-explained NAME` and `python -m model.NAME` read; shared.py holds the flags they share."""
