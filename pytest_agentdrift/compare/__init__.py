"""compare/: two recorded runs to a decision: paired statistics, gate, decision table, release-note ledger. Reads records; never runs agents."""
