"""Executors: where episodes run (in process, a process pool, asyncio, Ray)."""
