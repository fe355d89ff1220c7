"""tasks/: loading and validating task directories, path patterns, tree snapshots of the frozen repo. Imports no later stage."""
