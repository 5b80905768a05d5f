"""Ledger to sinks: build documents, skip unchanged ones, write, commit the cursor last (``sync_once``)."""
