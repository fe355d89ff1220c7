"""manifest/: read-only capture of the agent runtime manifest, source digest, probes, generic surface discovery, identity comparison."""
