"""Bundles: results that travel between machines, and are re-judged wherever they arrive.

* :mod:`.write` - ``pushbench bundle RUN_DIR... --out NAME.pushbench.tar.gz``: one or more run
  folders (``pushbench run`` and ``pushbench mcp``) as a deterministic archive holding the
  experiment, every episode's calls (and recorded out-of-band edits), the tasks with their
  manifest digests and family versions, versions and revision, and the sha256 of every member;
* :mod:`.archive` - the archive format, and the one extraction of a bundle from outside
  (member checks and caps of :func:`pushbench.sources.safe_extract`);
* :mod:`.verify` - ``pushbench verify BUNDLE... --out DIR``: refuse bundles whose tasks differ
  from this registry, replay every episode (:mod:`pushbench.runner.replay`), flag those that
  disagree, write the run-folder outputs from the replayed records only;
* :mod:`.leaderboard` - ``pushbench leaderboard BUNDLE... --out SITE``: verified bundles as
  one sortable table per family and target, with the run viewer's pages for each bundle.
"""

from .archive import SUFFIX, BundleError, extract_bundle, read_manifest
from .leaderboard import build_leaderboard
from .verify import verify_bundles
from .write import write_bundle

__all__ = [
    "SUFFIX",
    "BundleError",
    "build_leaderboard",
    "extract_bundle",
    "read_manifest",
    "verify_bundles",
    "write_bundle",
]
