import pytest

from invoicekit.catalog import UnknownSKU, lookup
from tests.helpers import CATALOG


def test_lookup_is_case_insensitive():
    assert lookup(CATALOG, "pen-blk") is CATALOG["PEN-BLK"]
    assert lookup(CATALOG, "Nb-A5") is CATALOG["NB-A5"]


def test_unknown_sku_still_raises():
    with pytest.raises(UnknownSKU):
        lookup(CATALOG, "nope")
