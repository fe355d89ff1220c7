from invoicekit.catalog import lookup
from tests.helpers import CATALOG


def test_web_shop_skus():
    assert lookup(CATALOG, "pen-blk") is CATALOG["PEN-BLK"]
    assert lookup(CATALOG, "nb-a5") is CATALOG["NB-A5"]
