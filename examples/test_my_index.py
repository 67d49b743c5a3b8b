from rollcheck.testing import assert_protocol_safe

from my_index_fixed import MyIndexProtocol


def test_my_protocol_leaves_no_useless_checkpoint():
    assert_protocol_safe(MyIndexProtocol)
