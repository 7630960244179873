"""Rebuilding a batch with another codec (a topic's compression.type): the same records and producer fields, a
valid batch; the codec levels; compression.type and the levels as log settings."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.config import BrokerConfig
from broker.log.config import PRODUCER_CODEC, LogConfig
from protocol import compression
from protocol import records as rec

CODECS = [rec.COMPRESSION_NONE, rec.COMPRESSION_GZIP, rec.COMPRESSION_SNAPPY, rec.COMPRESSION_LZ4,
          rec.COMPRESSION_ZSTD]
blobs = st.one_of(st.none(), st.binary(max_size=300))
records = st.lists(st.builds(rec.Record, key=blobs, value=blobs,
                             headers=st.lists(st.tuples(st.text(max_size=3), blobs), max_size=2),
                             timestamp=st.integers(0, 2**41)), min_size=1, max_size=60)


def _fields(header: rec.BatchHeader) -> tuple:
    kept = header._replace(batch_length=0, crc=0, attributes=header.attributes & ~rec.COMPRESSION_MASK)
    return tuple(kept)


@settings(max_examples=120, deadline=None)
@given(records, st.sampled_from(CODECS), st.sampled_from(CODECS), st.booleans(), st.integers(0, 2**20))
def test_recompress_keeps_records_and_producer_fields(batch_records, source, target, txn, sequence):
    batch = rec.build_batch(batch_records, compression=source, producer_id=9, producer_epoch=3,
                            base_sequence=sequence, transactional=txn)
    rebuilt = rec.recompress(batch, target, 1 if target in (rec.COMPRESSION_GZIP, rec.COMPRESSION_ZSTD) else None)
    (header,) = rec.validate_batches(rebuilt, check_records=True)
    assert header.attributes & rec.COMPRESSION_MASK == target
    assert _fields(header) == _fields(rec.read_header(batch))
    assert rec.decode_records(rebuilt) == rec.decode_records(batch)


def test_levels_change_the_output():
    data = b"".join(b"record %06d of a compressible payload; " % i for i in range(4000))
    for codec, low, high in ((rec.COMPRESSION_GZIP, 1, 9), (rec.COMPRESSION_ZSTD, 1, 19)):
        assert len(compression.compress(codec, data, level=high)) < len(compression.compress(codec, data, level=low))
    # gzip's -1 is zlib's default level, 6
    assert compression.compress(rec.COMPRESSION_GZIP, data, level=-1) == compression.compress(
        rec.COMPRESSION_GZIP, data, level=6)


def test_compression_type_as_a_log_setting():
    assert LogConfig.coerce(BrokerConfig().log_config({})).compression == PRODUCER_CODEC
    zstd = LogConfig.coerce(BrokerConfig().log_config({"compression.type": "zstd", "compression.zstd.level": "7"}))
    assert (zstd.compression, zstd.compression_level) == (rec.COMPRESSION_ZSTD, 7)
    broker_wide = BrokerConfig({"compression.type": "gzip", "compression.gzip.level": "2"})
    gzip = LogConfig.coerce(broker_wide.log_config({}))
    assert (gzip.compression, gzip.compression_level) == (rec.COMPRESSION_GZIP, 2)
    snappy = LogConfig.coerce(broker_wide.log_config({"compression.type": "snappy"}))
    assert (snappy.compression, snappy.compression_level) == (rec.COMPRESSION_SNAPPY, None)
    none = LogConfig.coerce(broker_wide.log_config({"compression.type": "uncompressed"}))
    assert none.compression == rec.COMPRESSION_NONE
