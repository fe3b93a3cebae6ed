"""Analysis: episode lines -> frame -> summaries, paired deltas, report.md, terminal tables.

Modules: :mod:`.frame` (the one frame builder), :mod:`.stats` (interval, randomization test,
Holm), :mod:`.deltas` (the one paired-delta engine), :mod:`.summary` (per-cell means, pass^k),
:mod:`.reference` (steps_ratio's diligent reference), :mod:`.failures` (failure classes),
:mod:`.report_md` (report.md), :mod:`.console` (80-column terminal tables), :mod:`.output`
(writing the files), :mod:`.calibration` (the interval calibration on synthetic data).
``pushbench.analysis.report`` re-exports the public names.
"""
