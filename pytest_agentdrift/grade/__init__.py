"""grade/: checks on a finished run (graded copy, check kinds, function checks), scoring in layers, the evaluator identity, the grading-side pytest plugins."""
