import uuid

from broker.share_partition.sessions import INT32_MAX, ShareSessionCache, next_epoch
from protocol.errors import ErrorCode

T = uuid.uuid4()


def test_open_increment_close():
    cache = ShareSessionCache(max_sessions=10)
    opened = cache.begin("g", "m", 0, [(T, 0)], [], has_acknowledgements=False)
    assert opened.error == ErrorCode.NONE and opened.ended is None
    assert list(opened.session.partitions) == [(T, 0)]
    step = cache.begin("g", "m", 1, [(T, 1)], [(T, 0)], has_acknowledgements=True)
    assert step.error == ErrorCode.NONE and list(step.session.partitions) == [(T, 1)]
    assert cache.begin("g", "m", 1, [], [], False).error == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    assert cache.acknowledge("g", "m", 2).error == ErrorCode.NONE
    closed = cache.begin("g", "m", -1, [], [], True)
    assert closed.error == ErrorCode.NONE and closed.ended is opened.session
    assert cache.get("g", "m") is None
    assert cache.begin("g", "m", 4, [], [], False).error == ErrorCode.SHARE_SESSION_NOT_FOUND
    assert cache.acknowledge("g", "m", 4).error == ErrorCode.SHARE_SESSION_NOT_FOUND


def test_open_with_acknowledgements_is_invalid():
    cache = ShareSessionCache(max_sessions=10)
    assert cache.begin("g", "m", 0, [(T, 0)], [], has_acknowledgements=True).error == ErrorCode.INVALID_REQUEST
    assert len(cache) == 0


def test_acknowledge_cannot_open_and_final_fetch_cannot_add():
    cache = ShareSessionCache(max_sessions=10)
    assert cache.acknowledge("g", "m", 0).error == ErrorCode.INVALID_SHARE_SESSION_EPOCH
    cache.begin("g", "m", 0, [(T, 0)], [], False)
    assert cache.begin("g", "m", -1, [(T, 1)], [], False).error == ErrorCode.INVALID_REQUEST
    assert cache.get("g", "m") is not None


def test_reopen_replaces_and_reports_old_session():
    cache = ShareSessionCache(max_sessions=1)
    first = cache.begin("g", "m", 0, [(T, 0)], [], False).session
    again = cache.begin("g", "m", 0, [(T, 1)], [], False)
    assert again.error == ErrorCode.NONE and again.ended is first and len(cache) == 1


def test_session_limit():
    cache = ShareSessionCache(max_sessions=2)
    cache.begin("g", "a", 0, [], [], False)
    cache.begin("g", "b", 0, [], [], False)
    assert cache.begin("g", "c", 0, [], [], False).error == ErrorCode.SHARE_SESSION_LIMIT_REACHED
    assert cache.remove_member("g", "a") is not None
    assert cache.begin("g", "c", 0, [], [], False).error == ErrorCode.NONE


def test_epoch_wraps_to_one():
    assert next_epoch(5) == 6
    assert next_epoch(INT32_MAX) == 1
