"""Offline DataOps agents: solvers, the diligent/random/simulated agents and the guessing floor."""
