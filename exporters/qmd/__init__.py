"""QMD sink: export every document as a markdown file for QMD's BM25 search.

Layout (ARCHITECTURE.md, "Document contract")::

    <export_dir>/<safe_persona>/sessions/<safeLabel>/turns/<turnId>.md
    <export_dir>/<safe_persona>/sessions/<safeLabel>/compactions/<turnId>.md
    <export_dir>/<safe_persona>/memory/...

``<safe_persona>`` is :func:`indexer.core.safe_names.safe_segment` of the ledger's
persona id; the rest is ``Document.path``, which is already a safe index path and
is validated again here (no absolute paths, no ``..``, every segment of
``[A-Za-z0-9._-]`` and not starting with a dot).

Each file is ``# <title>``, a blank line, then ``Document.text``. QMD takes the
first ``#``/``##`` line as the title (weight 4.0 in its BM25), so the heading
keeps titles meaningful; :meth:`QmdExporter.read` strips it again so that every
sink returns the same text. QMD's line numbers are therefore
:data:`HEADER_LINES` higher than the document's own.

QMD ignores every path segment that starts with a dot, so temporary files
(``.<name>.<random>.tmp``) and rebuild staging folders (``.rebuild-*``) are
invisible to it, and :meth:`QmdExporter.paths` skips them too.

QMD only sees changes after ``qmd update``; configure ``update_command`` (for
example ``["qmd", "update"]``) and the daemon runs it from :meth:`after_batch`.
A failing update is logged, never raised: the files are the export, QMD's index
catches up on the next successful update.
"""

from exporters.qmd.exporter import QmdExporter
from exporters.qmd.files import HEADER_LINES
from exporters.qmd.rebuild import QmdRebuild
from exporters.qmd.update import UpdateResult

__all__ = ["HEADER_LINES", "QmdExporter", "QmdRebuild", "UpdateResult"]
