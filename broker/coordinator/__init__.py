"""One coordinator runtime (Kafka's coordinator-common): the group, share and transaction coordinators are its
shards.

- `shard`: `CoordinatorShard`, the Protocol a coordinator's state machine offers the runtime (load hooks,
  replay of records and transaction markers, reload scope);
- `runtime`: `CoordinatorRuntime`, loading by replay, writing (append, apply, durable commit), reloading when
  memory no longer matches the log, timers;
- `coordinator_log`: `CoordinatorLog`, the internal topic's partitions read back and appended to (the loader and
  partition writer the runtime is given);
- `periodic`: `PeriodicTask`, the one helper of the broker's periodic loops.
"""
