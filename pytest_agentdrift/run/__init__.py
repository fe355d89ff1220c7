"""run/: one agent run on a private copy: sandbox, runner, network proxy and relay, evidence gathered around the run. Imports tasks/ and agents/."""
