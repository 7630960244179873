"""The struct fast path for request headers agrees with the generated header codec."""

from hypothesis import given
from hypothesis import strategies as st

from protocol.codec import message_codec
from protocol.framing import _decode_common_header, decode_request_header, request_header_version


@given(
    api_key=st.sampled_from([0, 1, 3, 18, 19, 22, 76, 78, 999]),
    api_version=st.integers(0, 20),
    correlation_id=st.integers(-(2**31), 2**31 - 1),
    client_id=st.one_of(st.none(), st.text(max_size=40)),
    body=st.binary(max_size=8),
)
def test_fast_path_matches_codec(api_key, api_version, correlation_id, client_id, body):
    version = request_header_version(api_key, api_version)
    head = message_codec("RequestHeader", version).encode(
        {"request_api_key": api_key, "request_api_version": api_version, "correlation_id": correlation_id,
         "client_id": client_id}
    )
    frame = head + body
    via_codec = message_codec("RequestHeader", version).decode_prefix(frame)
    header, offset = decode_request_header(frame)
    assert offset == via_codec[1] == len(head)
    assert header.client_id == client_id and header.correlation_id == correlation_id
    fast = _decode_common_header(frame)
    if client_id is None:
        assert fast is None
    else:
        assert fast == (header, offset)


def test_header_tags_fall_back_to_codec():
    # Produce v9 header with one unknown header tag: the fast path declines, the codec skips the tag.
    frame = bytes.fromhex("00000009" "00000001" "0001" "61") + bytes([1, 5, 2, 0xAA, 0xBB]) + b"body"
    assert _decode_common_header(frame) is None
    header, offset = decode_request_header(frame)
    assert header.client_id == "a" and frame[offset:] == b"body"
