"""Sinks: one ``Exporter`` protocol (base.py) and one backend per package."""
