"""Offline RepoScan agents: the judge heuristics, diligent, random, exhaustive and simulated."""
