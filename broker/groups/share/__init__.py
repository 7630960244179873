"""Share groups (KIP-932): the group coordinator's share part (heartbeats, assignment, share-state initialization, share-offset admin)."""
