"""``pushbench view``: a static, offline browser for one run folder.

:func:`build_site` turns a run folder (``pushbench run`` or ``pushbench evaluate``) into a
directory of plain files (``index.html``, the viewer's own JavaScript and CSS under ``assets/``,
JSON data wrapped as script files under ``data/``) that opens from disk (``file://``) or through
:func:`serve` (loopback only). No network, no CDN; the assets ship in this package with their
licence (``static/LICENSE``).

Data flow: episode lines through the analysis frame (:mod:`pushbench.analysis.frame`), failure
classes from :mod:`pushbench.analysis.failures`, run facts from
:mod:`pushbench.runner.runinfo`, full records from :func:`pushbench.runner.rundir.load_trace`.
One data file per episode (``data/ep/<key>.js``) is loaded only when that episode is opened, so
the overview of a 10,000-episode run loads a few small files.
"""

from .serve import serve
from .site import OutDirError, build_site

__all__ = ["OutDirError", "build_site", "serve"]
