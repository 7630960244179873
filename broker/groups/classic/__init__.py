"""Classic groups (JoinGroup/SyncGroup/Heartbeat/LeaveGroup): the group coordinator's classic part."""
