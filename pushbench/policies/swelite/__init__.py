"""Offline SWE-lite agents: triage, random and the reference-fix oracle."""
