"""The daemon: sync worker, scheduler, watcher, HTTP API, metrics, systemd notify."""
