"""Command-line interface: the only package that imports click and rich."""
