"""record/: the recorded run on disk: atomic store, results schema, terminal and Markdown rendering."""
