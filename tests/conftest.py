import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # A module that shares expensive sessions between tests says which session an item
    # reads; under `--dist loadgroup` those items then run on one worker, once.
    for item in items:
        group_of = getattr(getattr(item, "module", None), "xdist_group_of", None)
        group = group_of(item) if group_of is not None else None
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
