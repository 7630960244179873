"""Consumer groups (KIP-848) and their classic-protocol members: the group coordinator's consumer part."""
