# right/ holds solution directories (with test files of the fixture's own) that the tests play: data, not tests
collect_ignore = ["right"]
