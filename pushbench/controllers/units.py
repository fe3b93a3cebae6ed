"""Work-unit controller components (UNITQGP); filled in with the DataOps-lite family."""
