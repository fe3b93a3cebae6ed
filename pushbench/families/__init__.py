"""Task families: one package per family (environment, units and its family-only machinery).

:mod:`.reposcan` (find identifiers in a frozen repository), :mod:`.dataops` (repair data files;
its subpackage :mod:`.dataops.public` is the DataOps-public family on published data),
:mod:`.swelite` (repair mutated functions until their tests pass). Each builds on
:mod:`pushbench.envs` (the shared Gymnasium base) and nothing above it.
"""
