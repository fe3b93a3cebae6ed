"""Environments: one gymnasium.Env per task family over a shared base (:mod:`.base`)."""
